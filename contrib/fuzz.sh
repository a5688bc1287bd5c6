#!/usr/bin/env bash
# fuzz.sh [FUZZTIME] runs every Go fuzz target of the tree (go test -list
# '^Fuzz') for FUZZTIME each (default 30s). A crash is saved by go test
# under the package's testdata/fuzz/<Target>/: commit that file as a
# regression seed once fixed. Exits non-zero when any target fails.
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-${FUZZTIME:-30s}}
failed=()
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for target in $targets; do
		echo "== $pkg $target ($fuzztime)"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 10s "$pkg"; then
			failed+=("$pkg $target")
		fi
	done
done
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAIL: %s\n' "${failed[@]}"
	echo "new crashers are under the packages' testdata/fuzz/ folders (git status)"
	exit 1
fi
echo "all fuzz targets ran for $fuzztime without a failure"
