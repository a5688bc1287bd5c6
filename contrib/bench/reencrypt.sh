#!/usr/bin/env bash
# Side-by-side offline reencryption benchmark (not a test): a 1 GiB LUKS2
# image on tmpfs (aes-xts-plain64 512-bit key to a 256-bit key, 4096-byte
# sectors) rewritten by
#   luksd reencrypt
#   cryptsetup reencrypt --force-offline-reencrypt
# with the same resilience mode and hotzone size, against a dd copy of the
# same file (read + write, the limit); and a 1 GiB plain image encrypted in
# place by both (--encrypt --reduce-device-size 32M, datashift). Each tool
# works on its own copy of the same image; best of ROUNDS, interleaved.
# Prints MiB/s, the ratios, and the time the issue's 954 GiB pool would
# take at luksd's rate.
# Targets (issue #14): luksd >= 3x cryptsetup, >= 0.5x dd.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-1024}
ROUNDS=${ROUNDS:-3}
HOTZONE=${HOTZONE:-64M}
command -v cryptsetup >/dev/null || { echo "reencrypt.sh: cryptsetup is not installed (make deps)" >&2; exit 1; }
make -s build
LUKSD=$PWD/bin/luksd

work=$(mktemp -d -p /dev/shm luksd-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf 'bench passphrase' >"$work/pass"
head -c $(((SIZE_MIB + 16) << 20)) /dev/urandom >"$work/base.img"
cryptsetup luksFormat -q --type luks2 --sector-size 4096 --key-size 512 --pbkdf pbkdf2 \
	--pbkdf-force-iterations 1000 --key-file "$work/pass" "$work/base.img"
head -c $(((SIZE_MIB + 32) << 20)) /dev/urandom >"$work/plain.img"

# Rounds are interleaved (dd, then each tool per resilience mode, in every
# round) so that the load of the shared machine falls on all alike; each
# round prints the load average, and each figure is the best of ROUNDS.
# Each run works on a fresh copy of base.img.
declare -A best
timed() {
	local key=$1 s e t
	shift
	cp "$work/${SRC:-base.img}" "$work/run.img"
	s=$(date +%s.%N)
	"$@" >/dev/null 2>&1 || { echo "reencrypt.sh: $key failed: $*" >&2; exit 1; }
	e=$(date +%s.%N)
	t=$(echo "$e - $s" | bc -l)
	if [ -z "${best[$key]:-}" ] || [ "$(echo "$t < ${best[$key]}" | bc -l)" = 1 ]; then best[$key]=$t; fi
}
rate() { echo "scale=1; $SIZE_MIB / $1" | bc -l; }

modes=(checksum journal none)
for r in $(seq "$ROUNDS"); do
	echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)"
	timed dd dd if="$work/run.img" of="$work/copy.img" bs=4M conv=fsync
	for res in "${modes[@]}"; do
		args=(--resilience "$res" --hotzone-size "$HOTZONE" --key-size 256 --key-file "$work/pass" -q --force-offline-reencrypt)
		timed "luksd-$res" "$LUKSD" reencrypt "${args[@]}" "$work/run.img"
		timed "cs-$res" cryptsetup reencrypt "${args[@]}" "$work/run.img"
	done
	args=(--encrypt --reduce-device-size 32M --pbkdf pbkdf2 --pbkdf-force-iterations 1000
		--key-file "$work/pass" -q --force-offline-reencrypt)
	SRC=plain.img timed luksd-encrypt "$LUKSD" reencrypt "${args[@]}" "$work/run.img"
	SRC=plain.img timed cs-encrypt cryptsetup reencrypt "${args[@]}" "$work/run.img"
done
echo "after: load $(cut -d' ' -f1-3 /proc/loadavg)"

dd_s=${best[dd]}
printf '%-44s %8s MiB/s\n' "dd copy of the image" "$(rate "$dd_s")"
for res in "${modes[@]}" encrypt; do
	l=${best[luksd-$res]} c=${best[cs-$res]}
	what="--resilience $res"
	[ "$res" = encrypt ] && what="--encrypt (datashift)"
	printf '%-44s %8s MiB/s\n' "luksd reencrypt $what" "$(rate "$l")"
	printf '%-44s %8s MiB/s\n' "cryptsetup reencrypt $what" "$(rate "$c")"
	printf '  luksd/cryptsetup %.2fx, luksd/dd %.2fx, 954 GiB at this rate: %.1f h\n' \
		"$(echo "$c / $l" | bc -l)" "$(echo "$dd_s / $l" | bc -l)" \
		"$(echo "954 * 1024 / ($SIZE_MIB / $l) / 3600" | bc -l)"
done
