#!/bin/sh
# 10-dmcrypt-baseline: the kernel's dm-crypt alone, for every cipher in
# CIPHERS: cryptsetup luksFormat, open, write a known pattern through
# /dev/mapper (the first 4 MiB and the last 1 MiB), close, reopen, read back.
# It proves the harness and the kernel before luksd is involved.
# requires:
. /vmtest/guest/lib.sh

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/head" 4
mkpattern "$SCRATCH/tail" 1

roundtrip() {
	img=$SCRATCH/img
	mkimage "$img" 32
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	dev=/dev/mapper/vmt
	last=$(($(size_mib "$dev") - 1))
	[ "$last" -ge 4 ] || because "$dev is only $((last + 1)) MiB"
	write_at "$dev" "$SCRATCH/head" 0 || because "writing the pattern failed"
	write_at "$dev" "$SCRATCH/tail" "$last" || because "writing the last MiB failed"
	cs_close vmt || because "cryptsetup close failed"
	cs_open "$img" vmt "$key" || because "cryptsetup reopen failed"
	[ "$(sum_at "$dev" 0 4)" = "$(sum_of "$SCRATCH/head")" ] || because "first 4 MiB differ after reopen"
	[ "$(sum_at "$dev" "$last" 1)" = "$(sum_of "$SCRATCH/tail")" ] || because "last MiB differs after reopen"
	# the ciphertext on the image must not contain the plaintext
	cs_close vmt || because "cryptsetup close failed"
	off=$(data_offset_mib "$img") || because "no data offset in luksDump"
	[ "$(sum_at "$img" "$off" 4)" != "$(sum_of "$SCRATCH/head")" ] || because "the image holds the plaintext"
	rm -f "$img"
}

echo "$CIPHERS" | while read -r line; do
	check "10-dmcrypt-baseline $(cipher_field "$line" 1) dm-crypt" roundtrip "$line"
done
