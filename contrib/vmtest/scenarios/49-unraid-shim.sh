#!/bin/sh
# 49-unraid-shim: contrib/unraid/cryptsetup in place of cryptsetup, driven
# with emhttp's argv on a three-disk "array" (loop devices): disk 1 is
# formatted through the shim with Adiantum on a kernel whose adiantum.ko is
# unloaded and cannot load, so luksd formats and serves it; disks 2 and 3
# (AES) go to the real cryptsetup and dm-crypt. Each /dev/mapper/mdNp1
# mounts and takes a file; the array stops (umount, luksClose) and starts
# again with the files intact; status goes to whoever serves the disk.
# With LUKSD_SHIM=all luksd serves an AES disk too.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd
export VMTEST_MAPPING=dm

shim=/run/unraid/cryptsetup
export LUKSD_REAL_CRYPTSETUP=/usr/sbin/cryptsetup LUKSD=/run/vmtest-bin/luksd LUKSD_SHIM=missing
keyfile=$SCRATCH/keyfile
mkkey "$keyfile"

# no_adiantum unloads adiantum.ko and hides it from modprobe; has_adiantum
# undoes that.
no_adiantum() {
	rmmod adiantum 2>/dev/null || true
	for m in $(find /lib/modules -name 'adiantum.ko*'); do mv "$m" "$m.off"; done
	[ ! -d /sys/module/adiantum ] && ! grep -q adiantum /proc/crypto && ! modprobe -q adiantum 2>/dev/null
}
has_adiantum() {
	for m in $(find /lib/modules -name 'adiantum.ko*.off'); do mv "$m" "${m%.off}"; insmod "${m%.off}" 2>/dev/null || true; done
}

start_array() {
	for n in 1 2 3; do
		"$shim" luksOpen "$(cat "$SCRATCH/loop$n")" "md${n}p1" --allow-discards "--key-file=$keyfile" || because "luksOpen md${n}p1 exit $?"
		[ -b "/dev/mapper/md${n}p1" ] || because "/dev/mapper/md${n}p1 missing"
		mkdir -p "/mnt/disk$n"
		mount -t ext4 "/dev/mapper/md${n}p1" "/mnt/disk$n" || because "mount disk$n failed"
	done
}

stop_array() {
	for n in 1 2 3; do
		umount "/mnt/disk$n" || because "umount disk$n failed$(held_by "/mnt/disk$n")"
		"$shim" luksClose "md${n}p1" || because "luksClose md${n}p1 exit $?"
		[ ! -e "/dev/mapper/md${n}p1" ] || because "luksClose left /dev/mapper/md${n}p1"
	done
}

array() {
	mkdir -p /run/unraid
	cp /vmtest/contrib/unraid/cryptsetup "$shim" || because "no shim in the VM"
	chmod +x "$shim"
	no_adiantum || because "adiantum.ko still loaded or loadable after rmmod"
	for n in 1 2 3; do
		mkimage "$SCRATCH/disk$n" 48
		mkloop "$SCRATCH/disk$n" >"$SCRATCH/loop$n" || because "losetup failed"
	done
	# shellcheck disable=SC2086
	"$shim" luksFormat -q --cipher xchacha12,aes-adiantum-plain64 --key-size 256 $PBKDF_ARGS "--key-file=$keyfile" "$(cat "$SCRATCH/loop1")" ||
		because "Adiantum luksFormat through the shim failed"
	for n in 2 3; do
		# shellcheck disable=SC2086
		"$shim" luksFormat -q $PBKDF_ARGS "--key-file=$keyfile" "$(cat "$SCRATCH/loop$n")" || because "luksFormat disk$n failed"
	done
	for n in 1 2 3; do
		"$shim" luksOpen "$(cat "$SCRATCH/loop$n")" "md${n}p1" --allow-discards "--key-file=$keyfile" || because "first luksOpen md${n}p1 exit $?"
		mkfs.ext4 -q -F "/dev/mapper/md${n}p1" || because "mkfs disk$n failed"
		"$shim" luksClose "md${n}p1" || because "first luksClose md${n}p1"
	done
	start_array
	dmsetup info -c --noheadings -o uuid md1p1 | grep -q '^LUKSD-' || because "md1p1 is not luksd's: $(dmsetup info -c --noheadings -o uuid md1p1)"
	for n in 2 3; do
		dmsetup info -c --noheadings -o uuid "md${n}p1" | grep -q '^CRYPT-' || because "md${n}p1 is not dm-crypt's"
	done
	"$shim" status md1p1 | grep -q '^  cipher:  xchacha12,aes-adiantum-plain64$' || because "status md1p1: $("$shim" status md1p1)"
	"$shim" status md1p1 | head -n1 | grep -qx '/dev/mapper/md1p1 is active and is in use.' || because "status md1p1 head: $("$shim" status md1p1 | head -n1)"
	"$shim" status md2p1 | grep -q '^  cipher:  aes-xts-plain64$' || because "status md2p1"
	for n in 1 2 3; do
		head -c 2097152 /dev/urandom >"$SCRATCH/f$n"
		cp "$SCRATCH/f$n" "/mnt/disk$n/f" || because "write disk$n failed"
	done
	stop_array
	start_array
	for n in 1 2 3; do
		cmp -s "$SCRATCH/f$n" "/mnt/disk$n/f" || because "disk$n's file differs after the restart"
	done
	stop_array
	LUKSD_SHIM=all "$shim" luksOpen "$(cat "$SCRATCH/loop2")" md2p1 "--key-file=$keyfile" || because "LUKSD_SHIM=all luksOpen failed"
	dmsetup info -c --noheadings -o uuid md2p1 | grep -q '^LUKSD-' || because "LUKSD_SHIM=all: md2p1 is not luksd's"
	LUKSD_SHIM=all "$shim" luksClose md2p1 || because "LUKSD_SHIM=all luksClose failed"
}

check "$VMTEST_SCENARIO xchacha12,aes-adiantum-plain64 array" array
has_adiantum
[ -d /sys/module/adiantum ] || fail "$VMTEST_SCENARIO adiantum.ko back" "adiantum.ko did not load again: later scenarios need it"
