#!/bin/sh
# 24-suspend-resume: luksSuspend and luksResume of a mounted ext4 on luksd,
# over nbd and ublk. While suspended, a write with fsync into the mounted
# filesystem must wait (not fail), status must say "(suspended)", close
# must be refused and a wrong passphrase must not resume it; after
# luksResume the write finishes, the files are intact and e2fsck is clean.
# cryptsetup's messages and exit codes are compared on a dm-crypt mapping
# of its own: suspend of an unknown name, resume of a running volume,
# suspend of a suspended one, resume with a wrong passphrase.
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
wrong=$SCRATCH/wrong
mkkey "$wrong"
mnt=/mnt/vol
mkdir -p "$mnt"

# suspended_because WHY resumes both volumes, then fails the check: a
# mount left on a suspended device would hang cleanup_all's umount.
suspended_because() {
	luksd luksResume --key-file "$key" vol >/dev/null 2>&1
	cryptsetup luksResume --key-file "$key" vmt >/dev/null 2>&1
	because "$@"
}

# same_answer WHAT CS_NAME LUKSD_NAME VERB ARGS...: both tools, same exit
# code and last line of stderr (names replaced).
same_answer() {
	_what=$1 _cn=$2 _ln=$3
	shift 3
	_v=$1
	shift
	cryptsetup "$_v" "$@" "$_cn" </dev/null >/dev/null 2>"$SCRATCH/cs.err"
	_cc=$?
	luksd "$_v" "$@" "$_ln" </dev/null >/dev/null 2>"$SCRATCH/ld.err"
	_lc=$?
	_cl=$(tail -n1 "$SCRATCH/cs.err" | sed "s/$_cn/NAME/g")
	_ll=$(tail -n1 "$SCRATCH/ld.err" | sed "s/$_ln/NAME/g")
	[ "$_cc" = "$_lc" ] && [ "$_cl" = "$_ll" ] || suspended_because "$_what: cryptsetup exit $_cc '$_cl', luksd exit $_lc '$_ll'"
}

suspend_resume() {
	fe=$1
	img=$SCRATCH/img
	csimg=$SCRATCH/cs.img
	mkimage "$img" 64
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	cp "$img" "$csimg"
	dev=$(luksd_open "$fe" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	cs_open "$csimg" vmt "$key" || because "cryptsetup open failed"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 on $dev failed"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	mkpattern "$mnt/before.bin" 4
	sync -f "$mnt"

	same_answer "suspend of an unknown name" nothere nothere luksSuspend
	same_answer "resume of a running volume" vmt vol luksResume --key-file "$key"
	cryptsetup luksSuspend vmt || because "cryptsetup luksSuspend failed"
	luksd luksSuspend vol || suspended_because "luksd luksSuspend failed"
	same_answer "suspend of a suspended volume" vmt vol luksSuspend
	same_answer "resume with a wrong passphrase" vmt vol luksResume --key-file "$wrong"
	cryptsetup status vmt | grep -q 'mode: *read/write (suspended)' || suspended_because "cryptsetup status does not say suspended"
	luksd status vol | grep -q 'mode: *read/write (suspended)' || suspended_because "luksd status does not say suspended: $(luksd status vol)"

	mkpattern "$SCRATCH/during.bin" 2
	dd if="$SCRATCH/during.bin" of="$mnt/during.bin" bs=1M conv=fsync 2>/dev/null &
	writer=$!
	sleep 3
	kill -0 "$writer" 2>/dev/null || suspended_because "a write with fsync finished while the volume was suspended"
	luksd close vol 2>/dev/null && suspended_because "luksd close of a suspended volume succeeded"
	kill -0 "$writer" 2>/dev/null || suspended_because "the writer ended after a wrong passphrase or a close"

	luksd luksResume --key-file "$key" vol || because "luksd luksResume failed"
	wait "$writer" || because "the write waiting through the suspension failed"
	cryptsetup luksResume --key-file "$key" vmt || because "cryptsetup luksResume failed"
	luksd status vol | grep -q 'mode: *read/write$' || because "luksd status after resume: $(luksd status vol)"
	[ "$(sum_of "$mnt/during.bin")" = "$(sum_of "$SCRATCH/during.bin")" ] || because "the file written across the suspension differs"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	fsck_clean "$dev" "after resume"
	luksd_close vol || because "luksd close failed"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img" "$csimg"
}

for fe in nbd ublk; do
	check "$VMTEST_SCENARIO $fe" suspend_resume "$fe"
done
