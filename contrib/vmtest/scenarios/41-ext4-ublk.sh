#!/bin/sh
# 41-ext4-ublk: scenario 40 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/40-ext4-nbd.sh
