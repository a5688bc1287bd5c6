#!/bin/sh
# 27-persistent-flags: open --persistent stores the line's activation flags
# in the LUKS2 header as cryptsetup's does. cryptsetup formats an image and
# makes a copy; luksd opens one and dm-crypt the other, each with
# --persistent --allow-discards --perf-no_read_workqueue: afterwards both
# headers hold the same metadata (cryptsetup's JSON dump of each is the
# same, Flags lists both flags). dm-crypt then opens luksd's image with no
# options and its table carries allow_discards and no_read_workqueue. Last,
# both open again with --persistent alone, which clears the flags in both.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"

# same_headers WHAT: both images' metadata as cryptsetup reads it.
same_headers() {
	cryptsetup luksDump --dump-json-metadata "$img" >"$SCRATCH/ld.json" || because "$1: cryptsetup cannot read luksd's header"
	cryptsetup luksDump --dump-json-metadata "$copy" >"$SCRATCH/cs.json" || because "$1: cryptsetup cannot read its own header"
	cmp -s "$SCRATCH/ld.json" "$SCRATCH/cs.json" ||
		because "$1: metadata differ: luksd $(tr -d '\n' <"$SCRATCH/ld.json" | grep -o '"config":{[^}]*}'), cryptsetup $(tr -d '\n' <"$SCRATCH/cs.json" | grep -o '"config":{[^}]*}')"
}

# both_open WHAT ARGS...: luksd opens $img and dm-crypt $copy with ARGS,
# then both close.
both_open() {
	_what=$1
	shift
	luksd open --frontend nbd --key-file "$key" "$@" "$img" vol >"$SCRATCH/ld.out" 2>"$SCRATCH/ld.err" ||
		because "$_what: luksd open $*: $(cat "$SCRATCH/ld.err")"
	[ ! -s "$SCRATCH/ld.err" ] || because "$_what: luksd open $* said: $(cat "$SCRATCH/ld.err")"
	cryptsetup open --key-file "$key" "$@" "$copy" vmt 2>"$SCRATCH/cs.err" ||
		because "$_what: cryptsetup open $*: $(cat "$SCRATCH/cs.err")"
	luksd_close vol || because "$_what: luksd close failed"
	cs_close vmt || because "$_what: cryptsetup close failed"
}

persistent() {
	img=$SCRATCH/img copy=$SCRATCH/copy
	mkimage "$img" 64
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	cp "$img" "$copy"

	both_open "with flags" --persistent --allow-discards --perf-no_read_workqueue
	same_headers "with flags"
	_f=$(cryptsetup luksDump "$img" | grep '^Flags:')
	[ "$_f" = "$(printf 'Flags:       \tallow-discards no-read-workqueue ')" ] || because "luksd's header: '$_f'"

	cs_open "$img" chk "$key" || because "dm-crypt cannot open luksd's image"
	_t=$(dmsetup table chk)
	cs_close chk
	case "$_t" in *allow_discards*no_read_workqueue* | *no_read_workqueue*allow_discards*) ;;
	*) because "dm-crypt did not take the stored flags: $_t" ;;
	esac

	both_open "cleared" --persistent
	same_headers "cleared"
	_f=$(cryptsetup luksDump "$img" | grep '^Flags:')
	[ "$_f" = "$(printf 'Flags:       \t(no flags)')" ] || because "luksd's header after --persistent alone: '$_f'"
	rm -f "$img" "$copy"
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096" persistent "$(cipher_line aes-xts-plain64/4096)"
