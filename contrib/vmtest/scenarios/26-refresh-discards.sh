#!/bin/sh
# 26-refresh-discards: refresh changes discards of a mounted volume, luksd
# beside dm-crypt. cryptsetup formats an image and a copy; luksd opens one
# over nbd, dm-crypt the other, both without --allow-discards; ext4 on
# each, a file written and deleted. fstrim is refused by dm-crypt and a
# no-op on luksd (its /dev/nbdN takes discards so that refresh can allow
# them; the daemon drops them: the image keeps its blocks); after
# `refresh --allow-discards` (still mounted) fstrim works on both and the
# luksd image gives the freed blocks back (tmpfs punches the holes);
# status shows the flag in both; after a refresh without it fstrim is
# refused (dm-crypt) and a no-op (luksd) again; refresh --readonly leaves
# both read/write. e2fsck -fn is clean at the end. On ublk, refresh
# --allow-discards is refused in one line.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
side_by_side_setup

# trims WHAT WANT: fstrim on both mounts after a 32 MiB file was written
# and deleted on each. WANT=ok: both succeed and luksd's image gives at
# least 8 MiB back; WANT=off: dm-crypt refuses, luksd's fstrim frees
# nothing in the image.
trims() {
	for m in "$mnt" "$csmnt"; do
		mkpattern "$m/gone.bin" 32
		sync -f "$m"
		rm "$m/gone.bin"
		sync -f "$m"
	done
	_before=$(stat -c %b "$img")
	_l=0 _c=0
	fstrim "$mnt" 2>"$SCRATCH/ld.err" || _l=$?
	fstrim "$csmnt" 2>"$SCRATCH/cs.err" || _c=$?
	_after=$(stat -c %b "$img")
	note "$1: fstrim exit luksd $_l ($(cat "$SCRATCH/ld.err")), dm-crypt $_c ($(cat "$SCRATCH/cs.err")); luksd image $_before -> $_after blocks"
	if [ "$2" = ok ]; then
		[ "$_l" = 0 ] && [ "$_c" = 0 ] || because "$1: fstrim failed: luksd $_l, dm-crypt $_c"
		[ "$_after" -lt $((_before - 16384)) ] || because "$1: fstrim freed less than 8 MiB of the image ($_before -> $_after blocks)"
	else
		[ "$_c" != 0 ] || because "$1: dm-crypt's fstrim was not refused"
		[ "$_after" -ge "$_before" ] || because "$1: discards reached luksd's image ($_before -> $_after blocks)"
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
	for d in /dev/mapper/vol /dev/mapper/vmt; do
		mkfs.ext4 -q -F "$d" || because "mkfs.ext4 on $d failed"
	done
	mount -t ext4 /dev/mapper/vol "$mnt" || because "mounting luksd's device failed"
	mount -t ext4 /dev/mapper/vmt "$csmnt" || because "mounting dm-crypt's device failed"
	mkpattern "$mnt/keep.bin" 4
	keep=$(sum_of "$mnt/keep.bin")
	same_status "at open"
	trims "before refresh" off

	both_refresh --allow-discards
	same_status "after refresh --allow-discards"
	luksd status vol | grep -qx '  flags:   discards ' || because "luksd status shows no discards flag"
	trims "after refresh --allow-discards" ok
	[ "$(sum_of "$mnt/keep.bin")" = "$keep" ] || because "a kept file changed"

	both_refresh
	same_status "after refresh without --allow-discards"
	trims "after refresh without --allow-discards" off
	both_refresh --readonly
	same_status "after refresh --readonly"
	luksd status vol | grep -qx '  mode:    read/write' || because "refresh --readonly changed the mode"
	touch "$mnt/still-writable" || because "the file system became read-only"

	umount "$mnt" && umount "$csmnt" || because "umount failed$(held_by "$csmnt")"
	fsck_clean /dev/mapper/vol "through luksd"
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
