#!/bin/sh
# 63-recover-ublk: scenario 62 through ublk (ublk user recovery).
# requires: luksd-open-ublk luksd-recover-ublk
FRONTEND=ublk
. /vmtest/scenarios/62-recover-nbd.sh
