#!/bin/sh
# 25-resize: online resize, luksd beside dm-crypt. cryptsetup formats an
# image and a copy; luksd opens one as /dev/nbdN, the kernel's dm-crypt
# the other; ext4 on each, files written, both images grown from 64 to
# 128 MiB while mounted; `luksd resize` and `cryptsetup resize` must give
# the same device size and status size line; resize2fs online on both,
# the new space filled, e2fsck -fn clean, files intact. Then shrinking and
# growing by --device-size (unmounted) give the same sizes in both, and a
# size past the device is refused by both with the same exit code and
# message. Reopened, the luksd image still has the new size, and dm-crypt
# reads it clean. On ublk (no live size update in 6.12) resize is refused
# in one line that says to close and open. refresh measures the device
# again as dm-crypt's reload does: after the images grew (and dm-crypt's
# loop device was told, losetup -c), `luksd refresh` and `cryptsetup
# refresh` give the same new size.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
side_by_side_setup

# same_size WHAT: /dev/mapper/vol and /dev/mapper/vmt have the same size,
# and so do the status lines.
same_size() {
	_l=$(blockdev --getsize64 /dev/mapper/vol) _c=$(blockdev --getsize64 /dev/mapper/vmt)
	[ "$_l" = "$_c" ] || because "$1: luksd's device is $_l bytes, dm-crypt's $_c"
	_ls=$(luksd status vol | grep '^  size:') _cs=$(cryptsetup status vmt | grep '^  size:')
	[ "$_ls" = "$_cs" ] || because "$1: luksd status '$_ls', cryptsetup status '$_cs'"
	note "$1: both $_l bytes ($_ls)"
}

# same_refusal WHAT ARGS...: resize ARGS refused by both, same exit code
# and message (the data device's path replaced).
same_refusal() {
	_what=$1
	shift
	cryptsetup resize --key-file "$key" "$@" vmt </dev/null >/dev/null 2>"$SCRATCH/cs.err"
	_cc=$?
	luksd resize "$@" vol </dev/null >/dev/null 2>"$SCRATCH/ld.err"
	_lc=$?
	_cl=$(tail -n1 "$SCRATCH/cs.err" | sed 's#Device /[^ ]* is#Device DEV is#')
	_ll=$(tail -n1 "$SCRATCH/ld.err" | sed 's#Device /[^ ]* is#Device DEV is#')
	[ "$_cc" != 0 ] || because "$_what: cryptsetup accepted it"
	[ "$_cc" = "$_lc" ] && [ "$_cl" = "$_ll" ] || because "$_what: cryptsetup exit $_cc '$_cl', luksd exit $_lc '$_ll'"
}

# open_pair: a 64 MiB image cryptsetup formats and a copy, opened by luksd
# (vol, on nbd) and by dm-crypt (vmt).
open_pair() {
	img=$SCRATCH/img
	csimg=$SCRATCH/cs.img
	mkimage "$img" 64
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	cp "$img" "$csimg"
	luksd_open nbd "$img" vol "$key" >/dev/null || because "luksd open failed: $(open_failure vol)"
	[ -b /dev/mapper/vol ] || because "no /dev/mapper/vol"
	cs_open "$csimg" vmt "$key" || because "cryptsetup open failed"
	same_size "at open"
}

