#!/bin/sh
# 90-nbd-go-kernel-tests: package nbd's own kernel tests (TestKernel* in
# nbd/kernel_test.go), run as scenario 65 runs ublk's: the kernel's
# timeouts as set (no 30 s default), connections whose server end dies are
# replaced and the device serves on, a kernel timeout drops a connection
# that is replaced and the request completes, the server's request timeout
# fails a stalled request with EIO without losing a connection, and a
# disconnect from outside ends the attachment.
# requires: luksd-open-nbd
PKG=nbd
. /vmtest/scenarios/65-ublk-go-kernel-tests.sh
