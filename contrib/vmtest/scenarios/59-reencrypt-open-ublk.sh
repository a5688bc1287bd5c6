#!/bin/sh
# 59-reencrypt-open-ublk: scenario 58 through ublk (/dev/ublkbN).
# requires: luksd-reencrypt luksd-open-ublk
# timeout: 600
FRONTEND=ublk
. /vmtest/scenarios/58-reencrypt-open-nbd.sh
