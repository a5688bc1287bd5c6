#!/bin/sh
# 58-reencrypt-open-nbd: a volume whose reencryption (aes-xts to Adiantum)
# was killed -9 part-way, by cryptsetup or by luksd, opens with luksd as
# /dev/nbdN and reads the pattern dm-crypt wrote before, every byte; the
# kernel's dm-crypt (cryptsetup open on a separate copy: a table of crypt
# targets, one per segment) reads the same, and both status outputs say
# the reencryption is in progress. Data written through luksd then
# survives `cryptsetup reencrypt --resume-only` to the end.
# requires: luksd-reencrypt luksd-open-nbd
# timeout: 600
. /vmtest/guest/lib.sh
. /vmtest/guest/reencrypt.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/pattern" 48
mkpattern "$SCRATCH/patch" 8
want=$(sum_of "$SCRATCH/pattern")
to="--cipher xchacha12,aes-adiantum-plain64 --key-size 256 --hotzone-size 1M"

open_mid() {
	first=$1 img=$SCRATCH/img copy=$SCRATCH/copy
	reenc_fresh "$img" "$SCRATCH/pattern"
	# shellcheck disable=SC2086
	"$first" reencrypt --init-only --force-offline-reencrypt -q --key-file "$key" $to "$img" || because "$first --init-only failed"
	reenc_killed "$first" "$img"
	cp "$img" "$copy"

	# The kernel's view, on its own copy.
	cs_open "$copy" vmt "$key" || because "cryptsetup open of the volume in reencryption failed"
	targets=$(dmsetup table vmt | grep -c " crypt ")
	note "$VMTEST_SCENARIO $first: dm-crypt maps $targets crypt targets: $(dmsetup table vmt | awk '{ print $1, $2, $4 }' | tr '\n' ';')"
	[ "$targets" -ge 2 ] || because "dm-crypt maps $targets crypt target(s): the reencryption is not part-way"
	cryptsetup status vmt | grep -q "reencryption:  in-progress" || because "cryptsetup status shows no reencryption"
	[ "$(sum_at /dev/mapper/vmt 0 48)" = "$want" ] || because "dm-crypt reads other data part-way"
	cs_close vmt

	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open of the volume in reencryption failed: $(open_failure vol)"
	[ "$(sum_at "$dev" 0 48)" = "$want" ] || because "luksd reads other data part-way than dm-crypt wrote"
	luksd status vol | grep -q "reencryption:  in-progress" || because "luksd status shows no reencryption: $(luksd status vol)"
	size=$(((80 - $(data_offset_mib "$img")) * 1048576))
	[ "$(blockdev --getsize64 "$dev")" = "$size" ] || because "$dev has $(blockdev --getsize64 "$dev") bytes, not $size"
	# Through luksd: 8 MiB across the middle, where the segments meet
	# or not, as the kill fell.
	write_at "$dev" "$SCRATCH/patch" 20 || because "writing through luksd failed"
	luksd_close vol || because "luksd close failed"

	reenc_resume cryptsetup "$img"
	cp "$SCRATCH/pattern" "$SCRATCH/expect"
	dd if="$SCRATCH/patch" of="$SCRATCH/expect" bs=1M seek=20 conv=notrunc 2>/dev/null
	! cryptsetup luksDump "$img" | grep -q reencrypt || because "reencryption metadata left behind"
	cs_open "$img" vmt "$key" || because "cryptsetup open after the reencryption failed"
	got=$(sum_at /dev/mapper/vmt 0 48)
	cs_close vmt
	[ "$got" = "$(sum_of "$SCRATCH/expect")" ] || because "after cryptsetup finished, the kernel reads other data than luksd wrote"
}

check "$VMTEST_SCENARIO cryptsetup-killed" open_mid cryptsetup
check "$VMTEST_SCENARIO luksd-killed" open_mid luksd
