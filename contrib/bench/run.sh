#!/usr/bin/env bash
# `make bench`: every side-by-side benchmark, one after the other (they are
# not tests; the machine is shared and noisy, so each script compares luksd
# with its peer in the same run and prints ratios).
set -uo pipefail
cd "$(dirname "$0")/../.."
make -s build
echo "== luksd benchmark (one core)"
taskset -c 0 bin/luksd benchmark
echo "== luksd benchmark --sector-size 4096"
taskset -c 0 bin/luksd benchmark --sector-size 4096 | tail -n +3
rc=0
for s in contrib/bench/*.sh; do
	[ "$(basename "$s")" = run.sh ] && continue
	echo "== $s"
	bash "$s" || { echo "FAILED: $s"; rc=1; }
done
exit $rc
