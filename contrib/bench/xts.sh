#!/usr/bin/env bash
# Compares luksd's AES-XTS (package xts, every path this CPU runs) with
# `openssl speed -evp aes-256-xts` and golang.org/x/crypto/xts, all on one
# core (CPU, default 0), for 512- and 4096-byte data units with a 512-bit key
# (AES-256-XTS). Prints MiB/s and the ratio luksd/openssl. Each figure is
# the best of COUNT runs, since a shared machine only ever slows a run down.
#
#   contrib/bench/xts.sh            # COUNT=3 BENCHTIME=1s SECONDS_OPENSSL=2 CPU=0
set -euo pipefail
cd "$(dirname "$0")/../.."
cpu=${CPU:-0}
benchtime=${BENCHTIME:-1s}
secs=${SECONDS_OPENSSL:-2}
count=${COUNT:-3}
command -v openssl >/dev/null || { echo "openssl missing (make deps)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go test -c -o "$tmp/xts.test" ./xts

declare -A mib
for size in 512 4096; do
	best=0
	for _ in $(seq "$count"); do
		# -elapsed: wall-clock time, as Go benchmarks measure (by default openssl
		# divides by its CPU time, which a busy machine does not slow down).
		# openssl prints thousands of bytes per second: "AES-256-XTS 7910774.43k".
		k=$(taskset -c "$cpu" openssl speed -elapsed -seconds "$secs" -evp aes-256-xts -bytes "$size" 2>/dev/null |
			awk '/^AES-256-XTS/ { sub(/k$/, "", $NF); print $NF }')
		best=$(awk -v a="$best" -v b="$k" 'BEGIN { print (b > a ? b : a) }')
	done
	mib[openssl/$size]=$(awk -v k="$best" 'BEGIN { printf "%.0f", k * 1000 / 1048576 }')
done

# Go prints 10^6 bytes per second ("MB/s").
taskset -c "$cpu" "$tmp/xts.test" -test.run '^$' -test.benchtime "$benchtime" -test.count "$count" \
	-test.bench '^(BenchmarkXTS|BenchmarkXTSBatch|BenchmarkXCrypto)$/^(generic|aesni|vaes|arm64|512)$/^(512|4096)$/^(512|4096)$' |
	tee "$tmp/go.txt" | grep -E '^Benchmark' || true
while read -r name mbs; do
	mib[$name]=$(awk -v m="$mbs" 'BEGIN { printf "%.0f", m * 1e6 / 1048576 }')
done < <(awk '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($i == "MB/s") { n = $1; sub(/-[0-9]+$/, "", n); sub(/^Benchmark/, "", n); if ($(i-1) > best[n]) best[n] = $(i-1) } }
	END { for (n in best) print n, best[n] }' "$tmp/go.txt")

echo
echo "AES-256-XTS (512-bit key), one core (taskset -c $cpu), MiB/s:"
printf '%-42s %10s %10s %8s\n' "implementation" "512 B" "4096 B" "512/4096"
row() {
	local label=$1 key=$2 a b
	a=${mib[$key/512]:-}
	b=${mib[$key/4096]:-}
	[ -n "$a" ] && [ -n "$b" ] || return 0
	printf '%-42s %10s %10s %8s\n' "$label" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
}
row "openssl speed -elapsed -evp aes-256-xts" openssl
row "x/crypto/xts" XCrypto/512
for p in generic aesni vaes arm64; do
	row "luksd xts $p (1 sector/call)" "XTS/$p/512"
	row "luksd xts $p (64 KiB of sectors)" "XTSBatch/$p/512"
done
echo
echo "ratio luksd/openssl (1 sector per call, like openssl speed):"
for p in generic aesni vaes arm64; do
	for size in 512 4096; do
		v=${mib[XTS/$p/512/$size]:-}
		[ -n "$v" ] || continue
		printf '  %-8s %5s B: %s\n' "$p" "$size" "$(awk -v a="$v" -v b="${mib[openssl/$size]}" 'BEGIN { printf "%.2fx", a / b }')"
	done
done
