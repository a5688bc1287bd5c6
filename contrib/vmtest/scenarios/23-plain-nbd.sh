#!/bin/sh
# 23-plain-nbd: plain dm-crypt (no header) against the kernel, both ways.
# For each option set below, `cryptsetup open --type plain` writes a known
# pattern (the first 4 MiB and the last MiB) and `luksd open --type plain`
# with the same options, serving /dev/nbdN, must read it; then luksd writes
# and dm-crypt must read it. Passphrases come on standard input
# (--key-file -, hashed with --hash), key files are the key itself.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
require_luksd

# name|key source (pass or file)|options
SETUPS='defaults|pass|
sha256-xts-offset-skip|pass|--hash sha256 -c aes-xts-plain64 -s 512 --offset 2048 --skip 100
hash-plain-4096-large-iv|pass|--hash plain -c aes-xts-plain64 -s 256 --sector-size 4096 --iv-large-sectors
keyfile-offset-size|file|-c aes-xts-plain64 -s 512 --keyfile-offset 7 --size 40960 --sector-size 4096
sha512-short-serpent|pass|--hash sha512:32 -c serpent-xts-plain64 -s 512 --device-size 16m
ripemd160-cbc-plain64|pass|-h ripemd160 -c aes-cbc-plain64 -s 128 -o 8 -p 8'

pass=$SCRATCH/pass
# Long enough to be a 256-bit key itself (--hash plain reads exactly that).
printf 'vmtest-%s' "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$pass"
keyfile=$SCRATCH/keyfile
head -c 128 /dev/urandom >"$keyfile"
mkpattern "$SCRATCH/head" 4
mkpattern "$SCRATCH/tail" 1

field() { echo "$1" | cut -d'|' -f"$2"; }

# open_with TOOL IMG NAME SOURCE OPTS... opens the plain mapping and prints
# its device.
open_with() {
	_tool=$1 _img=$2 _name=$3 _src=$4
	shift 4
	if [ "$_src" = file ]; then
		_k=$keyfile
	else
		_k=-
	fi
	if [ "$_tool" = cryptsetup ]; then
		# shellcheck disable=SC2086
		cryptsetup open --type plain -q --key-file "$_k" "$@" "$_img" "$_name" <"$pass" 2>"$SCRATCH/why.$_name" && echo "/dev/mapper/$_name"
	else
		# luksd open detaches its daemon and prints the device.
		luksd open --type plain --frontend nbd -q --key-file "$_k" "$@" "$_img" "$_name" <"$pass" 2>"$SCRATCH/why.$_name"
	fi
}

# layout TOOL NAME: the lines of TOOL status NAME both tools print alike.
layout() {
	"$1" status "$2" | grep -E '^ +(type|cipher|keysize|sector size|offset|size|skipped):' | tr -s ' ' | tr '\n' ';'
}

# one_way WRITER READER LINE
one_way() {
	img=$SCRATCH/img
	mkimage "$img" 32
	src=$(field "$3" 2)
	opts=$(field "$3" 3)
	# shellcheck disable=SC2086
	wdev=$(open_with "$1" "$img" w "$src" $opts) || because "$1 open --type plain $opts failed: $(cat "$SCRATCH/why.w" 2>/dev/null)"
	wsize=$(blockdev --getsize64 "$wdev")
	wstatus=$(layout "$1" w)
	last=$(write_data "$wdev") || because "writing through $wdev failed"
	if [ "$1" = cryptsetup ]; then cs_close w; else luksd_close w; fi || because "$1 close failed"
	# shellcheck disable=SC2086
	rdev=$(open_with "$2" "$img" r "$src" $opts) || because "$2 open --type plain $opts failed: $(cat "$SCRATCH/why.r" 2>/dev/null)"
	rsize=$(blockdev --getsize64 "$rdev")
	[ "$rsize" = "$wsize" ] || because "sizes differ: $1 $wsize, $2 $rsize"
	rstatus=$(layout "$2" r)
	[ -n "$rstatus" ] && [ "$rstatus" = "$wstatus" ] || because "status differs: $1: $wstatus; $2: $rstatus"
	same_data "$rdev" "$last"
	if [ "$2" = cryptsetup ]; then cs_close r; else luksd_close r; fi || because "$2 close failed"
	rm -f "$img"
}

echo "$SETUPS" | while read -r line; do
	n=$(field "$line" 1)
	check "$VMTEST_SCENARIO $n dm-crypt-to-luksd" one_way cryptsetup luksd "$line"
	check "$VMTEST_SCENARIO $n luksd-to-dm-crypt" one_way luksd cryptsetup "$line"
done
