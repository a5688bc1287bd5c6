#!/bin/sh
# 30-luksd-to-dmcrypt-nbd: luksd writes, the kernel's dm-crypt reads. For
# every cipher in CIPHERS (LUKS2, and LUKS1 aes-cbc-essiv), luksd luksFormat
# formats an image, luksd opens it as /dev/nbdN and a known pattern is
# written through it (the first 4 MiB and the last MiB); after luksd close,
# cryptsetup opens the image in the kernel and must read the same plaintext,
# with the same size.
# requires: luksd-format luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/head" 4
mkpattern "$SCRATCH/tail" 1

luksd_writes_kernel_reads() {
	img=$SCRATCH/img
	mkimage "$img" 32
	luksd_format "$img" "$key" "$1" || because "luksd luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open --frontend $FRONTEND failed: $(open_failure vol)"
	size=$(blockdev --getsize64 "$dev")
	last=$((size / 1048576 - 1))
	[ "$last" -ge 4 ] || because "$dev is only $size bytes"
	write_at "$dev" "$SCRATCH/head" 0 || because "writing through $dev failed"
	write_at "$dev" "$SCRATCH/tail" "$last" || because "writing the last MiB through $dev failed"
	luksd_close vol || because "luksd close failed"

	cs_open "$img" vmt "$key" || because "cryptsetup open of luksd's image failed"
	got=$(blockdev --getsize64 /dev/mapper/vmt)
	[ "$got" = "$size" ] || because "dm-crypt sees $got bytes, luksd served $size"
	[ "$(sum_at /dev/mapper/vmt 0 4)" = "$(sum_of "$SCRATCH/head")" ] || because "first 4 MiB through dm-crypt differ from what luksd wrote"
	[ "$(sum_at /dev/mapper/vmt "$last" 1)" = "$(sum_of "$SCRATCH/tail")" ] || because "last MiB through dm-crypt differs from what luksd wrote"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img"
}

echo "$CIPHERS" | while read -r line; do
	check "$VMTEST_SCENARIO $(cipher_field "$line" 1) $FRONTEND" luksd_writes_kernel_reads "$line"
done
