#!/bin/sh
# 47-mapper-names: `luksd open DEV NAME` names the volume /dev/mapper/NAME,
# a device-mapper linear mapping over luksd's /dev/nbdN or /dev/ublkbN:
# dmsetup shows its table and LUKSD- uuid, lsblk its type "luksd" over the
# block device, findmnt the mount; status says "in use" while mounted and
# close refuses (exit 5); close removes it; so does cleaning up after a
# daemon killed with SIGKILL. `luksd status` prints cryptsetup 2.6.1's
# status lines for the same volume opened by dm-crypt (same loop device),
# word for word but for "key location", luksd's own lines after them.
# UUID=/LABEL= find the device without udev; the daemon's oom_score_adj
# is -1000; `open --recover` after SIGKILL keeps the mapping, mounted.
# requires: luksd-open-nbd luksd-open-ublk luksd-recover-nbd luksd-recover-ublk
. /vmtest/guest/lib.sh
require_luksd
export VMTEST_MAPPING=dm # luksd's default: see lib.sh

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"

state_of() { sed -n "s/^$2=//p" "/run/luksd/$1/state"; }

names() {
	fe=$1
	img=$SCRATCH/img
	mkimage "$img" 40
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" --label "nas-$fe" || because "luksFormat failed"
	out=$(luksd open --key-file "$key" --frontend "$fe" "$img" vol 2>"$SCRATCH/err") || because "open: $(cat "$SCRATCH/err")"
	m=/dev/mapper/vol
	[ "$out" = $m ] || because "open printed $out, want $m"
	dev=$(state_of vol device)
	case $dev in /dev/nbd[0-9]* | /dev/ublkb[0-9]*) ;; *) because "state device=$dev" ;; esac
	[ -b $m ] || because "$m is not a block device"
	[ "$(state_of vol mapper-kind)" = dm ] || because "state mapper-kind=$(state_of vol mapper-kind)"
	# what contrib/udev/60-luksd.rules imports
	[ "$(luksd udev-name "${dev#/dev/}" | tr '\n' ' ')" = "LUKSD_NAME=vol LUKSD_MAPPING=dm " ] || because "udev-name ${dev#/dev/}: $(luksd udev-name "${dev#/dev/}")"
	[ "$(cat /proc/"$(state_of vol pid)"/oom_score_adj)" = -1000 ] || because "oom_score_adj $(cat /proc/"$(state_of vol pid)"/oom_score_adj)"
	mm=$(printf '%d:%d' "0x$(stat -L -c %t "$dev")" "0x$(stat -L -c %T "$dev")")
	sectors=$(blockdev --getsz "$dev")
	table=$(dmsetup table vol) || because "dmsetup table vol failed"
	[ "$table" = "0 $sectors linear $mm 0" ] || because "dmsetup table: $table, want 0 $sectors linear $mm 0"
	dmsetup info -c --noheadings -o uuid vol | grep -q '^LUKSD-LUKS2-[0-9a-f]*-vol$' || because "dm uuid $(dmsetup info -c --noheadings -o uuid vol)"
	[ "$(blockdev --getsize64 $m)" = "$(blockdev --getsize64 "$dev")" ] || because "size of $m differs from $dev"
	[ "$(blockdev --getss $m)" = 4096 ] || because "logical block size of $m is $(blockdev --getss $m)"
	lsblk -rno NAME,TYPE "$dev" >"$SCRATCH/lsblk" || because "lsblk failed"
	grep -qx 'vol luksd' "$SCRATCH/lsblk" || because "lsblk: $(tr '\n' ';' <"$SCRATCH/lsblk")"

	mkfs.ext4 -q -F $m 2>"$SCRATCH/err" || because "mkfs.ext4 $m: $(tail -n1 "$SCRATCH/err")"
	mount -t ext4 $m "$mnt" || because "mount $m failed"
	findmnt -rno SOURCE "$mnt" | grep -qx $m || because "findmnt: $(findmnt -rno SOURCE "$mnt")"
	luksd status vol | head -n1 | grep -qx "$m is active and is in use." || because "status while mounted: $(luksd status vol | head -n1)"
	rc=0
	luksd close vol 2>"$SCRATCH/err" || rc=$?
	[ "$rc" = 5 ] || because "close while mounted exit $rc, want 5"
	[ -b $m ] || because "a refused close removed $m"
	head -c 1048576 /dev/urandom >"$mnt/f"
	umount "$mnt"
	luksd status vol | head -n1 | grep -qx "$m is active." || because "status after umount: $(luksd status vol | head -n1)"
	luksd close vol || because "close failed"
	[ ! -e $m ] || because "close left $m"
	dmsetup info vol >/dev/null 2>&1 && because "close left the dm device"

	# SIGKILL: the mapping stays until the next open (or close) of the
	# name cleans up.
	out=$(luksd open --key-file "$key" --frontend "$fe" "LABEL=nas-$fe" vol 2>"$SCRATCH/err") && because "LABEL= of an image file opened $out (no block device holds it)"
	loop=$(mkloop "$img") || because "losetup failed"
	luksd open --key-file "$key" --frontend "$fe" "LABEL=nas-$fe" vol >/dev/null 2>"$SCRATCH/err" || because "open LABEL=nas-$fe: $(cat "$SCRATCH/err")"
	[ "$(state_of vol image)" = "$loop" ] || because "LABEL= opened $(state_of vol image), want $loop"
	kill -9 "$(state_of vol pid)"
	sleep 1
	luksd close vol 2>"$SCRATCH/err" || because "close after SIGKILL: $(cat "$SCRATCH/err")"
	[ ! -e $m ] || because "cleanup after SIGKILL left $m"
	dmsetup info vol >/dev/null 2>&1 && because "cleanup after SIGKILL left the dm device"
	uuid=$(cryptsetup luksUUID "$loop")
	luksd open --key-file "$key" --frontend "$fe" "UUID=$uuid" vol >/dev/null 2>"$SCRATCH/err" || because "open UUID=$uuid: $(cat "$SCRATCH/err")"
	mount -t ext4 -o ro $m "$mnt" || because "mount after reopen failed"
	[ -s "$mnt/f" ] || because "the file written before is gone"
	umount "$mnt"
	luksd close vol || because "close after UUID= open failed"
}

# recover_dm: a daemon killed under a mounted /dev/mapper/vol is taken
# over by `open --recover`; the mapping stays the same device and the
# file system carries on.
recover_dm() {
	fe=$1
	img=$SCRATCH/img
	mkimage "$img" 40
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "luksFormat failed"
	luksd open --key-file "$key" --frontend "$fe" "$img" vol >/dev/null 2>"$SCRATCH/err" || because "open: $(cat "$SCRATCH/err")"
	dev=$(state_of vol device)
	mkfs.ext4 -q -F /dev/mapper/vol || because "mkfs failed"
	mount -t ext4 /dev/mapper/vol "$mnt" || because "mount failed"
	rdev=$(stat -L -c %t:%T /dev/mapper/vol)
	kill -9 "$(state_of vol pid)"
	sleep 1
	out=$(luksd open --recover "--$fe-device" "$dev" --key-file "$key" --frontend "$fe" "$img" vol 2>"$SCRATCH/err") || because "open --recover: $(cat "$SCRATCH/err")"
	[ "$out" = /dev/mapper/vol ] || because "open --recover printed $out"
	[ "$(stat -L -c %t:%T /dev/mapper/vol)" = "$rdev" ] || because "the mapping changed device"
	head -c 1048576 /dev/urandom >"$SCRATCH/p"
	cp "$SCRATCH/p" "$mnt/p" && sync || because "writing after the takeover failed"
	umount "$mnt"
	fsck_clean /dev/mapper/vol "after the steps"
	luksd close vol || because "close failed"
	[ ! -e /dev/mapper/vol ] || because "close left /dev/mapper/vol"
}

# status_text compares luksd status with cryptsetup status of the same
# loop device, with and without --allow-discards and --readonly.
status_text() {
	img=$SCRATCH/img
	mkimage "$img" 40
	cs_format "$img" "$key" "$1" || because "luksFormat failed"
	loop=$(mkloop "$img") || because "losetup failed"
	for opts in "" "--allow-discards" "--readonly"; do
		# shellcheck disable=SC2086
		cryptsetup open --key-file "$key" $opts "$loop" cs || because "cryptsetup open $opts failed"
		cryptsetup status cs | grep -v '^  key location:' | sed 's,/dev/mapper/cs ,/dev/mapper/vol ,' >"$SCRATCH/want"
		cryptsetup close cs
		# shellcheck disable=SC2086
		luksd open --key-file "$key" --frontend nbd $opts "$loop" vol >/dev/null 2>"$SCRATCH/err" || because "luksd open $opts: $(cat "$SCRATCH/err")"
		luksd status vol | grep -v '^  key location:' >"$SCRATCH/got"
		luksd close vol
		n=$(wc -l <"$SCRATCH/want")
		head -n "$n" "$SCRATCH/got" >"$SCRATCH/got.head"
		cmp -s "$SCRATCH/want" "$SCRATCH/got.head" || because "status $opts differs: cryptsetup [$(tr '\n' '|' <"$SCRATCH/want")] luksd [$(tr '\n' '|' <"$SCRATCH/got")]"
	done
	for arg in nothere /dev/mapper/nothere; do
		rcw=0 rcg=0
		cryptsetup status $arg >"$SCRATCH/want" 2>&1 || rcw=$?
		luksd status $arg >"$SCRATCH/got" 2>&1 || rcg=$?
		[ "$rcw" = "$rcg" ] && cmp -s "$SCRATCH/want" "$SCRATCH/got" || because "status $arg: cryptsetup $rcw [$(cat "$SCRATCH/want")], luksd $rcg [$(cat "$SCRATCH/got")]"
	done
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096 names nbd" names nbd
check "$VMTEST_SCENARIO aes-xts-plain64/4096 names ublk" names ublk
check "$VMTEST_SCENARIO aes-xts-plain64/4096 recover under the mapping nbd" recover_dm nbd
check "$VMTEST_SCENARIO aes-xts-plain64/4096 recover under the mapping ublk" recover_dm ublk
for label in aes-xts-plain64/512 xchacha12,aes-adiantum-plain64/4096 aes-cbc-essiv:sha256/luks1; do
	check "$VMTEST_SCENARIO $label status text" status_text "$(cipher_line "$label")"
done
