#!/bin/sh
# 85-signals-ublk: scenario 84 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/84-signals-nbd.sh
