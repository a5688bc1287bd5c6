#!/bin/sh
# 51-fio-verify-ublk: scenario 50 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/50-fio-verify-nbd.sh
