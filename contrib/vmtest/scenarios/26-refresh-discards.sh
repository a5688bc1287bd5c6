#!/bin/sh
# 26-refresh-discards: refresh changes discards of a mounted volume, luksd
# beside dm-crypt. cryptsetup formats an image and a copy; luksd opens one
# over nbd, dm-crypt the other, both without --allow-discards; ext4 on
# each, a file written and deleted. fstrim is refused by both; after
# `refresh --allow-discards` (still mounted) fstrim works on both and the
# luksd image gives the freed blocks back (tmpfs punches the holes);
# status shows the flag in both; a refresh without it refuses fstrim
# again; refresh --readonly leaves both read/write. e2fsck -fn is clean
# at the end. On ublk, refresh --allow-discards is refused in one line.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
csmnt=/mnt/cs
mkdir -p "$mnt" "$csmnt"

# trims WHAT WANT: fstrim on both mounts gives exit status 0 (WANT=ok) or
# not (WANT=refused), in both.
trims() {
	_l=0 _c=0
	fstrim "$mnt" 2>"$SCRATCH/ld.err" || _l=$?
	fstrim "$csmnt" 2>"$SCRATCH/cs.err" || _c=$?
	note "$1: fstrim exit luksd $_l ($(cat "$SCRATCH/ld.err")), dm-crypt $_c ($(cat "$SCRATCH/cs.err"))"
	if [ "$2" = ok ]; then
		[ "$_l" = 0 ] && [ "$_c" = 0 ] || because "$1: fstrim failed: luksd $_l, dm-crypt $_c"
	else
		[ "$_l" != 0 ] && [ "$_c" != 0 ] || because "$1: fstrim was not refused: luksd $_l, dm-crypt $_c"
	fi
}

# same_status WHAT: the flags and mode lines of both status outputs.
same_status() {
	_ls=$(luksd status vol | grep -E '^  (flags|mode):')
	_cs=$(cryptsetup status vmt | grep -E '^  (flags|mode):')
	[ "$_ls" = "$_cs" ] || because "$1: luksd status '$_ls', cryptsetup status '$_cs'"
}

both_refresh() {
	luksd refresh --key-file "$key" "$@" vol 2>"$SCRATCH/ld.err" || because "luksd refresh $*: $(cat "$SCRATCH/ld.err")"
	cryptsetup refresh --key-file "$key" "$@" vmt 2>"$SCRATCH/cs.err" || because "cryptsetup refresh $*: $(cat "$SCRATCH/cs.err")"
}

discards_nbd() {
	img=$SCRATCH/img
	csimg=$SCRATCH/cs.img
	mkimage "$img" 96
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	cp "$img" "$csimg"
	luksd_open nbd "$img" vol "$key" >/dev/null || because "luksd open failed: $(open_failure vol)"
	cs_open "$csimg" vmt "$key" || because "cryptsetup open failed"
	nbd=$(luksd status vol | awk '/^  block device:/ {print $3}')
	[ "$(cat /sys/block/"${nbd#/dev/}"/queue/discard_max_bytes)" = 0 ] || because "$nbd offers discards before refresh"
	for d in /dev/mapper/vol /dev/mapper/vmt; do
		mkfs.ext4 -q -F "$d" || because "mkfs.ext4 on $d failed"
	done
	mount -t ext4 /dev/mapper/vol "$mnt" || because "mounting luksd's device failed"
	mount -t ext4 /dev/mapper/vmt "$csmnt" || because "mounting dm-crypt's device failed"
	mkpattern "$mnt/keep.bin" 4
	keep=$(sum_of "$mnt/keep.bin")
	for m in "$mnt" "$csmnt"; do
		mkpattern "$m/gone.bin" 32
		sync -f "$m"
		rm "$m/gone.bin"
		sync -f "$m"
	done
	same_status "at open"
	trims "before refresh" refused

	before=$(stat -c %b "$img")
	both_refresh --allow-discards
	same_status "after refresh --allow-discards"
	luksd status vol | grep -qx '  flags:   discards ' || because "luksd status shows no discards flag"
	[ "$(cat /sys/block/"${nbd#/dev/}"/queue/discard_max_bytes)" != 0 ] || because "$nbd offers no discards after refresh"
	trims "after refresh --allow-discards" ok
	after=$(stat -c %b "$img")
	note "luksd image: $before blocks allocated before fstrim, $after after"
	[ "$after" -lt $((before - 16384)) ] || because "fstrim freed less than 8 MiB of the image ($before -> $after blocks)"
	[ "$(sum_of "$mnt/keep.bin")" = "$keep" ] || because "a kept file changed"

	both_refresh
	same_status "after refresh without --allow-discards"
	trims "after refresh without --allow-discards" refused
	both_refresh --readonly
	same_status "after refresh --readonly"
	luksd status vol | grep -qx '  mode:    read/write' || because "refresh --readonly changed the mode"
	touch "$mnt/still-writable" || because "the file system became read-only"

	umount "$mnt" && umount "$csmnt" || because "umount failed"
	e2fsck -fn /dev/mapper/vol >"$SCRATCH/fsck.out" 2>&1 || because "e2fsck -fn through luksd: $(tail -n1 "$SCRATCH/fsck.out")"
	luksd_close vol || because "luksd close failed"
	cs_close vmt
}

refuse_ublk() {
	img=$SCRATCH/img
	mkimage "$img" 64
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	luksd_open ublk "$img" vol "$key" >/dev/null || because "luksd open failed: $(open_failure vol)"
	_rc=0
	luksd refresh --key-file "$key" --allow-discards vol 2>"$SCRATCH/ld.err" || _rc=$?
	[ "$_rc" = 1 ] || because "luksd refresh --allow-discards on ublk: exit $_rc, want 1"
	[ "$(wc -l <"$SCRATCH/ld.err")" = 1 ] && grep -q 'close and open vol again' "$SCRATCH/ld.err" ||
		because "luksd refresh on ublk said: $(cat "$SCRATCH/ld.err")"
	luksd status vol | grep -q discards && because "status shows discards after the refusal"
	luksd_close vol || because "luksd close failed"
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096 nbd" discards_nbd
check "$VMTEST_SCENARIO refused ublk" refuse_ublk
