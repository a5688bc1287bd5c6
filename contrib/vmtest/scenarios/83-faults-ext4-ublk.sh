#!/bin/sh
# 83-faults-ext4-ublk: scenario 82 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/82-faults-ext4-nbd.sh
