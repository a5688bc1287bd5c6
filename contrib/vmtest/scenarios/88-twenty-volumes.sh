#!/bin/sh
# 88-twenty-volumes: a 20-disk NAS array's worth of open volumes (10
# through nbd, 10 through ublk, each named /dev/mapper/dN), idle: the
# daemons' VmRSS, proportional set size (Pss), private memory and VmLck,
# each and in total (INFO), at most 16 MiB of Pss each (VmRSS counts the
# binary's text, which all twenty share, whole in each: it varied from 12
# to 20 MiB between runs of one binary); every daemon has oom_score_adj
# -1000; all close.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd
export VMTEST_MAPPING=dm

key=$SCRATCH/key
mkkey "$key"

twenty() {
	mkimage "$SCRATCH/img" 24
	cs_format "$SCRATCH/img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "luksFormat failed"
	i=0
	while [ $i -lt 20 ]; do
		fe=nbd
		[ $i -lt 10 ] || fe=ublk
		cp --sparse=always "$SCRATCH/img" "$SCRATCH/img$i" 2>/dev/null || cp "$SCRATCH/img" "$SCRATCH/img$i"
		luksd open --key-file "$key" --frontend $fe "$SCRATCH/img$i" "d$i" >/dev/null 2>"$SCRATCH/err" || because "open d$i ($fe): $(cat "$SCRATCH/err")"
		[ -b "/dev/mapper/d$i" ] || because "/dev/mapper/d$i missing"
		i=$((i + 1))
	done
	sleep 3
	total_r=0 total_l=0 total_p=0 total_v=0 max_r=0 max_p=0
	i=0
	while [ $i -lt 20 ]; do
		pid=$(sed -n 's/^pid=//p' "/run/luksd/d$i/state")
		[ "$(cat /proc/"$pid"/oom_score_adj)" = -1000 ] || because "d$i: oom_score_adj $(cat /proc/"$pid"/oom_score_adj)"
		set -- $(mem_kib "$pid") $(pss_kib "$pid")
		total_r=$((total_r + $1))
		total_l=$((total_l + $2))
		total_p=$((total_p + $3))
		total_v=$((total_v + $4))
		[ "$1" -gt $max_r ] && max_r=$1
		[ "$3" -gt $max_p ] && max_p=$3
		i=$((i + 1))
	done
	note "$VMTEST_SCENARIO 20 idle volumes (10 nbd, 10 ublk): Pss $((total_p / 1024)) MiB in total (at most $max_p KiB each), private $((total_v / 1024)) MiB, VmRSS $((total_r / 1024)) MiB (at most $max_r KiB each), VmLck $total_l KiB in total"
	[ $max_p -le 16384 ] || because "an idle daemon has a proportional set of $max_p KiB (more than 16 MiB)"
	i=0
	while [ $i -lt 20 ]; do
		luksd close "d$i" || because "close d$i failed"
		[ ! -e "/dev/mapper/d$i" ] || because "close left /dev/mapper/d$i"
		i=$((i + 1))
	done
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096 20 volumes" twenty
