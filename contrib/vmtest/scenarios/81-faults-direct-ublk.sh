#!/bin/sh
# 81-faults-direct-ublk: scenario 80 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/80-faults-direct-nbd.sh
