#!/bin/sh
# 45-luksd-nbd-lifecycle: `luksd open/status/close` through the kernel's NBD
# driver. A cryptsetup-made and a luksd-made volume each open as /dev/nbdN;
# a pattern written there reads back and is what dm-crypt reads; mkfs.ext4 and
# e2fsck; status while mounted says "in use" and close refuses (exit 5);
# close, then status exit 4. Also: every daemon thread is an IO flusher
# (PF_MEMALLOC_NOIO in /proc/PID/task/*/stat), exit 5 for an active NAME,
# --nbd-device, --readonly, the header's persistent allow-discards flag,
# SIGTERM, --foreground.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"
PF_MEMALLOC_NOIO=524288 # 0x00080000, include/linux/sched.h

# state_of NAME KEY prints a value of the daemon's state file.
state_of() { sed -n "s/^$2=//p" "/run/luksd/$1/state"; }

# all_threads_io_flusher PID: every thread carries PF_MEMALLOC_NOIO.
all_threads_io_flusher() {
	n=0
	for s in /proc/"$1"/task/*/stat; do
		# field 9 (flags), counted after the ")" that ends the comm field
		flags=$(sed 's/.*) //' "$s" | cut -d' ' -f7)
		[ $((flags & PF_MEMALLOC_NOIO)) -ne 0 ] || { echo "thread $s flags $flags" >&2; return 1; }
		n=$((n + 1))
	done
	[ "$n" -gt 1 ]
}

# running PID: the process exists and is not a zombie (init reaps late).
running() {
	_st=$(cat /proc/"$1"/stat 2>/dev/null) || return 1
	case ${_st##*) } in Z*) return 1 ;; esac
}

lifecycle() {
	line=$1 maker=$2
	cipher=$(cipher_field "$line" 3)
	sector=$(cipher_field "$line" 5)
	img=$SCRATCH/img
	mkimage "$img" 48
	if [ "$maker" = cryptsetup ]; then
		cs_format "$img" "$key" "$line" || because "cryptsetup luksFormat failed"
	else
		luksd_format "$img" "$key" "$line" || because "luksd luksFormat failed"
	fi
	rm -f /run/luksd/vol.log
	# luksd open detaches by default: it prints the device once it exists
	# and its exit code is the daemon's.
	dev=$(luksd open --key-file "$key" --frontend nbd "$img" vol 2>"$SCRATCH/err") || because "luksd open failed: $(tail -n1 "$SCRATCH/err")"
	case $dev in /dev/nbd[0-9]*) ;; *) because "open printed $dev, not /dev/nbdN" ;; esac
	[ -b "$dev" ] || because "$dev is not a block device"
	[ "$(blockdev --getss "$dev")" = "$sector" ] || because "logical block size $(blockdev --getss "$dev"), want $sector"
	want=$(( $(stat -c %s "$img") - $(data_offset_mib "$img") * 1048576 ))
	[ "$(blockdev --getsize64 "$dev")" = "$want" ] || because "size $(blockdev --getsize64 "$dev"), want $want"
	n=${dev#/dev/nbd}
	[ "$(cat /sys/block/nbd"$n"/backend)" = "luksd:vol" ] || because "backend $(cat /sys/block/nbd"$n"/backend)"

	pid=$(state_of vol pid)
	[ "$(state_of vol io-flusher)" = true ] || because "state io-flusher=$(state_of vol io-flusher)"
	[ "$(state_of vol memory-locked)" = true ] || because "state memory-locked=$(state_of vol memory-locked)"
	all_threads_io_flusher "$pid" || because "a thread of daemon $pid is not an IO flusher"
	grep -q '^VmLck:[[:space:]]*[1-9]' /proc/"$pid"/status || because "daemon memory not locked: $(grep VmLck /proc/"$pid"/status)"

	luksd status vol >"$SCRATCH/status" || because "status exit $?"
	grep -qx '/dev/mapper/vol is active.' "$SCRATCH/status" || because "status: $(head -n1 "$SCRATCH/status")"
	grep -qx "  cipher:  $cipher" "$SCRATCH/status" || because "status cipher: $(grep cipher: "$SCRATCH/status")"
	grep -qx "  block device: $dev" "$SCRATCH/status" || because "status device: $(grep 'block device' "$SCRATCH/status")"
	grep -qx "  frontend: nbd" "$SCRATCH/status" || because "status lacks the frontend"
	grep -qx "  sector size:  $sector" "$SCRATCH/status" || because "status sector size: $(grep 'sector size' "$SCRATCH/status")"

	rc=0
	luksd open --key-file "$key" --frontend nbd "$img" vol 2>"$SCRATCH/err" || rc=$?
	[ "$rc" = 5 ] || because "second open of vol exit $rc, want 5"

	mkpattern "$SCRATCH/pattern" 4
	write_at "$dev" "$SCRATCH/pattern" 3 || because "writing the pattern failed"
	drop_caches
	[ "$(sum_at "$dev" 3 4)" = "$(sum_of "$SCRATCH/pattern")" ] || because "pattern reads back wrong"

	mkfs.ext4 -q -F "$dev" 2>"$SCRATCH/err" || because "mkfs.ext4: $(tail -n1 "$SCRATCH/err")"
	mount -t ext4 "$dev" "$mnt" || because "mount failed"
	cp "$SCRATCH/pattern" "$mnt/p" || because "copy failed"
	luksd status vol | grep -qx '/dev/mapper/vol is active and is in use.' || because "status while mounted: $(luksd status vol | head -n1)"
	rc=0
	luksd close vol 2>"$SCRATCH/err" || rc=$?
	[ "$rc" = 5 ] || because "close while mounted exit $rc, want 5 ($(cat "$SCRATCH/err"))"
	[ -b "$dev" ] && [ -e /run/luksd/vol/state ] || because "refused close still tore the device down"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	fsck_clean "$dev" "after the steps"
	luksd close vol || because "close failed"
	[ ! -e /run/luksd/vol ] || because "state left in /run/luksd/vol"
	# The detached daemon's log outlives it.
	grep -q "vol: LUKS[12] $img active on $dev (frontend nbd, pid $pid)\$" /run/luksd/vol.log || because "log lacks the activation: $(cat /run/luksd/vol.log)"
	tail -n1 /run/luksd/vol.log | grep -q 'vol: closed$' || because "log does not end with the close: $(tail -n1 /run/luksd/vol.log)"
	[ "$(cat /sys/block/nbd"$n"/size)" = 0 ] || because "$dev still has $(cat /sys/block/nbd"$n"/size) sectors after close"
	running "$pid" && because "daemon $pid still running after close"
	rc=0
	luksd status vol >"$SCRATCH/status" || rc=$?
	[ "$rc" = 4 ] && grep -qx '/dev/mapper/vol is inactive.' "$SCRATCH/status" || because "status after close exit $rc: $(cat "$SCRATCH/status")"
	rc=0
	luksd close vol 2>/dev/null || rc=$?
	[ "$rc" = 4 ] || because "second close exit $rc, want 4"

	# The kernel's dm-crypt reads what luksd wrote.
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mount through dm-crypt failed"
	cmp -s "$mnt/p" "$SCRATCH/pattern" || because "file read through dm-crypt differs"
	umount "$mnt"
	cs_close vmt
	rm -f "$img"
}

# options: --nbd-device, --readonly, persistent allow-discards, SIGTERM,
# --foreground.
options() {
	line=$1
	img=$SCRATCH/img
	mkimage "$img" 32
	cs_format "$img" "$key" "$line" || because "cryptsetup luksFormat failed"
	out=$(luksd open --key-file "$key" --frontend nbd --nbd-device /dev/nbd5 "$img" vol) || because "open --nbd-device failed"
	[ "$out" = /dev/nbd5 ] || because "--nbd-device /dev/nbd5 gave $out"
	# /dev/nbd5 takes discards (refresh --allow-discards may allow them)
	# but without --allow-discards none reaches the image.
	dd if=/dev/zero of=/dev/nbd5 bs=1M count=8 oflag=direct 2>/dev/null || because "writing to /dev/nbd5 failed"
	blocks=$(stat -c %b "$img")
	blkdiscard -o 1048576 -l 4194304 /dev/nbd5 2>/dev/null || true
	[ "$(stat -c %b "$img")" = "$blocks" ] || because "a discard without --allow-discards punched a hole in the image"
	pid=$(state_of vol pid)
	kill -TERM "$pid"
	i=0
	while running "$pid"; do
		i=$((i + 1))
		[ $i -lt 100 ] || because "daemon ignored SIGTERM"
		usleep 100000
	done
	[ ! -e /run/luksd/vol ] || because "SIGTERM left the state"
	[ "$(cat /sys/block/nbd5/size)" = 0 ] || because "SIGTERM left /dev/nbd5 connected"

	out=$(luksd open --readonly --key-file "$key" --frontend nbd "$img" ro) || because "open --readonly failed"
	[ "$(blockdev --getro "$out")" = 1 ] || because "$out is not read-only"
	dd if=/dev/zero of="$out" bs=4096 count=1 oflag=direct 2>/dev/null && because "a write to the read-only $out succeeded"
	luksd status ro | grep -qx '  mode:    readonly' || because "status does not say readonly"
	luksd close ro || because "close ro failed"

	# The header's persistent allow-discards flag, set by cryptsetup,
	# turns discards on without the option, as in dm-crypt.
	cryptsetup open --key-file "$key" --allow-discards --persistent "$img" pd || because "cryptsetup open --persistent failed"
	cryptsetup close pd
	cryptsetup luksDump "$img" | grep -q '^Flags:.*allow-discards' || because "cryptsetup did not store allow-discards"
	out=$(luksd open --key-file "$key" --frontend nbd "$img" pd) || because "open of the allow-discards volume failed"
	luksd status pd | grep -qx '  flags:   discards ' || because "status does not show the persistent discards flag"
	[ "$(cat /sys/block/"${out#/dev/}"/queue/discard_max_bytes)" -gt 0 ] || because "$out offers no discards though the header allows them"
	dd if=/dev/zero of="$out" bs=1M count=8 oflag=direct 2>/dev/null || because "writing to $out failed"
	blocks=$(stat -c %b "$img")
	blkdiscard -o 1048576 -l 4194304 "$out" || because "blkdiscard on $out failed"
	[ "$(stat -c %b "$img")" -lt "$blocks" ] || because "the discard punched no hole in the image ($blocks blocks before, $(stat -c %b "$img") after)"
	luksd close pd || because "close pd failed"

	# --foreground stays, prints the device once it exists, and exits 0
	# after close.
	luksd open --foreground --key-file "$key" --frontend nbd "$img" fg >"$SCRATCH/fg.out" 2>"$SCRATCH/fg.err" &
	fgpid=$!
	i=0
	until grep -q '^/dev/nbd' "$SCRATCH/fg.out"; do
		kill -0 "$fgpid" 2>/dev/null || because "foreground open exited: $(cat "$SCRATCH/fg.err")"
		i=$((i + 1))
		[ $i -lt 300 ] || because "foreground open printed no device"
		usleep 100000
	done
	[ "$(state_of fg pid)" = "$fgpid" ] || because "foreground daemon pid $(state_of fg pid), want $fgpid (same process)"
	all_threads_io_flusher "$fgpid" || because "a thread of the foreground daemon is not an IO flusher"
	luksd close fg || because "close fg failed"
	rc=0
	wait "$fgpid" || rc=$?
	[ "$rc" = 0 ] || because "foreground daemon exited $rc"
	grep -q 'fg: closed$' "$SCRATCH/fg.err" || because "foreground daemon did not log the close on stderr: $(cat "$SCRATCH/fg.err")"

	# SIGTERM to a foreground daemon: flush, disconnect, exit 0.
	luksd open --foreground --key-file "$key" --frontend nbd "$img" fg >"$SCRATCH/fg.out" 2>"$SCRATCH/fg.err" &
	fgpid=$!
	i=0
	until [ -e /run/luksd/fg/state ]; do
		kill -0 "$fgpid" 2>/dev/null || because "second foreground open exited: $(cat "$SCRATCH/fg.err")"
		i=$((i + 1))
		[ $i -lt 300 ] || because "second foreground open made no device"
		usleep 100000
	done
	fgdev=$(state_of fg device)
	kill -TERM "$fgpid"
	rc=0
	wait "$fgpid" || rc=$?
	[ "$rc" = 0 ] || because "foreground daemon exited $rc after SIGTERM"
	grep -q 'fg: terminated, detaching$' "$SCRATCH/fg.err" || because "foreground daemon did not log SIGTERM: $(cat "$SCRATCH/fg.err")"
	[ "$(cat /sys/block/"${fgdev#/dev/}"/size)" = 0 ] || because "SIGTERM left $fgdev connected"
	[ ! -e /run/luksd/fg ] || because "SIGTERM left /run/luksd/fg"
	rm -f "$img"
}

for label in aes-xts-plain64/4096 aes-cbc-essiv:sha256/luks1; do
	check "$VMTEST_SCENARIO $label cryptsetup-made nbd" lifecycle "$(cipher_line "$label")" cryptsetup
done
for label in xchacha12,aes-adiantum-plain64/512; do
	check "$VMTEST_SCENARIO $label luksd-made nbd" lifecycle "$(cipher_line "$label")" luksd
done
check "$VMTEST_SCENARIO aes-xts-plain64/512 options nbd" options "$(cipher_line aes-xts-plain64/512)"
