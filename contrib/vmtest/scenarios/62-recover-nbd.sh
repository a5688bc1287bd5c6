#!/bin/sh
# 62-recover-nbd: the daemon dies mid-write and a new one takes over the
# same kernel device (`luksd open --recover --nbd-device /dev/nbdN`). As in
# 60, ext4 is mounted, files are synced and a writer keeps writing while
# luksd is killed with SIGKILL; after the takeover the writer goes on, the
# mount never notices (no I/O error in the kernel log), umount works,
# e2fsck -fn is clean and the synced data is intact.
# requires: luksd-open-nbd luksd-recover-nbd
FRONTEND=${FRONTEND:-nbd}
CRASH_LIBRARY=1
. /vmtest/scenarios/60-crash-nbd.sh

recover() {
	prepare "$1"
	errors_before=$(dmesg | grep -c 'I/O error' || true)
	kill_daemon_while_writing
	sleep 1
	new=$(luksd_open "$FRONTEND" "$img" vol "$key" --recover "--$FRONTEND-device" "$dev") ||
		because "luksd open --recover failed: $(open_failure vol)"
	[ "$new" = "$dev" ] || because "--recover attached $new, not $dev"
	say "took over $dev; is the writer still going?"
	n=$(written)
	i=0
	while [ "$(written)" -le $((n + 1)) ]; do
		i=$((i + 1))
		if [ $i -gt 30 ]; then
			dmesg | tail -n 20
			ps -o pid,stat,comm,args
			because "the writer finished no file in 30 s after the takeover"
		fi
		sleep 1
	done
	say "the writer goes on: $(written) files (was $n)"
	stop_writer
	say "writer stopped; umount"
	timeout 60 umount "$mnt" || because "umount after the takeover failed$(held_by "$mnt")"
	errors_after=$(dmesg | grep -c 'I/O error' || true)
	[ "$errors_after" = "$errors_before" ] || because "the kernel logged I/O errors: $(dmesg | grep 'I/O error' | tail -n1)"
	fsck_clean "$dev" "after the takeover"
	check_after_replay
	luksd_close vol || because "luksd close failed"
	rm -f "$img"
}

for label in aes-xts-plain64/4096; do
	check "$VMTEST_SCENARIO $label $FRONTEND" recover "$(cipher_line "$label")"
done
