#!/bin/sh
# 29-convert: luksd convert against the kernel. cryptsetup formats a volume
# and dm-crypt writes a known pattern; luksd converts the header in place
# (LUKS1 -> LUKS2, or LUKS2 -> LUKS1) and dm-crypt must read the pattern
# through the converted header, then through the header converted back.
# While dm-crypt has the volume open, luksd refuses to convert it, as
# cryptsetup does (exit 5).
# requires:
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/head" 1
mkpattern "$SCRATCH/tail" 1

# The pattern: 1 MiB at the start of the data, 1 MiB at its end (TCG is
# slow; the header is what is tested).
put() {
	_last=$(($(size_mib "$1") - 1))
	write_at "$1" "$SCRATCH/head" 0 && write_at "$1" "$SCRATCH/tail" "$_last" && echo "$_last"
}
got() {
	[ "$(sum_at "$1" 0 1)" = "$(sum_of "$SCRATCH/head")" ] || because "first MiB through $1 differs"
	[ "$(sum_at "$1" "$2" 1)" = "$(sum_of "$SCRATCH/tail")" ] || because "last MiB through $1 differs"
}

# there_and_back LINE TO BACK [ARGS]: format for CIPHERS line LINE (with
# luksFormat ARGS), write through dm-crypt, convert to TO, read, convert to
# BACK, read.
there_and_back() {
	img=$SCRATCH/img
	mkimage "$img" 20
	_line=$1 _to=$2 _back=$3
	shift 3
	cs_format "$img" "$key" "$_line" "$@" || because "cryptsetup luksFormat failed"
	set -- "$_line" "$_to" "$_back"
	cs_open "$img" cv "$key" || because "cryptsetup open failed"
	last=$(put /dev/mapper/cv) || because "writing through dm-crypt failed"
	# In use: both tools refuse, with the same exit code.
	luksd convert -q --type "$2" "$img" 2>"$SCRATCH/why" && because "luksd converted an active volume"
	ld=$?
	grep -q "which is still in use" "$SCRATCH/why" || because "luksd said: $(cat "$SCRATCH/why")"
	cryptsetup convert -q --type "$2" "$img" 2>/dev/null && because "cryptsetup converted an active volume"
	cs=$?
	[ "$ld" = "$cs" ] || because "an active volume: luksd exit $ld, cryptsetup exit $cs"
	cs_close cv || because "cryptsetup close failed"
	for to in "$2" "$3"; do
		luksd convert -q --type "$to" "$img" 2>"$SCRATCH/why" || because "luksd convert --type $to failed: $(cat "$SCRATCH/why")"
		cryptsetup isLuks --type "$to" "$img" || because "cryptsetup does not see a $to header"
		cs_open "$img" cv "$key" || because "dm-crypt does not open the $to header luksd wrote"
		got /dev/mapper/cv "$last"
		cs_close cv || because "cryptsetup close failed"
	done
	rm -f "$img"
}

# Each volume both ways (10-15 s each under TCG on a quiet host).
check "$VMTEST_SCENARIO aes-cbc-essiv:sha256/luks1 to-luks2-and-back" there_and_back "$(cipher_line aes-cbc-essiv:sha256/luks1)" luks2 luks1
# A 2 MiB keyslots area (room for LUKS1's eight keyslots) keeps the move short.
check "$VMTEST_SCENARIO aes-xts-plain64/512 to-luks1-and-back" there_and_back "$(cipher_line aes-xts-plain64/512)" luks1 luks2 --luks2-keyslots-size 2m
