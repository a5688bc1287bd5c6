#!/bin/sh
# 44-remote-nbdkit-nbd: luksd's /dev/nbdN reads through to a remote nbdkit
# in the same VM. nbdkit's file plugin exports a ciphertext image (on a
# unix socket, then on loopback TCP); luksd opens the nbd+unix:// or
# nbd:// location as /dev/nbdN; mkfs.ext4, a big file and a tree of small
# ones, umount, close; reopen through nbdkit: e2fsck -fn clean, files
# intact; then nbdkit stops and the kernel's dm-crypt opens the exported
# file through a loop device: e2fsck clean, files intact. Over TCP luksd
# also formats the volume itself, through nbdkit.
# requires: luksd-open-nbd luksd-format
# timeout: 600
. /vmtest/guest/lib.sh
require_luksd
command -v nbdkit >/dev/null || { echo "FAIL $VMTEST_SCENARIO: nbdkit is not in the VM image"; exit 1; }

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"
img=$SCRATCH/exported.img
ip link set lo up

# stop_nbdkit stops the server and waits until it has gone (and with it
# its socket and port).
stop_nbdkit() {
	[ -e "$SCRATCH/nbdkit.pid" ] || return 0
	_p=$(cat "$SCRATCH/nbdkit.pid")
	kill "$_p" 2>/dev/null || true
	_i=0
	while kill -0 "$_p" 2>/dev/null && [ $_i -lt 100 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	rm -f "$SCRATCH/nbdkit.pid" "$SCRATCH/nbdkit.sock"
}
trap stop_nbdkit EXIT

# start_nbdkit unix|tcp serves $img (nbdkit forks into the background once
# it listens) and prints the location luksd opens.
start_nbdkit() {
	stop_nbdkit
	if [ "$1" = unix ]; then
		nbdkit -P "$SCRATCH/nbdkit.pid" -U "$SCRATCH/nbdkit.sock" file "$img" >>"$SCRATCH/nbdkit.log" 2>&1 || return 1
		echo "nbd+unix:///?socket=$SCRATCH/nbdkit.sock"
	else
		nbdkit -P "$SCRATCH/nbdkit.pid" -i 127.0.0.1 -p 10810 file "$img" >>"$SCRATCH/nbdkit.log" 2>&1 || return 1
		echo "nbd://127.0.0.1:10810/"
	fi
}

remote() {
	transport=$1 formatter=$2
	rm -f "$img"
	mkimage "$img" 64
	loc=$(start_nbdkit "$transport") || because "nbdkit did not start: $(tail -n2 "$SCRATCH/nbdkit.log")"
	if [ "$formatter" = luksd ]; then
		# luksd writes the header through nbdkit: the remote file is all it touches.
		luksd luksFormat -q $PBKDF_ARGS --type luks2 --sector-size 4096 --key-file "$key" "$loc" ||
			because "luksd luksFormat $loc failed"
	else
		cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	fi
	dev=$(luksd_open nbd "$loc" vol "$key") || because "luksd open $loc failed: $(open_failure vol)"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 on $dev failed"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	mkpattern "$mnt/big.bin" 4
	make_tree "$mnt/tree" 100 97
	save_tree "$mnt" 101
	sync -f "$mnt"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"
	# A fresh nbdkit: nothing is served from the old one's state.
	loc=$(start_nbdkit "$transport") || because "nbdkit did not restart: $(tail -n2 "$SCRATCH/nbdkit.log")"
	dev=$(luksd_open nbd "$loc" vol "$key") || because "luksd reopen failed: $(open_failure vol)"
	fsck_clean "$dev" "through luksd and nbdkit"
	mount -t ext4 -o ro "$dev" "$mnt" || because "mounting $dev after reopen failed"
	verify_tree "$mnt" || because "files differ after reopening through nbdkit"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"
	stop_nbdkit

	loop=$(mkloop "$img") || because "losetup $img failed"
	cs_open "$loop" vmt "$key" || because "cryptsetup open $loop failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mounting through dm-crypt failed"
	verify_tree "$mnt" || because "files read through dm-crypt differ"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	cs_close vmt || because "cryptsetup close failed"
}

check "$VMTEST_SCENARIO nbd+unix cryptsetup-format nbd" remote unix cryptsetup
check "$VMTEST_SCENARIO nbd-tcp luksd-format nbd" remote tcp luksd
