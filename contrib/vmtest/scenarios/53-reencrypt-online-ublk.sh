#!/bin/sh
# 53-reencrypt-online-ublk: scenario 52 through ublk (/dev/ublkbN).
# requires: luksd-reencrypt-online luksd-open-ublk
# timeout: 600
FRONTEND=ublk
. /vmtest/scenarios/52-reencrypt-online-nbd.sh
