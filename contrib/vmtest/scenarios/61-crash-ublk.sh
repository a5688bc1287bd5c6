#!/bin/sh
# 61-crash-ublk: scenario 60 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk luksd-crash-reattach-ublk
FRONTEND=ublk
. /vmtest/scenarios/60-crash-nbd.sh
