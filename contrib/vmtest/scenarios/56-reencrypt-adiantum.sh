#!/bin/sh
# 56-reencrypt-adiantum: offline reencryption from aes-xts-plain64 to
# xchacha12,aes-adiantum-plain64 (which cryptsetup can only do with the
# kernel's dm-crypt and adiantum.ko, so only here), read back by the
# kernel's dm-crypt. A pattern written through dm-crypt must read the same
# after: luksd reencrypting alone; cryptsetup starting and killed -9, luksd
# resuming; luksd starting and killed -9, cryptsetup resuming (after
# `cryptsetup repair` when it asks for it).
# requires: luksd-reencrypt
# timeout: 600
. /vmtest/guest/lib.sh
. /vmtest/guest/reencrypt.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/pattern" 48
want=$(sum_of "$SCRATCH/pattern")
to="--cipher xchacha12,aes-adiantum-plain64 --key-size 256 --hotzone-size 1M"

# kernel_reads IMAGE: dm-crypt opens IMAGE as Adiantum and reads the pattern.
kernel_reads() {
	cryptsetup luksDump "$1" | grep -q "cipher: xchacha12,aes-adiantum-plain64" || because "the segment is not Adiantum: $(cryptsetup luksDump "$1" | grep cipher:)"
	! cryptsetup luksDump "$1" | grep -q reencrypt || because "reencryption metadata left behind"
	cs_open "$1" vmt "$key" || because "cryptsetup open of the reencrypted image failed"
	got=$(sum_at /dev/mapper/vmt 0 48)
	cs_close vmt
	[ "$got" = "$want" ] || because "the kernel reads other data after reencryption"
}

luksd_alone() {
	img=$SCRATCH/img
	reenc_fresh "$img" "$SCRATCH/pattern"
	# shellcheck disable=SC2086
	luksd reencrypt -q --key-file "$key" $to "$img" || because "luksd reencrypt failed"
	kernel_reads "$img"
}

cross() {
	first=$1 second=$2 img=$SCRATCH/img
	reenc_fresh "$img" "$SCRATCH/pattern"
	# shellcheck disable=SC2086
	"$first" reencrypt --init-only --force-offline-reencrypt -q --key-file "$key" $to "$img" || because "$first --init-only failed"
	reenc_killed "$first" "$img"
	reenc_resume "$second" "$img"
	kernel_reads "$img"
}

check "56-reencrypt-adiantum luksd aes-xts-to-adiantum" luksd_alone
check "56-reencrypt-adiantum cryptsetup-killed luksd-resumes" cross cryptsetup luksd
check "56-reencrypt-adiantum luksd-killed cryptsetup-resumes" cross luksd cryptsetup
