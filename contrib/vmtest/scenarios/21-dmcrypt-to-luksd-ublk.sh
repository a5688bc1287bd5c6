#!/bin/sh
# 21-dmcrypt-to-luksd-ublk: scenario 20 through ublk (/dev/ublkbN).
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/20-dmcrypt-to-luksd-nbd.sh
