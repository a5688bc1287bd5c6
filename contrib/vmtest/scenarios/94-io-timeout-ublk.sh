#!/bin/sh
# 94-io-timeout-ublk: scenario 93 through ublk (/dev/ublkbN): ublk_drv
# waits for a live daemon however long a request takes, so --io-timeout is
# the daemon's own: a stalled read fails with EIO, the device stays.
# requires: luksd-open-ublk
FRONTEND=ublk
. /vmtest/scenarios/93-io-timeout-nbd.sh
