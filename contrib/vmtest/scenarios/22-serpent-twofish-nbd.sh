#!/bin/sh
# 22-serpent-twofish-nbd: serpent and twofish volumes against the kernel's
# serpent_generic and twofish_generic, both ways. For each setup below,
# dm-crypt writes a known pattern (the first 4 MiB and the last MiB) and
# luksd, serving the image as /dev/nbdN, must read it; then luksd formats
# and writes and dm-crypt must read it, and cryptsetup must unlock luksd's
# keyslot to the volume key luksd prints (the build host's cryptsetup
# cannot decrypt serpent or twofish keyslots: no dm-crypt there). Last,
# cryptsetup benchmark (the kernel's C, through AF_ALG) and luksd benchmark
# measure each cipher side by side: INFO lines, checked only for running.
# requires: luksd-format luksd-open-nbd
# timeout: 600
. /vmtest/guest/lib.sh
require_luksd

SETUPS='serpent-xts-plain64/512|luks2|serpent-xts-plain64|512|512
serpent-xts-plain64/4096|luks2|serpent-xts-plain64|256|4096
twofish-xts-plain64/512|luks2|twofish-xts-plain64|512|512
serpent-cbc-essiv:sha256/luks1|luks1|serpent-cbc-essiv:sha256|256|512
twofish-cbc-essiv:sha256/4096|luks2|twofish-cbc-essiv:sha256|256|4096
serpent-cbc-plain64/luks2|luks2|serpent-cbc-plain64|128|512
twofish-xts-plain/luks1|luks1|twofish-xts-plain|256|512'

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/head" 4
mkpattern "$SCRATCH/tail" 1

kernel_writes_luksd_reads() {
	img=$SCRATCH/img
	mkimage "$img" 32
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed (serpent/twofish modules?)"
	last=$(write_data /dev/mapper/vmt) || because "writing through dm-crypt failed"
	cs_close vmt || because "cryptsetup close failed"
	dev=$(luksd_open nbd "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	same_data "$dev" "$last"
	luksd_close vol || because "luksd close failed"
	rm -f "$img"
}

luksd_writes_kernel_reads() {
	img=$SCRATCH/img
	mkimage "$img" 32
	luksd_format "$img" "$key" "$1" || because "luksd luksFormat failed"
	dev=$(luksd_open nbd "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	last=$(write_data "$dev") || because "writing through $dev failed"
	luksd_close vol || because "luksd close failed"
	# Each tool its own copy of the image.
	cp "$img" "$img.cs"
	want=$(luksd luksDump -q --dump-volume-key --key-file "$key" "$img" | grep -A4 -E '^(MK dump|Volume key):') ||
		because "luksd luksDump --dump-volume-key failed"
	got=$(cryptsetup luksDump -q --dump-volume-key --key-file "$key" "$img.cs" | grep -A4 -E '^(MK dump|Volume key):') ||
		because "cryptsetup cannot unlock luksd's keyslot"
	[ -n "$want" ] && [ "$got" = "$want" ] || because "cryptsetup's volume key differs from luksd's"
	cs_open "$img.cs" vmt "$key" || because "cryptsetup open of luksd's image failed"
	same_data /dev/mapper/vmt "$last"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img" "$img.cs"
}

# side_by_side CIPHER BITS: the kernel's and luksd's benchmark row.
side_by_side() {
	k=$(cryptsetup benchmark --cipher "$1" --key-size "$2" | tail -n1) || because "cryptsetup benchmark --cipher $1 failed"
	l=$(luksd benchmark --cipher "$1" --key-size "$2" | tail -n1) || because "luksd benchmark --cipher $1 failed"
	echo "$k" | grep -q 'MiB/s' && echo "$l" | grep -q 'MiB/s' || because "no figures: kernel '$k', luksd '$l'"
	note "$VMTEST_SCENARIO speed $1 $2b kernel: $k"
	note "$VMTEST_SCENARIO speed $1 $2b luksd:  $l"
}

echo "$SETUPS" | while read -r line; do
	check "$VMTEST_SCENARIO $(cipher_field "$line" 1) dm-crypt-to-luksd" kernel_writes_luksd_reads "$line"
	check "$VMTEST_SCENARIO $(cipher_field "$line" 1) luksd-to-dm-crypt" luksd_writes_kernel_reads "$line"
done
note "$VMTEST_SCENARIO kernel drivers: $(grep -E '^driver +: .*(serpent|twofish)' /proc/crypto | awk '{print $3}' | sort -u | tr '\n' ' ')"
for c in "serpent-xts 512" "twofish-xts 512" "serpent-cbc 256" "twofish-cbc 256" "aes-xts 512"; do
	# shellcheck disable=SC2086
	check "$VMTEST_SCENARIO speed $c" side_by_side $c
done
