#!/bin/sh
# 60-crash-nbd: the daemon dies mid-write, like a power cut. ext4 on a luksd
# device (/dev/nbdN); files are written and synced (fsync), then a writer
# keeps writing and fsyncing while luksd is killed with SIGKILL. The dead
# mount is dropped (umount -l: nothing more reaches the image) and luksd
# opens the image again as a new device: mounting replays the journal,
# e2fsck -fn is clean afterwards, and everything synced before the kill is
# intact.
# requires: luksd-open-nbd luksd-crash-reattach-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"

# start_writer DIR: 512 KiB files written and fsynced one after another (16
# names in turn, so the filesystem never fills up), in the background (pid
# in $writer); $SCRATCH/written counts the files completed.
start_writer() {
	echo 0 >"$SCRATCH/written"
	rm -f "$SCRATCH/stop"
	(
		set +e
		i=0
		while [ ! -e "$SCRATCH/stop" ]; do
			if dd if=/dev/urandom of="$1/after.$((i % 16))" bs=64k count=8 conv=fsync 2>/dev/null; then
				i=$((i + 1))
				echo "$i" >"$SCRATCH/written"
			fi
		done
	) >/dev/null 2>&1 &
	writer=$!
}

written() { cat "$SCRATCH/written"; }

# stop_writer: the writer ends after its current file (within 60 s).
stop_writer() {
	touch "$SCRATCH/stop"
	_i=0
	while kill -0 "$writer" 2>/dev/null; do
		_i=$((_i + 1))
		[ $_i -le 600 ] || because "the writer did not end within 60 s"
		usleep 100000
	done
}

# prepare LINE: image, luksd device ($dev), ext4 mounted on $mnt with synced
# files listed in $SCRATCH/manifest.
prepare() {
	img=$SCRATCH/img
	mkimage "$img" 48
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 on $dev failed"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	mkpattern "$mnt/before.bin" 2
	mkdir "$mnt/keep"
	i=0
	while [ $i -lt 50 ]; do
		head -c $((i * 131 + 7)) /dev/urandom >"$mnt/keep/f$i"
		i=$((i + 1))
	done
	(cd "$mnt" && sha256sum before.bin keep/*) >"$SCRATCH/manifest"
	sync -f "$mnt" # syncfs: a global sync could hang on a dead device
	say "files written and synced"
}

# kill_daemon_while_writing: start the writer, let it run, SIGKILL luksd.
kill_daemon_while_writing() {
	start_writer "$mnt"
	# At least 3 s, and a finished file (a busy host slows the guest).
	sleep 3
	_i=0
	while [ "$(written)" -lt 1 ]; do
		_i=$((_i + 1))
		[ $_i -le 27 ] || because "the writer finished no file in 30 s"
		sleep 1
	done
	pids=$(luksd_pids)
	[ -n "$pids" ] || because "no luksd process to kill"
	say "kill -9 $pids (daemon) while the writer runs"
	kill -9 $pids
	wait_gone $pids || because "the killed daemon did not exit within 30 s"
}

# check_after_replay: journal replay by mount, e2fsck clean, synced data intact.
check_after_replay() {
	say "mount (journal replay), umount, e2fsck -fn, compare"
	mount -t ext4 "$dev" "$mnt" || because "mount after the crash (journal replay) failed"
	umount "$mnt" || because "umount after journal replay failed$(held_by "$mnt")"
	fsck_clean "$dev" "after journal replay"
	mount -t ext4 -o ro "$dev" "$mnt" || because "read-only mount failed"
	verify_tree "$mnt" || because "data synced before the kill is not intact"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
}

replay() {
	prepare "$1"
	kill_daemon_while_writing
	kill -9 "$writer" 2>/dev/null || true
	umount -l "$mnt" || because "cannot detach the dead mount"
	say "dead mount detached; opening the image again"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open after kill -9 failed: $(open_failure vol)"
	# ext4 marks itself needs_recovery while mounted: proof the crash was real
	dumpe2fs -h "$dev" 2>/dev/null | grep -q '^Filesystem features:.*needs_recovery' ||
		because "the filesystem was left clean: the kill did not interrupt it"
	check_after_replay
	luksd_close vol || because "luksd close failed"
	rm -f "$img"
}

# 62-recover-* source this file for its functions only.
[ -n "${CRASH_LIBRARY:-}" ] && return 0
for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label $FRONTEND" replay "$(cipher_line "$label")"
done
