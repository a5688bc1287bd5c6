#!/bin/sh
# 92-stall-45: scenario 91 with a 45 s stall, the case issue 19 found
# (over 30 s, nbd.ko's old default request timeout).
# requires: luksd-open-nbd luksd-open-ublk
STALL_MS=45000
. /vmtest/scenarios/91-stall-60.sh
