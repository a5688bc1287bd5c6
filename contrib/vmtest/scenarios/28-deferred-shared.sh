#!/bin/sh
# 28-deferred-shared: close --deferred and plain --shared, luksd beside
# dm-crypt. A mounted volume closed with --deferred stays (both tools say
# the same line and keep the device), --cancel-deferred takes that back
# (still there after umount), and a deferred close goes once the file
# system is unmounted. Two plain mappings of one loop device: the second
# is refused without --shared by both (same exit code), accepted with it;
# what luksd writes through both mappings, dm-crypt's pair reads.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
side_by_side_setup

# gone_within TOOL NAME: TOOL status NAME says inactive within 10 s (no
# udev in the VM: dm's node may stay behind a deferred removal).
gone_within() {
	_i=0
	while "$1" status "$2" >/dev/null 2>&1; do
		_i=$((_i + 1))
		[ "$_i" -le 100 ] || return 1
		usleep 100000
	done
}

deferred_nbd() {
	img=$SCRATCH/img
	csimg=$SCRATCH/cs.img
	mkimage "$img" 48
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	cp "$img" "$csimg"
	luksd_open nbd "$img" vol "$key" >/dev/null || because "luksd open failed: $(open_failure vol)"
	cs_open "$csimg" vmt "$key" || because "cryptsetup open failed"
	for d in vol vmt; do
		mkfs.ext4 -q -F "/dev/mapper/$d" || because "mkfs.ext4 on $d failed"
	done
	mount -t ext4 /dev/mapper/vol "$mnt" || because "mounting luksd's device failed"
	mount -t ext4 /dev/mapper/vmt "$csmnt" || because "mounting dm-crypt's device failed"

	_l=$(luksd close --deferred vol 2>&1) || because "luksd close --deferred failed: $_l"
	_c=$(cryptsetup close --deferred vmt 2>&1) || because "cryptsetup close --deferred failed: $_c"
	[ "$(echo "$_l" | sed 's/vol/NAME/')" = "$(echo "$_c" | sed 's/vmt/NAME/')" ] ||
		because "close --deferred: luksd said '$_l', cryptsetup '$_c'"
	luksd status vol >/dev/null && cryptsetup status vmt >/dev/null || because "a deferred close removed a mounted device"
	note "close --deferred: $_l"
	luksd close --cancel-deferred vol || because "luksd close --cancel-deferred failed"
	cryptsetup close --cancel-deferred vmt || because "cryptsetup close --cancel-deferred failed"
	umount "$mnt" && umount "$csmnt" || because "umount failed$(held_by "$csmnt")"
	sleep 2 # the daemon polls for release every second
	luksd status vol >/dev/null && cryptsetup status vmt >/dev/null || because "a cancelled deferred close removed a device"
	# Without udev, libdevmapper drops the node of a device scheduled for
	# removal at once; the cancelled device needs it back.
	dmsetup mknodes vmt || because "dmsetup mknodes vmt failed"

	mount -t ext4 /dev/mapper/vol "$mnt" || because "remounting luksd's device failed"
	mount -t ext4 /dev/mapper/vmt "$csmnt" || because "remounting dm-crypt's device failed"
	luksd close --deferred vol >/dev/null || because "luksd close --deferred failed"
	cryptsetup close --deferred vmt >/dev/null || because "cryptsetup close --deferred failed"
	umount "$mnt" && umount "$csmnt" || because "umount failed$(held_by "$csmnt")"
	gone_within cryptsetup vmt || because "dm-crypt's device stayed after umount"
	gone_within luksd vol || because "luksd's device stayed after umount"
}

# plain_pair_b TOOL LOOP PREFIX SHARED opens PREFIX-b (16 MiB from sector
# 32768) of LOOP with TOOL, with --shared when SHARED is "--shared", and
# prints TOOL's exit code. The passphrase ($key) comes on standard input.
plain_pair_b() {
	_rc=0
	if [ "$1" = cryptsetup ]; then
		# shellcheck disable=SC2086
		cryptsetup open --type plain -q --key-file - -c aes-xts-plain64 -s 256 --hash sha256 \
			--offset 32768 --size 32768 $4 "$2" "$3-b" <"$key" 2>"$SCRATCH/why.$3" || _rc=$?
	else
		# shellcheck disable=SC2086
		luksd open --type plain --frontend nbd -q --key-file - -c aes-xts-plain64 -s 256 --hash sha256 \
			--offset 32768 --size 32768 $4 "$2" "$3-b" <"$key" >/dev/null 2>"$SCRATCH/why.$3" || _rc=$?
	fi
	echo "$_rc"
}

# plain_a TOOL LOOP PREFIX opens PREFIX-a (16 MiB from sector 0) of LOOP.
plain_a() {
	if [ "$1" = cryptsetup ]; then
		cryptsetup open --type plain -q --key-file - -c aes-xts-plain64 -s 256 --hash sha256 \
			--size 32768 "$2" "$3-a" <"$key"
	else
		luksd open --type plain --frontend nbd -q --key-file - -c aes-xts-plain64 -s 256 --hash sha256 \
			--size 32768 "$2" "$3-a" <"$key" >/dev/null
	fi
}

shared_plain_nbd() {
	img=$SCRATCH/img
	csimg=$SCRATCH/cs.img
	mkimage "$img" 48
	mkimage "$csimg" 48
	loop=$(mkloop "$img") || because "losetup failed"
	csloop=$(mkloop "$csimg") || because "losetup failed"
	mkpattern "$SCRATCH/head" 4
	mkpattern "$SCRATCH/tail" 1
	# Without --shared, a second mapping of a claimed device is refused.
	plain_a luksd "$loop" l || because "luksd open --type plain of $loop failed"
	plain_a cryptsetup "$csloop" c || because "cryptsetup open --type plain of $csloop failed"
	_lr=$(plain_pair_b luksd "$loop" l "") _cr=$(plain_pair_b cryptsetup "$csloop" c "")
	[ "$_cr" != 0 ] && [ "$_lr" = "$_cr" ] ||
		because "a second mapping without --shared: luksd exit $_lr ($(cat "$SCRATCH/why.l")), cryptsetup exit $_cr ($(cat "$SCRATCH/why.c"))"
	note "without --shared both exit $_cr: $(tail -n1 "$SCRATCH/why.l")"
	cs_close c-a || because "cryptsetup close failed"
	# With it, luksd writes through both mappings; dm-crypt's pair reads.
	[ "$(plain_pair_b luksd "$loop" l --shared)" = 0 ] || because "luksd open --shared failed: $(cat "$SCRATCH/why.l")"
	for d in l-a l-b; do
		last=$(write_data "/dev/mapper/$d") || because "writing through $d failed"
	done
	luksd_close l-a && luksd_close l-b || because "luksd close failed"
	plain_a cryptsetup "$loop" c || because "cryptsetup open --type plain of $loop failed"
	[ "$(plain_pair_b cryptsetup "$loop" c --shared)" = 0 ] || because "cryptsetup open --shared failed: $(cat "$SCRATCH/why.c")"
	for d in c-a c-b; do
		same_data "/dev/mapper/$d" "$last"
	done
	cs_close c-a && cs_close c-b || because "cryptsetup close failed"
}

check "$VMTEST_SCENARIO close-deferred aes-xts-plain64/4096 nbd" deferred_nbd
check "$VMTEST_SCENARIO plain-shared aes-xts-plain64 nbd" shared_plain_nbd
