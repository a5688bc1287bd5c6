#!/bin/sh
# 31-luksd-to-dmcrypt-ublk: scenario 30 through ublk (/dev/ublkbN).
# requires: luksd-format luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/30-luksd-to-dmcrypt-nbd.sh
