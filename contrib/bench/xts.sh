#!/usr/bin/env bash
# Compares luksd's AES-XTS (package xts, every path this CPU runs) with
# `openssl speed -evp aes-256-xts` and golang.org/x/crypto/xts, all on one
# core (CPU, default 0), for 512- and 4096-byte data units with a 512-bit key
# (AES-256-XTS). Prints MiB/s and the ratio luksd/openssl. Each figure is
# the best of COUNT runs, since a shared machine only ever slows a run down.
#
# MODE=wall (default) divides by wall-clock time: Go benchmarks as they are,
# openssl with -elapsed. MODE=cpu divides by CPU time, which other load on
# the machine hardly changes: openssl's own default, and for Go the user+sys
# time of a benchmark run with a fixed number of iterations.
#
#   contrib/bench/xts.sh        # MODE=wall COUNT=3 BENCHTIME=1s SECONDS_OPENSSL=2 CPU=0
set -euo pipefail
cd "$(dirname "$0")/../.."
cpu=${CPU:-0}
mode=${MODE:-wall}
benchtime=${BENCHTIME:-1s}
secs=${SECONDS_OPENSSL:-2}
count=${COUNT:-3}
case $mode in wall | cpu) ;; *) echo "MODE must be wall or cpu"; exit 1 ;; esac
command -v openssl >/dev/null || { echo "openssl missing (make deps)"; exit 1; }
command -v taskset >/dev/null || { echo "taskset missing (make deps)"; exit 1; }
[ "$mode" = wall ] || [ -x /usr/bin/time ] || { echo "MODE=cpu needs /usr/bin/time"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go test -c -o "$tmp/xts.test" ./xts
# -test.bench patterns: path/keybits/size for package xts, keybits/size for
# x/crypto/xts (a pattern with more levels than a benchmark has skips it).
benches=('^(BenchmarkXTS|BenchmarkXTSBatch)$/^(generic|aesni|vaes256|vaes|arm64)$/^512$/^(512|4096)$'
	'^BenchmarkXCrypto$/^512$/^(512|4096)$')

max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b + 0 > a + 0 ? b : a) }'; }

declare -A mib
elapsed=-elapsed
[ "$mode" = cpu ] && elapsed=
for size in 512 4096; do
	best=0
	for _ in $(seq "$count"); do
		# openssl prints thousands of bytes per second: "AES-256-XTS 7910774.43k".
		k=$(taskset -c "$cpu" openssl speed $elapsed -seconds "$secs" -evp aes-256-xts -bytes "$size" 2>/dev/null |
			awk '/^AES-256-XTS/ { sub(/k$/, "", $NF); print $NF }')
		best=$(max "$best" "$k")
	done
	mib[openssl/$size]=$(awk -v k="$best" 'BEGIN { printf "%.0f", k * 1000 / 1048576 }')
done

if [ "$mode" = wall ]; then
	# Go prints 10^6 bytes per second ("MB/s").
	for b in "${benches[@]}"; do
		taskset -c "$cpu" "$tmp/xts.test" -test.run '^$' -test.benchtime "$benchtime" -test.count "$count" \
			-test.bench "$b"
	done | tee "$tmp/go.txt" | grep -E '^Benchmark' || true
	while read -r name mbs; do
		mib[$name]=$(awk -v m="$mbs" 'BEGIN { printf "%.0f", m * 1e6 / 1048576 }')
	done < <(awk '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($i == "MB/s") { n = $1; sub(/-[0-9]+$/, "", n); sub(/^Benchmark/, "", n); if ($(i-1) > best[n]) best[n] = $(i-1) } }
		END { for (n in best) print n, best[n] }' "$tmp/go.txt")
else
	# One iteration of each lists the benchmarks this CPU runs.
	names=$(for b in "${benches[@]}"; do "$tmp/xts.test" -test.run '^$' -test.benchtime 1x -test.bench "$b"; done |
		awk '/^Benchmark/ { n = $1; sub(/-[0-9]+$/, "", n); sub(/^Benchmark/, "", n); print n }')
	for name in $names; do
		case $name in
		XTSBatch/*) per=65536 ;;
		*) per=${name##*/} ;;
		esac
		case $name in
		XCrypto/* | */generic/*) total=$((512 << 20)) ;;
		*) total=$((8192 << 20)) ;;
		esac
		iters=$((total / per))
		top=${name%%/*} rest=${name#*/}
		pattern="^Benchmark$top\$/^${rest//\//\$/^}\$"
		best=0
		for _ in $(seq "$count"); do
			t=$( { /usr/bin/time -f '%U %S' taskset -c "$cpu" "$tmp/xts.test" -test.run '^$' \
				-test.benchtime "${iters}x" -test.bench "$pattern" >/dev/null; } 2>&1 | tail -1)
			m=$(awk -v t="$t" -v b="$total" 'BEGIN { split(t, a, " "); s = a[1] + a[2]; if (s < 0.01) s = 0.01; printf "%.0f", b / s / 1048576 }')
			best=$(max "$best" "$m")
		done
		mib[$name]=$best
		echo "$name: $best MiB/s (CPU time, ${iters} iterations)"
	done
fi

echo
echo "AES-256-XTS (512-bit key), one core (taskset -c $cpu), MiB/s by $mode time, best of $count:"
printf '%-42s %10s %10s %8s\n' "implementation" "512 B" "4096 B" "512/4096"
row() {
	local label=$1 key=$2 a b
	a=${mib[$key/512]:-}
	b=${mib[$key/4096]:-}
	[ -n "$a" ] && [ -n "$b" ] || return 0
	printf '%-42s %10s %10s %8s\n' "$label" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
}
row "openssl speed ${elapsed:+$elapsed }-evp aes-256-xts" openssl
row "x/crypto/xts" XCrypto/512
for p in generic aesni vaes256 vaes arm64; do
	row "luksd xts $p (1 sector/call)" "XTS/$p/512"
	row "luksd xts $p (64 KiB of sectors)" "XTSBatch/$p/512"
done
echo
echo "ratio luksd/openssl (1 sector per call, like openssl speed):"
for p in generic aesni vaes256 vaes arm64; do
	for size in 512 4096; do
		v=${mib[XTS/$p/512/$size]:-}
		[ -n "$v" ] || continue
		printf '  %-8s %5s B: %s\n' "$p" "$size" "$(awk -v a="$v" -v b="${mib[openssl/$size]}" 'BEGIN { printf "%.2fx", a / b }')"
	done
done
