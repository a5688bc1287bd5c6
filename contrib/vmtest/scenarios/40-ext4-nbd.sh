#!/bin/sh
# 40-ext4-nbd: a filesystem on luksd. cryptsetup formats the image; luksd
# opens it as /dev/nbdN; mkfs.ext4, a big file and a tree of small ones,
# sync, umount, close; reopen: e2fsck -fn is clean and every file is intact;
# then the same image opened by the kernel's dm-crypt: e2fsck -fn clean and
# the files intact.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"

filesystem() {
	img=$SCRATCH/img
	mkimage "$img" 64
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 on $dev failed"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	mkpattern "$mnt/big.bin" 4
	make_tree "$mnt/tree" 200 97
	save_tree "$mnt" 201
	sync -f "$mnt" # syncfs: a global sync could hang on a dead device
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"

	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd reopen failed"
	fsck_clean "$dev" "through luksd"
	mount -t ext4 -o ro "$dev" "$mnt" || because "mounting $dev after reopen failed"
	verify_tree "$mnt" || because "files differ after luksd close and reopen"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"

	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mounting through dm-crypt failed"
	verify_tree "$mnt" || because "files read through dm-crypt differ"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img"
}

for label in aes-xts-plain64/4096 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label $FRONTEND" filesystem "$(cipher_line "$label")"
done
