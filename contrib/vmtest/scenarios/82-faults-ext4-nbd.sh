#!/bin/sh
# 82-faults-ext4-nbd: ext4 on a volume whose backing device fails while
# files are being written, then heals (dm's error target, or dm-flakey
# failing writes, under the loop device, as in scenario 80). The same steps on the kernel's dm-crypt and on
# luksd in the same run: what was synced before the fault survives; an
# fsync of a file written during the fault fails on luksd, and so does
# syncfs wherever it fails on dm-crypt (ext4 itself lets syncfs succeed
# over some lost data writes: "failed to convert unwritten extents"); after
# healing, umount and e2fsck -fn give the same verdict for luksd as for
# dm-crypt (INFO lines give both; a pair that disagrees runs once more,
# as that verdict moves with timing); e2fsck -fy then leaves it clean. When a
# flush failed while acknowledged writes were pending, luksd's flushes
# keep failing until those are written again, so e2fsck -fy cannot flush:
# then close must warn of them, and e2fsck -fy on the volume opened again
# must work. Close works; the volume reopens clean through dm-crypt with
# every synced file intact.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"

# ext4_faults ENGINE MODE: the steps; what fsync, syncfs and e2fsck -fn
# said goes to $SCRATCH/verdict.MODE.ENGINE.
ext4_faults() {
	engine=$1 mode=$2
	img=$SCRATCH/img
	mkimage "$img" 64
	dev=$(fault_volume "$engine" "$FRONTEND" "$img" "$key") || because "$(cat "$SCRATCH/fault.why")"
	flt=/dev/mapper/flt
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 failed"
	mount -t ext4 "$dev" "$mnt" || because "mount failed"
	mkdir "$mnt/before"
	i=0
	while [ $i -lt 20 ]; do
		head -c $((i * 4099 + 17)) /dev/urandom >"$mnt/before/f$i"
		i=$((i + 1))
	done
	(cd "$mnt" && sha256sum before/*) >"$SCRATCH/manifest"
	head -c 65536 /dev/urandom >"$mnt/direct"
	sync -f "$mnt" || because "sync before the fault failed"
	# Acknowledged but not flushed when the fault comes (an overwrite in
	# place, O_DIRECT): a failed flush may lose it.
	dd if=/dev/urandom of="$mnt/direct" bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null ||
		because "a direct write before the fault failed"

	fault_set flt "$mode" || because "cannot switch flt to $mode"
	mkdir -p "$mnt/during" 2>/dev/null || true
	i=0
	while [ $i -lt 10 ]; do
		head -c 65536 /dev/urandom >"$mnt/during/g$i" 2>/dev/null || true
		i=$((i + 1))
	done
	fsync=ok
	dd if=/dev/urandom of="$mnt/during/h" bs=64k count=4 conv=fsync 2>/dev/null || fsync=fails
	syncfs=ok
	sync -f "$mnt" 2>/dev/null || syncfs=fails
	if [ "$engine" = luksd ]; then
		[ "$fsync" = fails ] || because "fsync of a file written while the device failed succeeded"
	fi
	fault_set flt linear || because "cannot heal flt"

	umount "$mnt" || because "umount after healing failed$(held_by "$mnt")"
	rc=0
	e2fsck -fn "$dev" >"$SCRATCH/fsck.n" 2>&1 || rc=$?
	echo "fsync $fsync, syncfs $syncfs, e2fsck -fn exit $rc" >"$SCRATCH/verdict.$mode.$engine"
	rcy=0
	e2fsck -fy "$dev" >"$SCRATCH/fsck.y" 2>&1 || rcy=$?
	reopened=no
	if [ "$rcy" -gt 1 ] && [ "$engine" = luksd ]; then
		# A flush failed while writes were pending (ext4's background
		# zeroing of inode tables, say): luksd keeps failing flushes until
		# they are written again, and e2fsck does not rewrite them. Close
		# says what was lost; opened again, the volume starts afresh.
		luksd_close vol 2>"$SCRATCH/close.err" || because "close after the lost writes failed: $(cat "$SCRATCH/close.err")"
		grep -q 'WARNING: vol: .* may not have reached the device' "$SCRATCH/close.err" ||
			because "e2fsck -fy exit $rcy, and close did not warn of lost writes: $(grep -v '^$' "$SCRATCH/fsck.y" | tail -n2 | tr '\n' ' ')"
		dev=$(luksd_open "$FRONTEND" "$flt" vol "$key") || because "luksd open again failed: $(open_failure vol)"
		reopened="yes (e2fsck -fy exit $rcy: its flush failed)"
		rcy=0
		e2fsck -fy "$dev" >"$SCRATCH/fsck.y" 2>&1 || rcy=$?
	fi
	[ "$rcy" -le 1 ] || because "e2fsck -fy after healing exit $rcy: $(grep -v '^$' "$SCRATCH/fsck.y" | tail -n2 | tr '\n' ' ')"
	fsck_clean "$dev" "after e2fsck -fy"
	mount -t ext4 -o ro "$dev" "$mnt" || because "mount after repair failed"
	verify_tree "$mnt" || because "files synced before the fault are damaged"
	umount "$mnt"
	warned=no
	if [ "$engine" = dm-crypt ]; then
		cs_close vmt || because "cryptsetup close failed"
	else
		luksd_close vol 2>"$SCRATCH/close.err" || because "luksd close after healing failed: $(cat "$SCRATCH/close.err")"
		[ -s "$SCRATCH/close.err" ] && warned="yes ($(head -c 160 "$SCRATCH/close.err"))"
	fi
	cs_open "$flt" chk "$key" || because "cryptsetup open for the check failed"
	fsck_clean /dev/mapper/chk "reopened through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/chk "$mnt" || because "mount through dm-crypt failed"
	verify_tree "$mnt" || because "files read through dm-crypt differ"
	umount "$mnt"
	cs_close chk
	note "$VMTEST_SCENARIO $mode $engine: while failing fsync $fsync, syncfs $syncfs; after healing e2fsck -fn exit $rc ($(grep -c . "$SCRATCH/fsck.n") lines), -fy exit $rcy, then clean; reopened: $reopened; synced files intact; close warned: $warned"
}

# same MODE: luksd reported at least every failure dm-crypt reported, and
# e2fsck -fn after healing said the same.
same() {
	v=$SCRATCH/verdict.$1
	[ -s "$v.dm-crypt" ] && [ -s "$v.luksd" ] || because "a run above did not get as far as e2fsck"
	set -- $(cat "$v.dm-crypt") $(cat "$v.luksd")
	# fsync F, syncfs S, e2fsck -fn exit R (for each)
	[ "$2" = "${10}" ] || [ "$2" = "ok," ] || because "fsync: dm-crypt $2 luksd ${10}"
	[ "$4" = "${12}" ] || [ "$4" = "ok," ] || because "syncfs: dm-crypt $4 luksd ${12}"
	[ "$8" = "${16}" ] || because "e2fsck -fn after healing: dm-crypt exit $8, luksd exit ${16}"
}

for mode in error error-writes; do
	check "$VMTEST_SCENARIO $mode dm-crypt" ext4_faults dm-crypt "$mode"
	check "$VMTEST_SCENARIO $mode luksd $FRONTEND" ext4_faults luksd "$mode"
	# Which writes the fault catches moves with timing, and with it what
	# e2fsck -fn finds after healing (dm-crypt alone gave exit 0 in one
	# run and 12 in another): a pair that disagrees runs once more, and
	# the second pair must agree.
	if ! (same "$mode") 2>/dev/null; then
		note "$VMTEST_SCENARIO $mode: the first pair disagreed ($(cat "$SCRATCH/why" 2>/dev/null)); it runs again"
		check "$VMTEST_SCENARIO $mode dm-crypt (again)" ext4_faults dm-crypt "$mode"
		check "$VMTEST_SCENARIO $mode luksd $FRONTEND (again)" ext4_faults luksd "$mode"
	fi
	check "$VMTEST_SCENARIO $mode luksd $FRONTEND as dm-crypt" same "$mode"
done
