#!/bin/sh
# 71-speed-ublk: scenario 70 through ublk (/dev/ublkbN).
# alone: its figures compare engines; another VM beside it would move them
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/70-speed-nbd.sh
