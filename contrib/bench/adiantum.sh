#!/usr/bin/env bash
# Benchmarks package adiantum against lukechampine.com/adiantum on one core:
# Encrypt in place at 512- and 4096-byte sectors, XChaCha12 and XChaCha20,
# for every implementation path this CPU runs. Prints MiB/s per path and the
# ratio of the fastest luksd path to lukechampine.com/adiantum.
#
#   contrib/bench/adiantum.sh [benchtime]     (default 1s)
set -euo pipefail
cd "$(dirname "$0")/../.."
benchtime=${1:-1s}
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
out=$(GOFLAGS=-mod=mod "${pin[@]}" go test -run '^$' -bench '^BenchmarkAdiantum$' \
	-benchtime "$benchtime" -count 1 ./adiantum)
echo "$out" | grep -E '^(goos|goarch|cpu):' || true
echo "$out" | awk '
	/^BenchmarkAdiantum\// {
		split($1, f, "/"); path = f[2]; rounds = f[3]; size = f[4]; sub(/-[0-9]+$/, "", size)
		for (i = 2; i <= NF; i++) if ($(i+1) == "MB/s") mbs = $i
		mib = mbs * 1e6 / 1048576
		key = rounds "/" size
		printf "%-14s xchacha%-3s %5s bytes  %9.1f MiB/s\n", path, rounds, size, mib
		if (path == "lukechampine") ref[key] = mib
		else if (mib > best[key]) { best[key] = mib; bestpath[key] = path }
		if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	}
	END {
		print ""
		for (i = 1; i <= n; i++) if (ref[k = order[i]] > 0) {
			split(k, p, "/")
			printf "xchacha%-3s %5s bytes: %s %.1f MiB/s vs lukechampine %.1f MiB/s = %.2fx\n",
				p[1], p[2], bestpath[k], best[k], ref[k], best[k] / ref[k]
		}
	}'
