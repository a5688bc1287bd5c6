#!/bin/sh
# 54-reencrypt-encrypt-nbd: a plain ext4 image (the filesystem 8 MiB short
# of the image's end) is encrypted in place by `luksd reencrypt --encrypt
# --reduce-device-size 8M` (header at the front, data shifted); the
# kernel's dm-crypt (cryptsetup open) and luksd (/dev/nbdN), each on its
# own copy, then mount it and find every file, e2fsck clean. The same
# when cryptsetup starts the encryption and is killed -9 part-way and
# luksd finishes it, and the other way round; and part-way, as it is,
# both open it (linear and crypt segments) and find the files.
# requires: luksd-reencrypt luksd-open-nbd
# timeout: 600
. /vmtest/guest/lib.sh
. /vmtest/guest/reencrypt.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"
enc="--encrypt --reduce-device-size 8M --force-offline-reencrypt -q --key-file $key $PBKDF_ARGS"

# plain_ext4 IMAGE: a 96 MiB image holding an 88 MiB ext4 with files.
plain_ext4() {
	mkimage "$1" 96
	mkfs.ext4 -q -F "$1" 88M || because "mkfs.ext4 failed"
	_l=$(mkloop "$1") || because "losetup failed"
	mount -t ext4 "$_l" "$mnt" || because "mounting the plain image failed"
	mkpattern "$mnt/big.bin" 20
	make_tree "$mnt/tree" 150 211
	save_tree "$mnt" 151
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	losetup -d "$_l"
}

# files_read IMAGE WHEN: dm-crypt reads IMAGE and luksd (/dev/nbdN) a copy
# of it; both find the files, e2fsck clean.
files_read() {
	cp "$1" "$SCRATCH/copy"
	cs_open "$1" vmt "$key" || because "cryptsetup open $2 failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt $2"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mounting through dm-crypt $2 failed"
	verify_tree "$mnt" || because "files read through dm-crypt $2 differ"
	umount "$mnt"
	cs_close vmt || because "cryptsetup close failed"
	dev=$(luksd_open nbd "$SCRATCH/copy" vol "$key") || because "luksd open $2 failed: $(open_failure vol)"
	fsck_clean "$dev" "through luksd $2"
	mount -t ext4 -o ro "$dev" "$mnt" || because "mounting $dev $2 failed"
	verify_tree "$mnt" || because "files read through luksd $2 differ"
	umount "$mnt"
	luksd_close vol || because "luksd close failed"
	rm -f "$SCRATCH/copy"
}

# both_read IMAGE: the encryption is over; both tools find the files.
both_read() {
	! cryptsetup luksDump "$1" | grep -q reencrypt || because "reencryption metadata left behind"
	files_read "$1" "after the encryption"
}

luksd_alone() {
	img=$SCRATCH/img
	plain_ext4 "$img"
	# shellcheck disable=SC2086
	luksd reencrypt $enc "$img" || because "luksd reencrypt --encrypt failed"
	both_read "$img"
}

# killed_midway TOOL IMAGE: TOOL starts encrypting IMAGE and is killed -9
# once some data is encrypted.
killed_midway() {
	# shellcheck disable=SC2086
	"$1" reencrypt --init-only $enc "$2" || because "$1 --init-only failed"
	"$1" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$2" &
	_p=$!
	for _ in $(seq 400); do
		# a crypt segment besides backup-final: some data is encrypted
		[ "$(cryptsetup luksDump "$2" 2>/dev/null | grep -c '^  [0-9]*: crypt')" -ge 2 ] && break
		sleep 0.05
	done
	kill -9 "$_p" 2>/dev/null || because "$1 finished before it could be killed"
	wait "$_p" 2>/dev/null || true
	reenc_release
	cryptsetup luksDump "$2" | grep -q "online-reencrypt" || because "no encryption left to resume after killing $1"
}

# cross FIRST SECOND: FIRST starts the encryption and is killed -9 part-way;
# SECOND finishes it.
cross() {
	img=$SCRATCH/img
	plain_ext4 "$img"
	killed_midway "$1" "$img"
	out=$("$2" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$img" 2>&1) || case $out in
	*"Run repair first"*)
		cryptsetup repair -q --key-file "$key" "$img" || because "cryptsetup repair failed"
		"$2" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$img" || because "$2 resume after repair failed"
		;;
	*) because "$2 resume failed: $out" ;;
	esac
	both_read "$img"
}

# mid_open: luksd starts the encryption and is killed -9 part-way; the
# kernel's dm-crypt (cryptsetup open, segments linear and crypt) and luksd
# (/dev/nbdN) each open a copy as it is and find the files.
mid_open() {
	img=$SCRATCH/img
	plain_ext4 "$img"
	killed_midway luksd "$img"
	files_read "$img" "part-way"
}

check "54-reencrypt-encrypt-nbd luksd-encrypts" luksd_alone
check "54-reencrypt-encrypt-nbd cryptsetup-killed luksd-finishes" cross cryptsetup luksd
check "54-reencrypt-encrypt-nbd luksd-killed cryptsetup-finishes" cross luksd cryptsetup
check "54-reencrypt-encrypt-nbd part-way dm-crypt-and-luksd-open" mid_open
