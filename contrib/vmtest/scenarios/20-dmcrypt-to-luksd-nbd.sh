#!/bin/sh
# 20-dmcrypt-to-luksd-nbd: the kernel's dm-crypt writes, luksd reads. For
# every cipher in CIPHERS, cryptsetup formats and opens an image in the
# kernel and writes a known pattern through /dev/mapper (the first 4 MiB and
# the last MiB); luksd then serves the image as /dev/nbdN and must read the
# same plaintext, with the same size and logical sector size.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/head" 4
mkpattern "$SCRATCH/tail" 1

kernel_writes_luksd_reads() {
	img=$SCRATCH/img
	mkimage "$img" 32
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	size=$(blockdev --getsize64 /dev/mapper/vmt)
	ss=$(blockdev --getss /dev/mapper/vmt)
	last=$((size / 1048576 - 1))
	write_at /dev/mapper/vmt "$SCRATCH/head" 0 || because "writing through dm-crypt failed"
	write_at /dev/mapper/vmt "$SCRATCH/tail" "$last" || because "writing the last MiB through dm-crypt failed"
	cs_close vmt || because "cryptsetup close failed"

	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open --frontend $FRONTEND failed: $(open_failure vol)"
	case $dev in /dev/nbd*) [ "$FRONTEND" = nbd ] ;; /dev/ublkb*) [ "$FRONTEND" = ublk ] ;; *) false ;; esac ||
		because "luksd open --frontend $FRONTEND printed $dev"
	got=$(blockdev --getsize64 "$dev")
	[ "$got" = "$size" ] || because "$dev has $got bytes, dm-crypt had $size"
	[ "$(sum_at "$dev" 0 4)" = "$(sum_of "$SCRATCH/head")" ] || because "first 4 MiB through $dev differ from what dm-crypt wrote"
	[ "$(sum_at "$dev" "$last" 1)" = "$(sum_of "$SCRATCH/tail")" ] || because "last MiB through $dev differs from what dm-crypt wrote"
	got=$(blockdev --getss "$dev")
	[ "$got" = "$ss" ] || because "$dev has $got-byte logical sectors, dm-crypt had $ss"
	luksd status vol >/dev/null || because "luksd status vol failed while open"
	luksd_close vol || because "luksd close failed"
	! luksd status vol >/dev/null 2>&1 || because "luksd status vol still succeeds after close"
	rm -f "$img"
}

echo "$CIPHERS" | while read -r line; do
	check "$VMTEST_SCENARIO $(cipher_field "$line" 1) $FRONTEND" kernel_writes_luksd_reads "$line"
done
