#!/usr/bin/env bash
# Benchmark (not a test): Argon2id in luksd's argon2 package against
# libargon2 (through cryptsetup) and golang.org/x/crypto/argon2, in the same
# run, as ratios.
#
# 1. Unlock. cryptsetup formats an image with forced parameters: argon2id,
#    MEMORY_KIB (default 1048576 = 1 GiB), THREADS asked (default 4;
#    cryptsetup stores at most the online CPUs), time cost ITER (default 4).
#    Each of ROUNDS interleaved rounds (default 5) runs, each in its own
#    process: `cryptsetup open --test-passphrase`; one derivation with the
#    keyslot's costs by the argon2 package (its fastest path, or every path
#    with ALL_PATHS=1) and by x/crypto/argon2 (BenchmarkKey, -benchtime 1x);
#    and luks2's Header.Unlock of the keyslot. /usr/bin/time gives each
#    one's wall time, CPU time (user+sys) and peak RSS. Per tool: the best
#    wall time of the rounds (a shared machine only slows a run down), the
#    worst/best spread (the noise), the best CPU time, the largest peak RSS;
#    then the ratios of the bests to cryptsetup's. Targets: the argon2
#    package at most 0.8x cryptsetup's wall time, peak RSS at most 1.1x the
#    keyslot's memory. When cryptsetup stored fewer threads than THREADS,
#    the same again on an image luksd formats with THREADS threads, as a
#    volume made on a larger machine has them.
# 2. Calibration. `cryptsetup benchmark --pbkdf argon2id` picks the costs
#    that take it ITER_TIME ms (default 2000); the argon2 package's best
#    time for those costs, against ITER_TIME: under 1 means that luksd,
#    calibrating with it, reaches at least cryptsetup's cost.
#    Then both tools' luksFormat --iter-time ITER_TIME, interleaved: the
#    keyslot's memory, time cost and threads (luksDump) and the peak RSS
#    against the keyslot's memory (target: luksd's memory at least
#    cryptsetup's, peak RSS at most 1.1x the keyslot's memory).
# 3. NEON under qemu-user (SKIP_QEMU=1 skips it). BenchmarkBlock of the
#    ARMv7 and arm64 builds, neon against generic, best of ROUNDS: the
#    ratio only, as qemu's speed says nothing of a real core's.
#
#   ROUNDS=3 MEMORY_KIB=262144 contrib/bench/argon2.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
MEMORY_KIB=${MEMORY_KIB:-1048576}
THREADS=${THREADS:-4}
ITER=${ITER:-4}
ROUNDS=${ROUNDS:-5}
ITER_TIME=${ITER_TIME:-2000}
for tool in cryptsetup /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "argon2.sh: $tool is not installed (make deps)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod

key=$work/key
head -c 32 /dev/urandom | base64 >"$key"
go test -c -o "$work/argon2.test" ./argon2
go test -c -o "$work/luks2.test" ./luks2
go build -o "$work/luksd" ./cmd/luksd
# The paths this CPU runs, slowest first, then xcrypto: BenchmarkKey's
# sub-benchmarks, listed by a run at the smallest costs.
paths=$(LUKSD_ARGON2_BENCH=1,8,1 "$work/argon2.test" -test.run '^$' -test.bench '^BenchmarkKey$' -test.benchtime 1x |
	awk -F'[/-]' '/^BenchmarkKey\// { print $2 }')
fastest=$(echo "$paths" | grep -v xcrypto | tail -1)
[ "${ALL_PATHS:-}" = 1 ] || paths=$(printf '%s\nxcrypto\n' "$fastest")

# measure NAME CMD...: runs CMD once under /usr/bin/time, appends
# "wall cpu rss" to $work/NAME.
measure() {
	local name=$1
	shift
	/usr/bin/time -f '%e %U %S %M' -o "$work/time" "$@" >"$work/out" 2>&1 ||
		{ cat "$work/out" >&2; echo "argon2.sh: $name failed" >&2; exit 1; }
	awk '{ printf "%.2f %.2f %d\n", $1, $2 + $3, $4 }' "$work/time" >>"$work/$name"
}