grow_nbd() {
	open_pair
	for d in /dev/mapper/vol /dev/mapper/vmt; do
		mkfs.ext4 -q -F "$d" || because "mkfs.ext4 on $d failed"
	done
	mount -t ext4 /dev/mapper/vol "$mnt" || because "mounting luksd's device failed"
	mount -t ext4 /dev/mapper/vmt "$csmnt" || because "mounting dm-crypt's device failed"
	mkpattern "$mnt/big.bin" 8
	make_tree "$mnt/tree" 50 331
	save_tree "$mnt" 51
	sync -f "$mnt"

	truncate -s 128M "$img" "$csimg" || because "growing the images failed"
	luksd resize vol 2>"$SCRATCH/ld.err" || because "luksd resize failed: $(cat "$SCRATCH/ld.err")"
	cryptsetup resize --key-file "$key" vmt 2>"$SCRATCH/cs.err" || because "cryptsetup resize failed: $(cat "$SCRATCH/cs.err")"
	same_size "grown"
	[ "$(blockdev --getsize64 /dev/mapper/vol)" = $((112 << 20)) ] || because "luksd's device is not 112 MiB after growing"
	nbd=$(luksd status vol | awk '/^  block device:/ {print $3}')
	[ "$(blockdev --getsize64 "$nbd")" = $((112 << 20)) ] || because "$nbd below /dev/mapper/vol did not grow"
	resize2fs /dev/mapper/vol >"$SCRATCH/r2fs.out" 2>&1 || because "resize2fs through luksd: $(tail -n1 "$SCRATCH/r2fs.out")"
	resize2fs /dev/mapper/vmt >"$SCRATCH/r2fs.out" 2>&1 || because "resize2fs through dm-crypt: $(tail -n1 "$SCRATCH/r2fs.out")"
	_lb=$(dumpe2fs -h /dev/mapper/vol 2>/dev/null | grep '^Block count:') _cb=$(dumpe2fs -h /dev/mapper/vmt 2>/dev/null | grep '^Block count:')
	[ "$_lb" = "$_cb" ] || because "after resize2fs: luksd's ext4 '$_lb', dm-crypt's '$_cb'"
	note "ext4 after resize2fs: $_lb"
	head -c $((80 << 20)) /dev/zero >"$mnt/fill.bin" || because "cannot fill the grown file system"
	sync -f "$mnt"
	verify_tree "$mnt" || because "files differ after the online resize"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	umount "$csmnt" || because "umount of dm-crypt's failed$(held_by "$csmnt")"
	fsck_clean /dev/mapper/vol "through luksd"

	same_refusal "resize past the device" --device-size 200m
	for s in 96m 112m; do
		luksd resize --device-size "$s" vol || because "luksd resize --device-size $s failed"
		cryptsetup resize --key-file "$key" --device-size "$s" vmt || because "cryptsetup resize --device-size $s failed"
		same_size "--device-size $s"
	done
	fsck_clean /dev/mapper/vol "after shrinking and growing"
	luksd_close vol || because "luksd close failed"
	cs_close vmt || because "cryptsetup close failed"

	dev=$(luksd_open nbd "$img" vol "$key") || because "luksd reopen failed: $(open_failure vol)"
	[ "$(blockdev --getsize64 "$dev")" = $((112 << 20)) ] || because "reopened, luksd's device is $(blockdev --getsize64 "$dev") bytes"
	mount -t ext4 -o ro "$dev" "$mnt" || because "mounting after reopen failed"
	verify_tree "$mnt" || because "files differ after reopen"
	umount "$mnt"
	luksd_close vol || because "luksd close failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open of luksd's image failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mounting luksd's image with dm-crypt failed"
	verify_tree "$mnt" || because "files read through dm-crypt differ"
	umount "$mnt"
	cs_close vmt
}

refuse_ublk() {
	img=$SCRATCH/img
	mkimage "$img" 64
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	luksd_open ublk "$img" vol "$key" >/dev/null || because "luksd open failed: $(open_failure vol)"
	truncate -s 128M "$img"
	_rc=0
	luksd resize vol 2>"$SCRATCH/ld.err" || _rc=$?
	[ "$_rc" = 1 ] || because "luksd resize on ublk: exit $_rc, want 1"
	[ "$(wc -l <"$SCRATCH/ld.err")" = 1 ] && grep -q 'close and open vol again' "$SCRATCH/ld.err" ||
		because "luksd resize on ublk said: $(cat "$SCRATCH/ld.err")"
	[ "$(blockdev --getsize64 /dev/mapper/vol)" = $((48 << 20)) ] || because "the refused resize changed the size"
	luksd_close vol || because "luksd close failed"
}

refresh_grow_nbd() {
	open_pair
	truncate -s 96M "$img" "$csimg" || because "growing the images failed"
	loop=$(cryptsetup status vmt | awk '/^  device:/ {print $2}')
	losetup -c "$loop" || because "losetup -c $loop failed"
	cryptsetup refresh --key-file "$key" vmt 2>"$SCRATCH/cs.err" || because "cryptsetup refresh failed: $(cat "$SCRATCH/cs.err")"
	luksd refresh --key-file "$key" vol 2>"$SCRATCH/ld.err" || because "luksd refresh failed: $(cat "$SCRATCH/ld.err")"
	same_size "refreshed after growing"
	[ "$(blockdev --getsize64 /dev/mapper/vol)" = $((80 << 20)) ] || because "luksd's device is not 80 MiB after refresh"
	luksd_close vol || because "luksd close failed"
	cs_close vmt || because "cryptsetup close failed"
}

check "$VMTEST_SCENARIO grow-shrink aes-xts-plain64/4096 nbd" grow_nbd
check "$VMTEST_SCENARIO refresh-grows aes-xts-plain64/4096 nbd" refresh_grow_nbd
check "$VMTEST_SCENARIO refused ublk" refuse_ublk
