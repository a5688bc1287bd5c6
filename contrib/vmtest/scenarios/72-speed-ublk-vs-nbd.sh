#!/bin/sh
# 72-speed-ublk-vs-nbd: luksd's two kernel frontends on the same volume in
# the same VM: fio 4 KiB random read at iodepth 32 (time-based) through
# /dev/nbdN, then through /dev/ublkbN, then NBD again; prints the IOPS of
# each and the ratio ublk/NBD (against the better NBD run) as INFO lines.
# The CPU is emulated, so only the ratio means anything; it is reported
# (target: ublk at least 1.2x NBD), not judged: PASS = every run moved data.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd
SECS=${VMTEST_SPEED_SECONDS:-10}

key=$SCRATCH/key
mkkey "$key"

# iops FRONTEND IMAGE prints the 4 KiB random read IOPS through FRONTEND.
iops() {
	_dev=$(luksd_open "$1" "$2" vol "$key") || { echo "luksd open --frontend $1 failed" >"$SCRATCH/why"; return 1; }
	_bw=$(fio_bw "$_dev" randread 4k 32 "$SECS") || { echo "fio on $_dev failed" >"$SCRATCH/why"; return 1; }
	luksd_close vol || { echo "luksd close ($1) failed" >"$SCRATCH/why"; return 1; }
	[ "${_bw:-0}" -gt 0 ] || { echo "fio on $_dev ($1) moved no data" >"$SCRATCH/why"; return 1; }
	echo $((_bw / 4))
}

speed() {
	label=$(cipher_field "$1" 1)
	img=$SCRATCH/img
	mkimage "$img" 80
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	# fill the volume so reads decrypt real data
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	dd if=/dev/urandom of=/dev/mapper/vmt bs=1M 2>/dev/null || true
	cs_close vmt || because "cryptsetup close failed"
	nbd1=$(iops nbd "$img") || exit 1
	ublk=$(iops ublk "$img") || exit 1
	nbd2=$(iops nbd "$img") || exit 1
	nbd=$nbd1
	[ "$nbd2" -gt "$nbd" ] && nbd=$nbd2
	note "$VMTEST_SCENARIO $label: randread 4k qd32: ublk $ublk IOPS, nbd $nbd1 / $nbd2 IOPS, ratio ublk/nbd $(awk -v u="$ublk" -v n="$nbd" 'BEGIN { printf "%.2f", u / n }')"
	rm -f "$img"
}

for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label" speed "$(cipher_line "$label")"
done
