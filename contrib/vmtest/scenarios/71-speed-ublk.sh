#!/bin/sh
# 71-speed-ublk: scenario 70 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/70-speed-nbd.sh
