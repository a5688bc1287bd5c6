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
require_luksd

key=$SCRATCH/key
mkkey "$key"
mkpattern "$SCRATCH/pattern" 48
want=$(sum_of "$SCRATCH/pattern")
to="--cipher xchacha12,aes-adiantum-plain64 --key-size 256 --hotzone-size 1M"

# fresh IMAGE: an aes-xts volume holding the pattern, written by dm-crypt.
fresh() {
	mkimage "$1" 80
	cs_format "$1" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "luksFormat failed"
	cs_open "$1" vmt "$key" || because "cryptsetup open failed"
	write_at /dev/mapper/vmt "$SCRATCH/pattern" 0 || because "writing through dm-crypt failed"
	cs_close vmt
}

# kernel_reads IMAGE: dm-crypt opens IMAGE as Adiantum and reads the pattern.
kernel_reads() {
	cryptsetup luksDump "$1" | grep -q "cipher: xchacha12,aes-adiantum-plain64" || because "the segment is not Adiantum: $(cryptsetup luksDump "$1" | grep cipher:)"
	! cryptsetup luksDump "$1" | grep -q reencrypt || because "reencryption metadata left behind"
	cs_open "$1" vmt "$key" || because "cryptsetup open of the reencrypted image failed"
	got=$(sum_at /dev/mapper/vmt 0 48)
	cs_close vmt
	[ "$got" = "$want" ] || because "the kernel reads other data after reencryption"
}

# killed TOOL IMAGE: TOOL reencrypts IMAGE (already marked) and is killed -9
# once the header shows data rewritten (a segment of fixed length).
killed() {
	"$1" reencrypt --resume-only --force-offline-reencrypt -q --hotzone-size 1M --key-file "$key" "$2" &
	_p=$!
	for _ in $(seq 240); do
		cryptsetup luksDump "$2" 2>/dev/null | grep -q "length: [0-9]" && break
		sleep 0.25
	done
	kill -9 "$_p" 2>/dev/null || because "$1 finished before it could be killed"
	wait "$_p" 2>/dev/null || true
	# cryptsetup rewrites through temporary dm-crypt mappings over a loop
	# device; killed, it leaves them holding the image (luksd then refuses
	# it as in use): take them down as an administrator would.
	for _d in $(dmsetup ls 2>/dev/null | awk '/^temporary-cryptsetup/ { print $1 }'); do
		dmsetup remove "$_d" || because "dmsetup remove $_d failed"
	done
	losetup -D 2>/dev/null || true
	cryptsetup luksDump "$2" | grep -q "online-reencrypt" || because "no reencryption left to resume after killing $1"
}

# resume TOOL IMAGE: TOOL finishes the reencryption of IMAGE.
resume() {
	out=$("$1" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$2" 2>&1) && return 0
	case $out in
	*"Run repair first"*)
		cryptsetup repair -q --key-file "$key" "$2" || because "cryptsetup repair failed"
		# The repair finishes a reencryption killed in its last hotzone.
		out=$("$1" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$2" 2>&1) ||
			case $out in *"not in progress"*) ;; *) because "$1 resume after repair failed: $out" ;; esac
		;;
	*"not in progress"*) ;;
	*) because "$1 resume failed: $out" ;;
	esac
}

luksd_alone() {
	img=$SCRATCH/img
	fresh "$img"
	# shellcheck disable=SC2086
	luksd reencrypt -q --key-file "$key" $to "$img" || because "luksd reencrypt failed"
	kernel_reads "$img"
}

cross() {
	first=$1 second=$2 img=$SCRATCH/img
	fresh "$img"
	# shellcheck disable=SC2086
	"$first" reencrypt --init-only --force-offline-reencrypt -q --key-file "$key" $to "$img" || because "$first --init-only failed"
	killed "$first" "$img"
	resume "$second" "$img"
	kernel_reads "$img"
}

check "56-reencrypt-adiantum luksd aes-xts-to-adiantum" luksd_alone
check "56-reencrypt-adiantum cryptsetup-killed luksd-resumes" cross cryptsetup luksd
check "56-reencrypt-adiantum luksd-killed cryptsetup-resumes" cross luksd cryptsetup
