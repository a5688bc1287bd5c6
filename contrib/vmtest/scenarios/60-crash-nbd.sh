#!/bin/sh
# 60-crash-nbd: the daemon dies mid-write. ext4 on a luksd device
# (/dev/nbdN); files are written and synced (fsync), then a writer keeps
# writing and fsyncing while luksd is killed with SIGKILL. luksd is opened
# again on the same image: mounting replays the journal, e2fsck -fn is clean
# afterwards, and everything synced before the kill is intact.
# requires: luksd-open-nbd luksd-crash-reattach-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"

crash() {
	img=$SCRATCH/img
	mkimage "$img" 64
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(tail -n1 "$SCRATCH/luksd-open.vol.err" 2>/dev/null)"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 on $dev failed"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	mkpattern "$mnt/before.bin" 4
	mkdir "$mnt/keep"
	i=0
	while [ $i -lt 50 ]; do
		head -c $((i * 131 + 7)) /dev/urandom >"$mnt/keep/f$i"
		i=$((i + 1))
	done
	(cd "$mnt" && sha256sum before.bin keep/*) >"$SCRATCH/manifest"
	sync

	# keep the journal busy: files written and fsynced one after another
	(
		i=0
		while :; do
			dd if=/dev/urandom of="$mnt/after.$i" bs=64k count=8 conv=fsync 2>/dev/null
			i=$((i + 1))
		done
	) >/dev/null 2>&1 &
	writer=$!
	sleep 3
	[ -e "$mnt/after.1" ] || because "the writer wrote nothing in 3 s"
	pids=$(luksd_pids)
	[ -n "$pids" ] || because "no luksd process to kill"
	say "kill -9 $pids (daemon) while the writer runs"
	kill -9 $pids
	kill -9 "$writer" 2>/dev/null || true
	timeout 60 umount "$mnt" || umount -l "$mnt" || because "cannot unmount the dead device"

	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open after kill -9 failed: $(tail -n1 "$SCRATCH/luksd-open.vol.err" 2>/dev/null)"
	mount -t ext4 "$dev" "$mnt" || because "mount after the crash (journal replay) failed"
	umount "$mnt" || because "umount after journal replay failed"
	e2fsck -fn "$dev" >"$SCRATCH/fsck.out" 2>&1 || because "e2fsck -fn after journal replay: $(tail -n1 "$SCRATCH/fsck.out")"
	mount -t ext4 -o ro "$dev" "$mnt" || because "read-only mount failed"
	(cd "$mnt" && sha256sum -c -s "$SCRATCH/manifest") || because "data synced before the kill is not intact"
	umount "$mnt" || because "umount failed"
	luksd_close vol || because "luksd close failed"
	rm -f "$img"
}

for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label $FRONTEND" crash "$(cipher_line "$label")"
done
