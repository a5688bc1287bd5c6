#!/bin/sh
# 46-luksd-nbd-recover: what happens when the nbd daemon dies (SIGKILL).
# takeover: ext4 mounted, a writer running; `luksd open --recover` (the
# device taken from the dead daemon's state, and again with --nbd-device)
# hands new sockets to the same /dev/nbdN (NBD_CMD_RECONFIGURE) within the
# dead-connection timeout: the writer goes on (once the kernel re-sends what
# the dead daemon never answered, up to 30s later), no I/O error is logged,
# umount, e2fsck -fn clean, synced data intact, close.
# cleanup: after the kill, `luksd close NAME` disconnects the dead /dev/nbdN
# (its /sys/block/nbdN/backend names the volume) and removes the state.
# reopen: after the kill, a plain `luksd open NAME` does the same first.
# requires: luksd-open-nbd luksd-recover-nbd
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"

state_of() { sed -n "s/^$2=//p" "/run/luksd/$1/state"; }

running() {
	_st=$(cat /proc/"$1"/stat 2>/dev/null) || return 1
	case ${_st##*) } in Z*) return 1 ;; esac
}

# start_writer DIR: files written and fsynced one after another until
# $SCRATCH/stop exists (pid in $writer). It keeps the newest 16 files, so a
# fast host cannot fill the filesystem, and counts the files it finished in
# $SCRATCH/written (on tmpfs, outside the volume).
start_writer() {
	rm -f "$SCRATCH/stop"
	echo 0 >"$SCRATCH/written"
	(
		i=0
		while [ ! -e "$SCRATCH/stop" ]; do
			dd if=/dev/urandom of="$1/after.$i" bs=64k count=4 conv=fsync 2>"$SCRATCH/writer.err" || exit 1
			rm -f "$1/after.$((i - 16))"
			i=$((i + 1))
			echo $i >"$SCRATCH/written"
		done
	) &
	writer=$!
}

written() { cat "$SCRATCH/written"; }

stop_writer() {
	touch "$SCRATCH/stop"
	rc=0
	wait "$writer" || rc=$?
	return $rc
}

# kill_daemon: SIGKILL, then wait until the process is gone and its lock
# released (its last thread may still be exiting when the leader is a zombie).
kill_daemon() {
	pid=$(state_of vol pid)
	kill -9 "$pid"
	while running "$pid"; do usleep 50000; done
	_i=0
	until [ "$(luksd status vol >/dev/null 2>&1; echo $?)" = 4 ]; do
		_i=$((_i + 1))
		[ $_i -lt 100 ] || because "the killed daemon's lock is still held after 5s"
		usleep 50000
	done
}

setup() {
	img=$SCRATCH/img
	mkimage "$img" 48
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	dev=$(luksd open --key-file "$key" --frontend nbd "$img" vol 2>"$SCRATCH/err") || because "luksd open failed: $(tail -n1 "$SCRATCH/err")"
}

takeover() {
	setup "$1"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 failed"
	mount -t ext4 "$dev" "$mnt" || because "mount failed"
	mkpattern "$mnt/synced" 2
	sum=$(sum_of "$mnt/synced")
	sync
	errors_before=$(dmesg | grep -c 'I/O error' || true)
	for how in state device; do
		start_writer "$mnt"
		sleep 1
		kill_daemon
		if [ $how = state ]; then
			new=$(luksd open --recover --key-file "$key" --frontend nbd "$img" vol 2>"$SCRATCH/err") ||
				because "open --recover (device from the state) failed: $(tail -n1 "$SCRATCH/err")"
		else
			new=$(luksd open --recover --nbd-device "$dev" --key-file "$key" "$img" vol 2>"$SCRATCH/err") ||
				because "open --recover --nbd-device failed: $(tail -n1 "$SCRATCH/err")"
		fi
		[ "$new" = "$dev" ] || because "--recover attached $new, not $dev"
		# Requests the dead daemon never answered stay with the kernel
		# until their timer fires (30s with no NBD request timeout); the
		# kernel then re-sends them on the new connections.
		n=$(written)
		t=0
		until [ "$(written)" -gt $((n + 1)) ]; do
			t=$((t + 1))
			[ $t -lt 60 ] || { dmesg | tail -n 8; because "the writer made no progress within 60s of the takeover ($how)"; }
			sleep 1
		done
		note "$VMTEST_SCENARIO: the writer went on ${t}s after the takeover ($how)"
		stop_writer || because "the writer failed after the takeover ($how): $(tail -n1 "$SCRATCH/writer.err")"
	done
	umount "$mnt" || because "umount after the takeovers failed$(held_by "$mnt")"
	errors_after=$(dmesg | grep -c 'I/O error' || true)
	[ "$errors_after" = "$errors_before" ] || because "the kernel logged I/O errors: $(dmesg | grep 'I/O error' | tail -n1)"
	fsck_clean "$dev" "after the takeovers"
	mount -t ext4 -o ro "$dev" "$mnt" || because "remount failed"
	[ "$(sum_of "$mnt/synced")" = "$sum" ] || because "the synced file changed"
	umount "$mnt"
	luksd close vol || because "close after the takeovers failed"
	n=${dev#/dev/nbd}
	[ "$(cat /sys/block/nbd"$n"/size)" = 0 ] || because "$dev still connected after close"
	rm -f "$img"
}

cleanup() {
	setup "$1"
	n=${dev#/dev/nbd}
	kill_daemon
	[ "$(cat /sys/block/nbd"$n"/size)" != 0 ] || because "$dev disconnected by the kill alone (nothing to clean)"
	rc=0
	luksd status vol >/dev/null 2>&1 || rc=$?
	[ "$rc" = 4 ] || because "status of a dead daemon exit $rc, want 4"
	luksd close vol 2>"$SCRATCH/err" || because "close after the kill failed: $(cat "$SCRATCH/err")"
	[ "$(cat /sys/block/nbd"$n"/size)" = 0 ] || because "close left the dead $dev connected"
	[ ! -e /run/luksd/vol ] || because "close left /run/luksd/vol"
	rc=0
	luksd close vol 2>/dev/null || rc=$?
	[ "$rc" = 4 ] || because "second close exit $rc, want 4"
	rm -f "$img"
}

# reopen: after the kill, a plain `luksd open` of the same NAME releases the
# dead daemon's /dev/nbdN and serves the volume again (data intact).
reopen() {
	setup "$1"
	old=$dev
	mkpattern "$SCRATCH/pattern" 2
	write_at "$dev" "$SCRATCH/pattern" 1 || because "writing the pattern failed"
	kill_daemon
	new=$(luksd open --key-file "$key" --frontend nbd "$img" vol 2>"$SCRATCH/err") || because "reopen after the kill failed: $(tail -n1 "$SCRATCH/err")"
	[ "$new" = "$old" ] || [ "$(cat /sys/block/"${old#/dev/}"/size)" = 0 ] || because "the dead daemon's $old is still connected"
	[ "$(sum_at "$new" 1 2)" = "$(sum_of "$SCRATCH/pattern")" ] || because "the pattern reads back wrong after the reopen"
	luksd close vol || because "close failed"
	rm -f "$img"
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096 takeover nbd" takeover "$(cipher_line aes-xts-plain64/4096)"
check "$VMTEST_SCENARIO aes-xts-plain64/512 cleanup nbd" cleanup "$(cipher_line aes-xts-plain64/512)"
check "$VMTEST_SCENARIO aes-xts-plain64/4096 reopen nbd" reopen "$(cipher_line aes-xts-plain64/4096)"
