#!/bin/sh
# 87-exclusive-nbd: a disk is never mapped twice. luksd claims its data
# device as the kernel's dm-crypt does (O_EXCL on a block device, an OFD
# lock on an image and on a loop device's backing file), in both directions
# against cryptsetup:
#   luksd then cryptsetup: cryptsetup open of the same loop device fails,
#     mount of it fails, luksd through it, the image under it, a symlink or
#     a second loop device over the image all exit 5 with cryptsetup's
#     message; cryptsetup luksAddKey on it still works (its lock is a
#     flock); status names the holder.
#   cryptsetup then luksd: luksd open of cryptsetup's loop device, and of
#     an image cryptsetup opened (through its own loop device), exit 5.
#   luksd on an image file, then cryptsetup open of the image: an INFO line
#     says what cryptsetup did (it sets up its own loop device, which looks
#     at no lock; dm-crypt has the same gap between two loop devices).
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
key2=$SCRATCH/key2
mkkey "$key2"
mnt=/mnt/vol
mkdir -p "$mnt"

msg() { echo "Cannot use device $1 which is in use (already mapped or mounted)."; }

# refused WHAT ARGS...: luksd open ARGS must exit 5 with cryptsetup's
# message for WHAT.
refused() {
	_what=$1
	shift
	_rc=0
	luksd open --key-file "$key" --frontend nbd "$@" 2>"$SCRATCH/err" >/dev/null || _rc=$?
	[ "$_rc" = 5 ] || because "luksd open $* exit $_rc, want 5 ($(cat "$SCRATCH/err"))"
	grep -qxF "$(msg "$_what")" "$SCRATCH/err" || because "luksd open $*: $(cat "$SCRATCH/err"), want: $(msg "$_what")"
}

new_image() {
	mkimage "$1" 40
	cs_format "$1" "$key" "$(cipher_line aes-xts-plain64/512)" || because "cryptsetup luksFormat failed"
}

attach() { _l=$(losetup -f) && losetup "$_l" "$1" && echo "$_l"; }

luksd_first() {
	img=$SCRATCH/img
	new_image "$img"
	loop=$(attach "$img") || because "losetup failed"
	dev=$(luksd_open nbd "$loop" a "$key") || because "luksd open failed: $(open_failure a)"
	rc=0
	cryptsetup open --key-file "$key" "$loop" b 2>"$SCRATCH/cs.err" || rc=$?
	[ "$rc" != 0 ] || because "cryptsetup open of $loop succeeded while luksd has it"
	note "$VMTEST_SCENARIO luksd then cryptsetup: cryptsetup open exit $rc: $(head -n1 "$SCRATCH/cs.err")"
	mount -t ext4 "$loop" "$mnt" 2>/dev/null && because "mounting $loop succeeded while luksd has it"
	refused "$loop" "$loop" c
	refused "$img" "$img" c
	ln -s "$loop" "$SCRATCH/link"
	refused "$SCRATCH/link" "$SCRATCH/link" c
	loop2=$(attach "$img") || because "second losetup failed"
	refused "$loop2" "$loop2" c
	losetup -d "$loop2"
	luksd status a >"$SCRATCH/status" || because "status failed"
	grep -q "^  holder:  luksd pid [0-9]*, exclusive (O_EXCL)\$" "$SCRATCH/status" || because "status does not name the holder: $(cat "$SCRATCH/status")"
	cryptsetup luksAddKey -q $PBKDF_ARGS --key-file "$key" "$loop" "$key2" 2>"$SCRATCH/err" || because "cryptsetup luksAddKey while luksd has the device: $(cat "$SCRATCH/err")"
	luksd_close a || because "close failed"
	# Released: cryptsetup opens it now, with the new key too.
	cryptsetup open --key-file "$key2" "$loop" b || because "cryptsetup open after luksd closed failed"
	cs_close b
}

cryptsetup_first() {
	img=$SCRATCH/img
	new_image "$img"
	loop=$(attach "$img") || because "losetup failed"
	cs_open "$loop" b "$key" || because "cryptsetup open failed"
	refused "$loop" "$loop" a
	refused "$img" "$img" a
	cs_close b
	losetup -d "$loop"
	cs_open "$img" b "$key" || because "cryptsetup open of the image failed"
	refused "$img" "$img" a
	cs_close b
	dev=$(luksd_open nbd "$img" a "$key") || because "luksd open after cryptsetup closed failed: $(open_failure a)"
	luksd_close a || because "close failed"
}

luksd_image() {
	img=$SCRATCH/img
	new_image "$img"
	dev=$(luksd_open nbd "$img" a "$key") || because "luksd open failed: $(open_failure a)"
	ln "$img" "$SCRATCH/hard"
	refused "$SCRATCH/hard" "$SCRATCH/hard" c
	loop=$(attach "$img") || because "losetup failed"
	refused "$loop" "$loop" c
	rc=0
	cryptsetup open --key-file "$key" "$img" b 2>"$SCRATCH/cs.err" || rc=$?
	note "$VMTEST_SCENARIO luksd on an image file, then cryptsetup open of the image: exit $rc $(head -n1 "$SCRATCH/cs.err")"
	[ "$rc" = 0 ] && cs_close b
	losetup -d "$loop"
	luksd_close a || because "close failed"
}

check "$VMTEST_SCENARIO luksd then cryptsetup" luksd_first
check "$VMTEST_SCENARIO cryptsetup then luksd" cryptsetup_first
check "$VMTEST_SCENARIO luksd twice, image file" luksd_image
