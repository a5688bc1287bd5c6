#!/bin/sh
# 70-speed-nbd: reference speed. The same fio jobs (4 KiB random write and
# read at iodepth 32, 1 MiB sequential write and read at iodepth 4, each
# time-based) through the kernel's dm-crypt and through luksd (/dev/nbdN) on
# the same image in the same VM; prints each bandwidth and the ratio
# luksd/dm-crypt as INFO lines. The CPU is emulated: only the ratio means
# anything, and it is reported, never judged (PASS = every job ran).
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
SECS=${VMTEST_SPEED_SECONDS:-2}
require_luksd

key=$SCRATCH/key
mkkey "$key"
JOBS='randwrite 4k 32
randread 4k 32
write 1M 4
read 1M 4'

# run_jobs DEV OUT runs every job on DEV; OUT gets "rw bs depth KiB/s" lines.
run_jobs() {
	: >"$2"
	echo "$JOBS" | while read -r rw bs depth; do
		bw=$(fio_bw "$1" "$rw" "$bs" "$depth" "$SECS") || { echo "fio $rw $bs on $1 failed" >"$SCRATCH/why"; exit 1; }
		[ "${bw:-0}" -gt 0 ] || { echo "fio $rw $bs on $1 moved no data" >"$SCRATCH/why"; exit 1; }
		echo "$rw $bs $depth $bw" >>"$2"
	done
}

speed() {
	label=$(cipher_field "$1" 1)
	img=$SCRATCH/img
	mkimage "$img" 80
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	# fill the image once, so that neither side meets unallocated holes
	dd if=/dev/zero of=/dev/mapper/vmt bs=1M conv=fsync 2>/dev/null || true
	run_jobs /dev/mapper/vmt "$SCRATCH/dm" || exit 1
	cs_close vmt || because "cryptsetup close failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	run_jobs "$dev" "$SCRATCH/luksd" || exit 1
	luksd_close vol || because "luksd close failed"
	paste -d' ' "$SCRATCH/dm" "$SCRATCH/luksd" | while read -r rw bs depth dm _ _ _ lk; do
		note "$VMTEST_SCENARIO $label: $rw $bs qd$depth: $(awk -v dm="$dm" -v lk="$lk" -v fe="$FRONTEND" \
			'BEGIN { printf "dm-crypt %.1f MiB/s, luksd %s %.1f MiB/s, ratio %.2f", dm / 1024, fe, lk / 1024, lk / dm }')"
	done
	rm -f "$img"
}

for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label $FRONTEND" speed "$(cipher_line "$label")"
done
