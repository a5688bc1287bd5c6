#!/usr/bin/env bash
# Benchmarks package adiantum against lukechampine.com/adiantum on one core:
# Encrypt in place at 512- and 4096-byte sectors, XChaCha12 and XChaCha20,
# for every implementation path this CPU runs. The test binary runs COUNT
# times, so load from elsewhere on the machine spreads over all benchmarks
# alike; each benchmark's median is reported in MiB/s, with the ratio of the
# fastest luksd path to lukechampine.com/adiantum.
#
#   contrib/bench/adiantum.sh [benchtime] [count]     (default 1s 5)
set -euo pipefail
cd "$(dirname "$0")/../.."
benchtime=${1:-1s}
count=${2:-5}
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOFLAGS=-mod=mod go test -c -o "$bin/adiantum.test" ./adiantum
out=$(for _ in $(seq "$count"); do
	(cd adiantum && "${pin[@]}" "$bin/adiantum.test" -test.run '^$' \
		-test.bench '^BenchmarkAdiantum$' -test.benchtime "$benchtime")
done)
echo "$out" | grep -E '^(goos|goarch|cpu):' | sort -u || true
echo "$out" | awk '
	/^BenchmarkAdiantum\// {
		name = $1; sub(/-[0-9]+$/, "", name)
		for (i = 2; i < NF; i++) if ($(i+1) == "MB/s") v = $i * 1e6 / 1048576
		if (!(name in n)) order[++names] = name
		runs[name, ++n[name]] = v
	}
	function median(name,   k, i, j, t, a) {
		k = n[name]
		for (i = 1; i <= k; i++) a[i] = runs[name, i]
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	END {
		for (i = 1; i <= names; i++) {
			split(order[i], f, "/"); path = f[2]; key = f[3] "/" f[4]
			m = median(order[i])
			printf "%-14s xchacha%-3s %5s bytes  %9.1f MiB/s  (median of %d)\n", path, f[3], f[4], m, n[order[i]]
			if (path == "lukechampine") ref[key] = m
			else if (m > best[key]) { best[key] = m; bestpath[key] = path }
			if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
		}
		print ""
		for (i = 1; i <= nk; i++) if (ref[k = keys[i]] > 0) {
			split(k, p, "/")
			printf "xchacha%-3s %5s bytes: %s %.1f MiB/s vs lukechampine %.1f MiB/s = %.2fx\n",
				p[1], p[2], bestpath[k], best[k], ref[k], best[k] / ref[k]
		}
	}'