# summary NAME: "best-wall spread best-cpu max-rss-KiB" of NAME's rounds.
summary() {
	sort -n "$work/$1" | awk '
		NR == 1 { best = $1 } { worst = $1; if (cpu == "" || $2 < cpu) cpu = $2; if ($3 > rss) rss = $3 }
		END { printf "%.2f %.2f %.2f %d\n", best, worst / best, cpu, rss }'
}

# unlock IMG WHO: section 1 on IMG, formatted by WHO.
unlock() {
	local img=$1 who=$2 dump t m p
	dump=$(cryptsetup luksDump "$img")
	t=$(echo "$dump" | awk '/Time cost:/ { print $3; exit }')
	m=$(echo "$dump" | awk '/Memory:/ { print $2; exit }')
	p=$(echo "$dump" | awk '/Threads:/ { print $2; exit }')
	echo "== unlock: $who's keyslot, argon2id, time cost $t, memory $m KiB, $p threads, $(nproc) CPUs, $ROUNDS rounds"
	rm -f "$work"/r-*
	for _ in $(seq "$ROUNDS"); do
		measure r-cryptsetup cryptsetup open --test-passphrase --key-file "$key" "$img"
		for path in $paths; do
			measure "r-$path" env LUKSD_ARGON2_BENCH="$t,$m,$p" "$work/argon2.test" -test.run '^$' \
				-test.bench "^BenchmarkKey\$/^$path\$" -test.benchtime 1x
		done
		measure r-luks2-unlock env LUKSD_BENCH_IMAGE="$img" LUKSD_BENCH_KEYFILE="$key" "$work/luks2.test" \
			-test.run '^$' -test.bench '^BenchmarkUnlockArgon2id$' -test.benchtime 1x
	done
	local cs_wall cs_spread cs_cpu cs_rss wall spread cpu rss label name
	read -r cs_wall cs_spread cs_cpu cs_rss <<<"$(summary r-cryptsetup)"
	printf '%-34s %8s %7s %8s %9s %7s %7s %6s\n' tool wall/s spread cpu/s rss/MiB rss/mem wall/cs cpu/cs
	for name in cryptsetup $paths luks2-unlock; do
		read -r wall spread cpu rss <<<"$(summary "r-$name")"
		case $name in
		cryptsetup) label="cryptsetup open --test-passphrase" ;;
		xcrypto) label="x/crypto/argon2" ;;
		luks2-unlock) label="luks2 Header.Unlock (as built)" ;;
		*) label="argon2 package, $name" ;;
		esac
		awk -v l="$label" -v w="$wall" -v s="$spread" -v c="$cpu" -v r="$rss" -v m="$m" -v cw="$cs_wall" -v cc="$cs_cpu" \
			'BEGIN { printf "%-34s %8.2f %7.2f %8.2f %9.0f %7.3f %7.2f %6.2f\n", l, w, s, c, r / 1024, r / m, w / cw, c / cc }'
	done
	read -r wall _ _ rss <<<"$(summary "r-$fastest")"
	awk -v w="$wall" -v cw="$cs_wall" -v r="$rss" -v m="$m" 'BEGIN {
		printf "target: argon2 package wall <= 0.80x cryptsetup: %.2fx %s; peak RSS <= 1.10x memory: %.3fx %s\n",
			w / cw, (w / cw <= 0.8 ? "OK" : "OVER"), r / m, (r / m <= 1.1 ? "OK" : "OVER") }'
}

img=$work/cryptsetup.img
truncate -s 20M "$img"
cryptsetup luksFormat -q --type luks2 --pbkdf argon2id --pbkdf-force-iterations "$ITER" \
	--pbkdf-memory "$MEMORY_KIB" --pbkdf-parallel "$THREADS" --key-file "$key" "$img"
unlock "$img" cryptsetup
if [ "$(cryptsetup luksDump "$img" | awk '/Threads:/ { print $2; exit }')" != "$THREADS" ]; then
	# cryptsetup stored fewer threads than asked (at most the online CPUs);
	# a volume made on a larger machine has them all.
	img=$work/luksd.img
	truncate -s 20M "$img"
	"$work/luksd" luksFormat -q --type luks2 --pbkdf argon2id --pbkdf-force-iterations "$ITER" \
		--pbkdf-memory "$MEMORY_KIB" --pbkdf-parallel "$THREADS" --key-file "$key" "$img"
	unlock "$img" luksd
