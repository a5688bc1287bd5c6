#!/bin/sh
# 86-memory: what each open volume's daemon holds. Four volumes open through
# nbd and four through ublk, idle: VmRSS and VmLck of each daemon (INFO
# lines); then 1 MiB writes and reads at iodepth 32 on one of each (fio,
# VMTEST_SPEED_SECONDS per job) while VmRSS and VmLck are sampled, and again
# idle afterwards. Only the key schedule and the I/O buffers are locked, so
# VmLck stays at most 16 MiB idle and 64 MiB under load (mlockall locked
# the runtime's whole reserved address space: ~1.26 GB VmLck, ~84 MB RSS).
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
secs=${VMTEST_SPEED_SECONDS:-2}

pid_of() { sed -n 's/^pid=//p' "/run/luksd/$1/state"; }

# peak PID SECONDS samples VmRSS and VmLck every 0.2 s and prints the
# largest of each: "RSS LCK" (KiB).
peak() {
	_r=0 _l=0 _n=0
	while [ $_n -lt $(($2 * 5)) ]; do
		set -- "$1" "$2" $(mem_kib "$1")
		[ "${3:-0}" -gt $_r ] && _r=$3
		[ "${4:-0}" -gt $_l ] && _l=$4
		_n=$((_n + 1))
		usleep 200000
	done
	echo "$_r $_l"
}

memory() {
	fe=$1
	i=0
	while [ $i -lt 4 ]; do
		mkimage "$SCRATCH/img$i" 80
		cs_format "$SCRATCH/img$i" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "luksFormat failed"
		luksd_open "$fe" "$SCRATCH/img$i" "m$i" "$key" >"$SCRATCH/dev$i" || because "luksd open failed: $(open_failure "m$i")"
		i=$((i + 1))
	done
	sleep 3
	total_r=0 total_l=0 max_l=0
	i=0
	while [ $i -lt 4 ]; do
		set -- $(mem_kib "$(pid_of "m$i")")
		total_r=$((total_r + $1))
		total_l=$((total_l + $2))
		[ "$2" -gt $max_l ] && max_l=$2
		i=$((i + 1))
	done
	note "$VMTEST_SCENARIO $fe idle: 4 daemons, VmRSS $((total_r / 4)) KiB and VmLck $((total_l / 4)) KiB each on average (VmLck at most $max_l KiB)"
	[ $max_l -le 16384 ] || because "an idle daemon locks $max_l KiB (more than 16 MiB)"

	dev=$(cat "$SCRATCH/dev0")
	pid=$(pid_of m0)
	peak "$pid" $((secs * 2 + 2)) >"$SCRATCH/peak" &
	sampler=$!
	fio --name=w --filename="$dev" --ioengine=libaio --direct=1 --rw=write --bs=1M --iodepth=32 \
		--size=48M --runtime="$secs" --time_based --output=/dev/null || because "fio write failed"
	fio --name=r --filename="$dev" --ioengine=libaio --direct=1 --rw=read --bs=1M --iodepth=32 \
		--size=48M --runtime="$secs" --time_based --output=/dev/null || because "fio read failed"
	wait "$sampler"
	set -- $(cat "$SCRATCH/peak")
	sleep 3
	idle=$(mem_kib "$pid")
	note "$VMTEST_SCENARIO $fe under 1 MiB iodepth-32 load: peak VmRSS $1 KiB, VmLck $2 KiB; 3 s later VmRSS/VmLck ${idle% *}/${idle#* } KiB"
	[ "$2" -le 65536 ] || because "the daemon locked $2 KiB under load (more than 64 MiB)"
	i=0
	while [ $i -lt 4 ]; do
		luksd_close "m$i" || because "close m$i failed"
		i=$((i + 1))
	done
}

check "$VMTEST_SCENARIO nbd" memory nbd
check "$VMTEST_SCENARIO ublk" memory ublk
