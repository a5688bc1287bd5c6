#!/usr/bin/env bash
# Benchmark (not a test): argon2id keyslot unlock time, luksd's
# Header.Unlock (golang.org/x/crypto/argon2) against
# `cryptsetup open --test-passphrase` (libargon2), on the same image that
# cryptsetup formats with forced parameters: argon2id, MEMORY_KIB
# (default 1048576 = 1 GiB), THREADS (default 4), time cost ITER (default 4).
# Each side unlocks RUNS times (default 3); the medians and the ratio are
# printed. Target: luksd <= 1.3x cryptsetup.
#
#   MEMORY_KIB=262144 contrib/bench/argon2.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
MEMORY_KIB=${MEMORY_KIB:-1048576}
THREADS=${THREADS:-4}
ITER=${ITER:-4}
RUNS=${RUNS:-3}
command -v cryptsetup >/dev/null || { echo "argon2.sh: cryptsetup is not installed (make deps)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
img=$work/argon2.img
key=$work/key
head -c 32 /dev/urandom | base64 >"$key"
truncate -s 20M "$img"
cryptsetup luksFormat -q --type luks2 --pbkdf argon2id --pbkdf-force-iterations "$ITER" \
	--pbkdf-memory "$MEMORY_KIB" --pbkdf-parallel "$THREADS" --key-file "$key" "$img"
cryptsetup luksDump "$img" | grep -E 'PBKDF|Time cost|Memory|Threads'

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

cs_times=$(for _ in $(seq "$RUNS"); do
	s=$(date +%s%N)
	cryptsetup open --test-passphrase --key-file "$key" "$img"
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
done)
cs=$(echo "$cs_times" | median)

GOFLAGS=-mod=mod go test -c -o "$work/luks2.test" ./luks2
out=$(LUKSD_BENCH_IMAGE=$img LUKSD_BENCH_KEYFILE=$key "$work/luks2.test" -test.run '^$' \
	-test.bench '^BenchmarkUnlockArgon2id$' -test.benchtime "${RUNS}x" -test.count "$RUNS")
ld=$(echo "$out" | awk '/^BenchmarkUnlockArgon2id/ {print int($3 / 1e6)}' | median)

echo "argon2id unlock, memory ${MEMORY_KIB} KiB, ${THREADS} threads asked (cryptsetup stores at most the online CPUs), time cost ${ITER}, $(nproc) CPUs"
echo "cryptsetup open --test-passphrase: ${cs} ms (median of ${RUNS}: $(echo $cs_times))"
echo "luksd Header.Unlock:               ${ld} ms (median of ${RUNS} benchmark runs)"
awk -v l="$ld" -v c="$cs" 'BEGIN { r = l / c; printf "ratio luksd/cryptsetup: %.2fx (target <= 1.30x): %s\n", r, (r <= 1.3 ? "OK" : "OVER TARGET") }'
