#!/bin/sh
# 93-io-timeout-nbd: `luksd open --io-timeout 5` over a disk (dm-delay)
# that stalls for 30 s: a direct read fails with EIO after about 5 s, long
# before the disk answers, and the device stays: once the disk answers
# again it is active, reads what was written and takes new writes; the
# daemon's log says which request timed out. Over nbd, then the daemon
# itself stops answering (SIGSTOP for 22 s, past the kernel's timeout of
# 5 + 10 s): the kernel drops the connection and sends the request again;
# after SIGCONT the daemon replaces the connection (its log says so), the
# read completes with the right data, and the volume keeps working.
# Scenario 94 does the same through ublk, without the SIGSTOP part.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
require_luksd
FRONTEND=${FRONTEND:-nbd}

key=$SCRATCH/key
mkkey "$key"
line=$(cipher_line aes-xts-plain64/4096)
mkpattern "$SCRATCH/pat" 1

# prepare: volume "vol" over slow-vol, 1 MiB written at 0 and at 2 MiB.
prepare() {
	mkimage "$SCRATCH/img" 40
	_loop=$(mkloop "$SCRATCH/img") || because "losetup failed"
	slow=$(dm_delay slow-vol "$_loop") || because "dmsetup create failed"
	cs_format "$slow" "$key" "$line" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$slow" vol "$key" --io-timeout 5) || because "luksd open failed: $(open_failure vol)"
	write_at "$dev" "$SCRATCH/pat" 0 || because "writing before the stall failed"
	write_at "$dev" "$SCRATCH/pat" 2 || because "writing before the stall failed"
}

# works: the volume is active, holds what was written, takes a new write.
works() {
	luksd status vol >/dev/null || because "luksd status vol: not active after $1"
	[ "$(sum_at "$dev" 0 1)" = "$(sum_of "$SCRATCH/pat")" ] || because "data reads back wrong after $1"
	write_at "$dev" "$SCRATCH/pat" 8 && [ "$(sum_at "$dev" 8 1)" = "$(sum_of "$SCRATCH/pat")" ] ||
		because "a write after $1 failed or reads back wrong"
}

eio_then_stays() {
	prepare
	drop_caches
	set_delay slow-vol 30000 || because "setting the delay failed"
	_rc=0
	timed "$SCRATCH/read.s" dd if="$dev" of=/dev/null bs=4k count=1 skip=16 iflag=direct 2>"$SCRATCH/read.err" || _rc=$?
	set_delay slow-vol 0 || because "removing the delay failed"
	_s=$(cat "$SCRATCH/read.s")
	note "$VMTEST_SCENARIO a read of a disk stalled for 30 s failed after ${_s} s ($FRONTEND, --io-timeout 5): $(head -c 100 "$SCRATCH/read.err")"
	[ "$_rc" != 0 ] || because "the read of the stalled disk succeeded after ${_s} s"
	grep -qi -e "input/output error" -e "i/o error" "$SCRATCH/read.err" || because "the read failed, but not with EIO: $(head -c 200 "$SCRATCH/read.err")"
	awk -v s="$_s" 'BEGIN { exit !(s < 20) }' || because "the read failed only after ${_s} s: the 5 s timeout did not answer it"
	works "the timed-out read"
	grep -q "not done after 5s" "/run/luksd/vol.log" || because "the daemon's log does not tell the timed-out request"
	luksd_close vol || because "luksd close failed"
}

stopped_daemon_reconnects() {
	prepare
	pid=$(luksd_pids)
	[ -n "$pid" ] || because "no luksd daemon"
	kill -STOP $pid
	_rc=0
	(
		_r=0
		timed "$SCRATCH/stop.s" sh -c "dd if=$dev bs=1M count=1 skip=2 iflag=direct 2>'$SCRATCH/stop.err' >'$SCRATCH/stop.data'" || _r=$?
		echo $_r >"$SCRATCH/stop.rc"
	) &
	reader=$!
	sleep 22
	kill -CONT $pid
	wait $reader
	note "$VMTEST_SCENARIO a read while the daemon was stopped for 22 s took $(cat "$SCRATCH/stop.s") s"
	[ "$(cat "$SCRATCH/stop.rc")" = 0 ] || because "the read failed: $(head -c 200 "$SCRATCH/stop.err")"
	[ "$(sum_of "$SCRATCH/stop.data")" = "$(sum_of "$SCRATCH/pat")" ] || because "the read returned other data"
	kill -0 $pid 2>/dev/null || because "the daemon is gone"
	grep -q "lost" /run/luksd/vol.log || because "the daemon's log tells of no lost connection: did the kernel time out?"
	grep -q "reconnected" /run/luksd/vol.log || because "the daemon's log tells of no reconnected connection"
	works "the daemon was stopped"
	luksd_close vol || because "luksd close failed"
}

check "$VMTEST_SCENARIO stalled read fails with EIO, device stays $FRONTEND" eio_then_stays
if [ "$FRONTEND" = nbd ]; then
	check "$VMTEST_SCENARIO stopped daemon reconnects $FRONTEND" stopped_daemon_reconnects
fi
