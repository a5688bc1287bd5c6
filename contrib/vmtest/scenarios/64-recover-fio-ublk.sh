#!/bin/sh
# 64-recover-fio-ublk: ublk user recovery. fio writes 4 KiB blocks at random
# with crc32c in each (iodepth 32) on /dev/ublkbN and then reads them back;
# meanwhile the luksd daemon is killed with SIGKILL. The kernel holds the
# device and its requests; `luksd open --recover` serves the same
# /dev/ublkbN again, the held requests are reissued, and fio ends with every
# block verified. dm-crypt then reads the same blocks back (verify_only).
# requires: luksd-open-ublk luksd-recover-ublk
# timeout: 600
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"

fio_job() {
	_dev=$1
	shift
	fio --name=recover-verify --filename="$_dev" --ioengine=libaio --direct=1 \
		--rw=randwrite --bs=4k --iodepth=32 --size=24M --randseed=4321 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "$@"
}

recover() {
	img=$SCRATCH/img
	mkimage "$img" 40
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open ublk "$img" vol "$key") || because "luksd open failed: $(tail -n1 "$SCRATCH/luksd-open.vol.err" 2>/dev/null)"
	# 1000 IOPS at most: the 6144 writes take at least 6 s, so fio is
	# still writing when the daemon is killed however fast the host is.
	fio_job "$dev" --rate_iops=1000 >"$SCRATCH/fio.out" 2>&1 &
	fio=$!
	sleep 3
	kill -0 "$fio" 2>/dev/null || because "fio ended before the kill: $(tail -n2 "$SCRATCH/fio.out")"
	pids=$(luksd_pids)
	[ -n "$pids" ] || because "no luksd daemon to kill"
	say "kill -9 $pids while fio runs on $dev"
	kill -9 $pids
	sleep 1
	kill -0 "$fio" 2>/dev/null || because "fio ended while no daemon served $dev: $(tail -n2 "$SCRATCH/fio.out")"
	dev2=$(timeout 90 luksd open --recover --key-file "$key" --frontend ublk "$img" vol 2>"$SCRATCH/recover.err") ||
		because "luksd open --recover failed: $(tail -n1 "$SCRATCH/recover.err")"
	dev2=$(echo "$dev2" | grep -o '/dev/[^ ]*' | head -n1)
	[ "$dev2" = "$dev" ] || because "recovery gave $dev2, not $dev"
	rc=0
	wait "$fio" || rc=$?
	[ $rc = 0 ] || because "fio across the recovery failed ($rc): $(grep -m1 -i 'verify\|err' "$SCRATCH/fio.out")"
	grep -q 'err= 0' "$SCRATCH/fio.out" || because "fio reported errors: $(grep -m1 'err=' "$SCRATCH/fio.out")"
	luksd_close vol || because "luksd close after recovery failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	fio_job /dev/mapper/vmt --verify_only >"$SCRATCH/fio2.out" 2>&1 ||
		because "dm-crypt verify_only after recovery: $(grep -m1 -i 'verify\|err' "$SCRATCH/fio2.out")"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img"
}

for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label ublk" recover "$(cipher_line "$label")"
done
