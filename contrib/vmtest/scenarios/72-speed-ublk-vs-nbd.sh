#!/bin/sh
# 72-speed-ublk-vs-nbd: luksd's two kernel frontends on the same volume in
# the same VM: fio 4 KiB random read at iodepth 32 (time-based) through
# /dev/nbdN and through /dev/ublkbN, alternating, VMTEST_SPEED_ROUNDS runs
# each (default 3; `make vmtest` runs one); prints the IOPS of every run,
# the ratio ublk/NBD of each pair of neighbouring runs, their median, and
# the ratio of the best runs as INFO lines (the VM shares its host, so
# single runs are noisy).
# The CPU is emulated, so only the ratio means anything; it is reported
# (target: ublk at least 1.2x NBD), not judged: PASS = every run moved data.
# alone: its figures compare engines; another VM beside it would move them
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd
SECS=${VMTEST_SPEED_SECONDS:-6}
ROUNDS=${VMTEST_SPEED_ROUNDS:-3}

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
	nbds= ublks= ratios= nbd=0 ublk=0
	for _ in $(seq "$ROUNDS"); do
		n=$(iops nbd "$img") || exit 1
		u=$(iops ublk "$img") || exit 1
		nbds="$nbds $n" ublks="$ublks $u"
		ratios="$ratios $(awk -v u="$u" -v n="$n" 'BEGIN { printf "%.2f", u / n }')"
		[ "$n" -gt "$nbd" ] && nbd=$n
		[ "$u" -gt "$ublk" ] && ublk=$u
	done
	median=$(echo $ratios | tr ' ' '\n' | sort -n | awk '{ r[NR] = $1 } END { print r[int((NR + 1) / 2)] }')
	note "$VMTEST_SCENARIO $label: randread 4k qd32 IOPS: ublk$ublks, nbd$nbds; ublk/nbd per pair$ratios, median $median, best/best $(awk -v u="$ublk" -v n="$nbd" 'BEGIN { printf "%.2f", u / n }')"
	rm -f "$img"
}

for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label" speed "$(cipher_line "$label")"
done
