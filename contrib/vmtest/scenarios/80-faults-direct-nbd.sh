#!/bin/sh
# 80-faults-direct-nbd: the backing device fails under an open volume, and
# heals. The volume sits on /dev/mapper/flt (device-mapper over a loop
# device over the image), switched to dm's error target (everything fails)
# or to dm-flakey failing writes only (reads work), then back to linear.
# The same steps run on the kernel's dm-crypt and on luksd in the same run:
# a direct 1 MiB write while failing returns EIO; reads never show the
# failed write (before or after dropping caches); a flush fails wherever
# it fails on dm-crypt. A write acknowledged just before the fault, whose
# flush then fails (dm-flakey fails flushes; dm's error target lets them
# succeed), is taken as lost: luksd's flushes keep failing after healing,
# every time, until it is written again, while dm-crypt's succeed (INFO
# lines give both). Then a rewrite, flush and close work, and the volume
# reads back (through dm-crypt) exactly what was written.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/a" 4 # on the volume before the fault, at 8 MiB
mkpattern "$SCRATCH/b" 1 # written at 8 MiB while failing
mkpattern "$SCRATCH/c" 1 # written at 8 MiB after healing
mkpattern "$SCRATCH/d" 1 # written at 20 MiB just before the fault, not flushed
# what 8..12 MiB must hold at the end: c, then the rest of a
{ cat "$SCRATCH/c"; dd if="$SCRATCH/a" bs=1M skip=1 2>/dev/null; } >"$SCRATCH/final"

# direct_write DEV FILE [MiB]: FILE at 8 MiB (or MiB) of DEV with O_DIRECT;
# the error text in $SCRATCH/dd.err.
direct_write() { dd if="$2" of="$1" bs=1M seek="${3:-8}" oflag=direct conv=notrunc 2>"$SCRATCH/dd.err"; }

# flushes DEV: two flushes, as "ok,ok", "fails,fails", ...
flushes() {
	_a=ok _b=ok
	flush_dev "$1" || _a=fails
	flush_dev "$1" || _b=fails
	echo "$_a,$_b"
}

# faults ENGINE MODE: ENGINE is dm-crypt or luksd, MODE error or
# error-writes. The flushes while failing go to $SCRATCH/flushes.MODE.ENGINE.
faults() {
	engine=$1 mode=$2
	img=$SCRATCH/img
	mkimage "$img" 48
	dev=$(fault_volume "$engine" "$FRONTEND" "$img" "$key") || because "$(cat "$SCRATCH/fault.why")"
	flt=/dev/mapper/flt
	write_at "$dev" "$SCRATCH/a" 8 || because "writing before the fault failed"
	flush_dev "$dev" || because "a flush before the fault failed"
	direct_write "$dev" "$SCRATCH/d" 20 || because "the write just before the fault failed"

	fault_set flt "$mode" || because "cannot switch flt to $mode"
	direct_write "$dev" "$SCRATCH/b" && because "a direct write to the failing device succeeded"
	grep -q 'Input/output error' "$SCRATCH/dd.err" || because "the direct write failed, but not with EIO: $(cat "$SCRATCH/dd.err")"
	failing=$(flushes "$dev")
	echo "$failing" >"$SCRATCH/flushes.$mode.$engine"
	if [ "$engine" = luksd ]; then
		[ "$failing" = "$(cat "$SCRATCH/flushes.$mode.dm-crypt" 2>/dev/null)" ] ||
			because "flushes while failing: $failing, on dm-crypt $(cat "$SCRATCH/flushes.$mode.dm-crypt" 2>/dev/null)"
	fi
	if [ "$mode" = error-writes ]; then
		[ "$(sum_at "$dev" 8 4)" = "$(sum_of "$SCRATCH/a")" ] || because "while failing, a read shows data the device does not hold"
	fi

	fault_set flt linear || because "cannot heal flt"
	[ "$(sum_at "$dev" 8 4)" = "$(sum_of "$SCRATCH/a")" ] || because "after healing, a read shows data that was never written"
	drop_caches
	[ "$(sum_at "$dev" 8 4)" = "$(sum_of "$SCRATCH/a")" ] || because "after dropping caches, the read changed"
	healed=$(flushes "$dev")
	if [ "$engine" = luksd ]; then
		# A failed flush may have lost the write before the fault.
		want=ok,ok
		[ "$failing" = ok,ok ] || want=fails,fails
		[ "$healed" = "$want" ] || because "after healing, before the lost write was rewritten: flushes $healed (want $want)"
		direct_write "$dev" "$SCRATCH/c" || because "the rewrite after healing failed: $(cat "$SCRATCH/dd.err")"
		[ "$(flushes "$dev")" = "$want" ] || because "rewriting another range settled the lost one"
	fi
	direct_write "$dev" "$SCRATCH/d" 20 || because "rewriting the write before the fault failed: $(cat "$SCRATCH/dd.err")"
	direct_write "$dev" "$SCRATCH/c" || because "the rewrite after healing failed: $(cat "$SCRATCH/dd.err")"
	flush_dev "$dev" || because "a flush after the rewrite failed"
	flush_dev "$dev" || because "a second flush after the rewrite failed"
	if [ "$engine" = dm-crypt ]; then
		cs_close vmt || because "cryptsetup close failed"
	else
		luksd_close vol 2>"$SCRATCH/close.err" || because "luksd close after healing and rewriting failed: $(cat "$SCRATCH/close.err")"
		[ ! -s "$SCRATCH/close.err" ] || because "close warned: $(cat "$SCRATCH/close.err")"
	fi
	cs_open "$flt" chk "$key" || because "cryptsetup open for the check failed"
	[ "$(sum_at /dev/mapper/chk 8 4)" = "$(sum_of "$SCRATCH/final")" ] || because "the volume does not hold what was acknowledged"
	[ "$(sum_at /dev/mapper/chk 20 1)" = "$(sum_of "$SCRATCH/d")" ] || because "the volume does not hold the rewritten write"
	cs_close chk
	note "$VMTEST_SCENARIO $mode $engine: direct write EIO; flushes while failing $failing; reads show only written data; after healing, before rewriting, flushes $healed; after it flush, close and data ok"
}

for mode in error error-writes; do
	check "$VMTEST_SCENARIO $mode dm-crypt" faults dm-crypt "$mode"
	check "$VMTEST_SCENARIO $mode luksd $FRONTEND" faults luksd "$mode"
done