fi

echo "== calibration: cryptsetup benchmark --pbkdf argon2id --iter-time $ITER_TIME"
line=$(cryptsetup benchmark --pbkdf argon2id --iter-time "$ITER_TIME" | grep '^argon2id')
echo "$line"
read -r ct cm cp <<<"$(echo "$line" | awk '{ print $2, $4, $6 }')"
for _ in $(seq "$ROUNDS"); do
	measure calibrated env LUKSD_ARGON2_BENCH="$ct,$cm,$cp" "$work/argon2.test" -test.run '^$' \
		-test.bench "^BenchmarkKey\$/^$fastest\$" -test.benchtime 1x
done
read -r wall spread _ _ <<<"$(summary calibrated)"
awk -v w="$wall" -v s="$spread" -v it="$ITER_TIME" 'BEGIN {
	printf "argon2 package at those costs: %.2f s (spread %.2f), %.2fx of %d ms: %s\n", w, s, w * 1000 / it, it,
		(w * 1000 <= it ? "luksd calibrates to at least cryptsetup'"'"'s cost" : "luksd would calibrate below cryptsetup'"'"'s cost") }'

echo "== luksFormat --iter-time $ITER_TIME: keyslot costs (luksDump) and peak RSS, $ROUNDS interleaved rounds"
printf '%-10s %5s %10s %5s %8s %9s %8s\n' tool round mem/KiB time threads rss/MiB rss/mem
declare -A fmtmem
for round in $(seq "$ROUNDS"); do
	for who in cryptsetup luksd; do
		img=$work/format-$who.img
		rm -f "$img"
		truncate -s 20M "$img"
		bin=cryptsetup
		[ "$who" = luksd ] && bin=$work/luksd
		/usr/bin/time -f '%M' -o "$work/time" "$bin" luksFormat -q --type luks2 --pbkdf argon2id \
			--iter-time "$ITER_TIME" --key-file "$key" "$img"
		read -r m t p <<<"$(cryptsetup luksDump "$img" |
			awk '/Memory:/ { m = $2 } /Time cost:/ { t = $3 } /Threads:/ { p = $2 } END { print m, t, p }')"
		rss=$(cat "$work/time")
		fmtmem[$who]="${fmtmem[$who]:-} $m"
		awk -v w="$who" -v r="$round" -v m="$m" -v t="$t" -v p="$p" -v rss="$rss" \
			'BEGIN { printf "%-10s %5d %10d %5d %8d %9.0f %8.3f\n", w, r, m, t, p, rss / 1024, rss / m }'
	done
done
for who in cryptsetup luksd; do
	echo "$who median keyslot memory: $(echo "${fmtmem[$who]}" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') KiB"
done
echo "target: luksd's memory >= cryptsetup's (same time cost), luksd's rss/mem <= 1.10"

[ "${SKIP_QEMU:-}" = 1 ] && exit 0
echo "== NEON under qemu-user: BenchmarkBlock, best of $ROUNDS"
for arch in armv7:qemu-arm-static:GOARCH=arm:GOARM=7 arm64:qemu-aarch64-static:GOARCH=arm64; do
	IFS=: read -r name qemu goarch goarm <<<"$arch"
	command -v "$qemu" >/dev/null || { echo "argon2.sh: $qemu is not installed (make deps)" >&2; exit 1; }
	env "$goarch" ${goarm:+"$goarm"} go test -c -o "$work/argon2-$name.test" ./argon2
	for _ in $(seq "$ROUNDS"); do
		"$qemu" "$work/argon2-$name.test" -test.run '^$' -test.bench '^BenchmarkBlock$' -test.benchtime 3000x |
			awk '/^BenchmarkBlock\// { split($1, f, "[/-]"); print f[2], $3 }' >>"$work/block-$name"
	done
	awk -v a="$name" '{ if (!($1 in b) || $2 < b[$1]) b[$1] = $2 }
		END { printf "%s: generic %.0f ns/block, neon %.0f ns/block: speed-up generic/neon %.2fx\n",
			a, b["generic"], b["neon"], b["generic"] / b["neon"] }' "$work/block-$name"
done
