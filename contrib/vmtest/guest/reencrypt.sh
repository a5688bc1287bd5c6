# Helpers of the reencryption scenarios (54, 56, 58, 59); source after lib.sh,
# with $key set.

# reenc_fresh IMAGE PATTERN: an 80 MiB aes-xts volume holding PATTERN,
# written by dm-crypt.
reenc_fresh() {
	mkimage "$1" 80
	cs_format "$1" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "luksFormat failed"
	cs_open "$1" vmt "$key" || because "cryptsetup open failed"
	write_at /dev/mapper/vmt "$2" 0 || because "writing through dm-crypt failed"
	cs_close vmt
}

# reenc_killed TOOL IMAGE: TOOL reencrypts IMAGE (already marked) and is
# killed -9 once the header shows data rewritten (a segment of fixed length).
reenc_killed() {
	"$1" reencrypt --resume-only --force-offline-reencrypt -q --hotzone-size 1M --key-file "$key" "$2" &
	_p=$!
	for _ in $(seq 240); do
		cryptsetup luksDump "$2" 2>/dev/null | grep -q "length: [0-9]" && break
		sleep 0.25
	done
	kill -9 "$_p" 2>/dev/null || because "$1 finished before it could be killed"
	wait "$_p" 2>/dev/null || true
	reenc_release
	cryptsetup luksDump "$2" | grep -q "online-reencrypt" || because "no reencryption left to resume after killing $1"
}

# reenc_release: cryptsetup rewrites through temporary dm-crypt mappings
# over a loop device; killed, it leaves them holding the image (luksd then
# refuses it as in use): take them down as an administrator would.
reenc_release() {
	for _d in $(dmsetup ls 2>/dev/null | awk '/^temporary-cryptsetup/ { print $1 }'); do
		dmsetup remove "$_d" || because "dmsetup remove $_d failed"
	done
	losetup -D 2>/dev/null || true
}

# reenc_resume TOOL IMAGE: TOOL finishes the reencryption of IMAGE, after
# `cryptsetup repair` when cryptsetup asks for it.
reenc_resume() {
	out=$("$1" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$2" 2>&1) && return 0
	case $out in
	*"Run repair first"*)
		cryptsetup repair -q --key-file "$key" "$2" || because "cryptsetup repair failed"
		# The repair finishes a reencryption killed in its last hotzone.
		out=$("$1" reencrypt --resume-only --force-offline-reencrypt -q --key-file "$key" "$2" 2>&1) ||
			case $out in *"not in progress"*) ;; *) because "$1 resume after repair failed: $out" ;; esac
		;;
	*"not in progress"*) ;;
	*) because "$1 resume failed: $out" ;;
	esac
}
