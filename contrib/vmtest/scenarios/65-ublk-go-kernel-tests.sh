#!/bin/sh
# 65-ublk-go-kernel-tests: package ublk's own kernel tests (TestKernel* in
# ublk/kernel_test.go and kernel_fio_test.go), which skip outside this VM:
# the data path with user copy and in copy mode, discards, fio verify in
# every way of serving, user recovery, deleting an abandoned device. Each
# test is one check; a skip counts as a failure here, where the kernel is.
# requires: luksd-open-ublk
. /vmtest/guest/lib.sh

# (Scenario 90 runs package nbd's the same way, with PKG=nbd.)
PKG=${PKG:-ublk}
bin=/usr/local/lib/luksd-tests/$PKG.test

gotest() {
	_t=$1
	[ -x "$bin" ] || because "$bin missing (did go test -c ./$PKG fail?)"
	_rc=0
	(cd "$SCRATCH" && "$bin" -test.v -test.count=1 -test.timeout=240s -test.run "^$_t\$") >"$SCRATCH/$_t.out" 2>&1 || _rc=$?
	cat "$SCRATCH/$_t.out"
	grep -q -- "--- SKIP" "$SCRATCH/$_t.out" && because "$_t skipped: $(grep -m1 SKIP "$SCRATCH/$_t.out")"
	[ "$_rc" = 0 ] || because "$_t failed (exit $_rc): $(grep -m1 -E -- '--- FAIL|_test.go:[0-9]+:' "$SCRATCH/$_t.out")"
	grep -q -- "^--- PASS: $_t " "$SCRATCH/$_t.out" || because "$_t did not report PASS"
}

# TestKernelSpeed is a measurement (scenario 72 reports the speeds).
tests=$([ -x "$bin" ] && "$bin" -test.list '^TestKernel' | grep -v '^TestKernelSpeed$')
[ -n "$tests" ] || { check "$VMTEST_SCENARIO list" because "no TestKernel* tests in $bin"; exit 0; }
for t in $tests; do
	check "$VMTEST_SCENARIO $t $PKG" gotest "$t"
done
