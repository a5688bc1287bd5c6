#!/bin/sh
# 91-stall: the backing device stalls. A dm-delay target under it makes
# every request (read, write, flush) take 60 s, or 45 s (the case issue 19
# found: over 30 s, nbd.ko's old default request timeout). dm-crypt, luksd
# over nbd and luksd over ublk, each over its own delayed device, for both
# stall lengths side by side in one run (so the two waits overlap): a
# direct 1 MiB read, and a direct 1 MiB write then fsync, each timed. On
# both frontends each takes at most 1.2 times dm-crypt's time with the same
# stall (issue 19: nbd lost the device at the kernel's 30 s timeout, ublk
# took four times the stall), the stall really reached every engine (each
# took the stall at least), and afterwards the device is still active,
# reads what was written before and during the stall, and takes new writes.
# timeout: 600
# requires: luksd-open-nbd luksd-open-ublk
. /vmtest/guest/lib.sh
require_luksd
STALLS=${STALLS:-60 45}
FRONTS="dmcrypt nbd ublk"
# An engine is FRONT-SECONDS: dmcrypt-60, nbd-45, ...
ENGINES=$(for s in $STALLS; do for f in $FRONTS; do printf '%s-%s ' "$f" "$s"; done; done)

key=$SCRATCH/key
mkkey "$key"
line=$(cipher_line aes-xts-plain64/4096)
mkpattern "$SCRATCH/before" 1
mkpattern "$SCRATCH/during" 1
mkpattern "$SCRATCH/after" 1

# prepare ENGINE: a 40 MiB image on a loop device under a delay target
# (slow-ENGINE, no delay yet), formatted and opened by ENGINE, with 1 MiB
# written at 0; the plaintext device goes to $SCRATCH/ENGINE.dev.
prepare() {
	mkimage "$SCRATCH/$1.img" 40
	_loop=$(mkloop "$SCRATCH/$1.img") || return 1
	_slow=$(dm_delay "slow-$1" "$_loop") || return 1
	cs_format "$_slow" "$key" "$line" || return 1
	case $1 in
	dmcrypt-*) cs_open "$_slow" "vol-$1" "$key" && _dev=/dev/mapper/vol-$1 ;;
	*) _dev=$(luksd_open "${1%-*}" "$_slow" "vol-$1" "$key") ;;
	esac || return 1
	echo "$_dev" >"$SCRATCH/$1.dev"
	dd if="$SCRATCH/before" of="$_dev" bs=1M oflag=direct conv=fsync,notrunc 2>/dev/null
}

# during ENGINE: the timed read (of what was written before) and the timed
# write+fsync, at once; outcomes in ENGINE.{read,write}.{rc,s,sum}.
during() {
	_dev=$(cat "$SCRATCH/$1.dev")
	(
		_rc=0
		timed "$SCRATCH/$1.read.s" sh -c "dd if=$_dev bs=1M count=1 iflag=direct 2>'$SCRATCH/$1.read.err' >'$SCRATCH/$1.read.data'" || _rc=$?
		echo $_rc >"$SCRATCH/$1.read.rc"
	) &
	(
		_rc=0
		timed "$SCRATCH/$1.write.s" dd if="$SCRATCH/during" of="$_dev" bs=1M seek=8 oflag=direct conv=fsync,notrunc 2>"$SCRATCH/$1.write.err" || _rc=$?
		echo $_rc >"$SCRATCH/$1.write.rc"
	) &
}

# after ENGINE: with the delay gone, the device is still there (luksd:
# status says active), holds both writes and takes a new one; "ok" or why
# not goes to ENGINE.after.
after() {
	_dev=$(cat "$SCRATCH/$1.dev")
	_why=ok
	if [ "${1%-*}" != dmcrypt ] && ! luksd status "vol-$1" >"$SCRATCH/$1.status" 2>&1; then
		_why="luksd status vol-$1 failed after the stall: $(head -n1 "$SCRATCH/$1.status")"
	elif [ "$(sum_at "$_dev" 0 1)" != "$(sum_of "$SCRATCH/before")" ]; then
		_why="the data written before the stall reads back wrong"
	elif [ "$(sum_at "$_dev" 8 1)" != "$(sum_of "$SCRATCH/during")" ]; then
		_why="the data written during the stall reads back wrong"
	elif ! dd if="$SCRATCH/after" of="$_dev" bs=1M seek=16 oflag=direct conv=fsync,notrunc 2>/dev/null ||
		[ "$(sum_at "$_dev" 16 1)" != "$(sum_of "$SCRATCH/after")" ]; then
		_why="a write after the stall failed or reads back wrong"
	fi
	echo "$_why" >"$SCRATCH/$1.after"
}

say "preparing $ENGINES"
for e in $ENGINES; do
	prepare "$e" || { fail "$VMTEST_SCENARIO $e" "setting up failed: $(open_failure "vol-$e")"; exit 1; }
done
drop_caches
for e in $ENGINES; do set_delay "slow-$e" "${e##*-}000"; done
say "every request now takes $STALLS s"
for e in $ENGINES; do during "$e"; done
wait
for e in $ENGINES; do set_delay "slow-$e" 0; done
say "the stall is over"
for e in $ENGINES; do after "$e"; done

secs() { cat "$SCRATCH/$1.$2.s"; }

# outcome ENGINE OP: OP (read or write) ended well, and took the stall at
# least (it reached the delayed device: no cache answered it).
outcome() {
	stall_s=${1##*-}
	[ "$(cat "$SCRATCH/$1.$2.rc")" = 0 ] || because "the $2 failed after $(secs "$1" "$2") s: $(head -c 200 "$SCRATCH/$1.$2.err")"
	if [ "$2" = read ]; then
		[ "$(sum_of "$SCRATCH/$1.read.data")" = "$(sum_of "$SCRATCH/before")" ] || because "the read returned other data"
	fi
	awk -v t="$(secs "$1" "$2")" -v s="$stall_s" 'BEGIN { exit !(t >= 0.95 * s) }' ||
		because "the $2 took $(secs "$1" "$2") s, less than the ${stall_s} s stall: it did not reach the delayed device"
}

# compare ENGINE OP: outcome, and at most 1.2 times dm-crypt's time with
# the same stall.
compare() {
	outcome "$1" "$2"
	_l=$(secs "$1" "$2")
	_d=$(secs "dmcrypt-${1##*-}" "$2")
	note "$VMTEST_SCENARIO $2 took ${_l} s on luksd/$1, ${_d} s on dm-crypt ($(awk -v l="$_l" -v d="$_d" 'BEGIN { printf "%.2f", l / d }')x)"
	awk -v l="$_l" -v d="$_d" 'BEGIN { exit !(l <= 1.2 * d) }' ||
		because "the $2 took ${_l} s, more than 1.2 x dm-crypt's ${_d} s"
}

# survived ENGINE: the after-stall checks.
survived() {
	[ "$(cat "$SCRATCH/$1.after")" = ok ] || because "$(cat "$SCRATCH/$1.after")"
}

for s in $STALLS; do
	check "$VMTEST_SCENARIO ${s}s read dm-crypt" outcome "dmcrypt-$s" read
	check "$VMTEST_SCENARIO ${s}s write+fsync dm-crypt" outcome "dmcrypt-$s" write
	for f in nbd ublk; do
		check "$VMTEST_SCENARIO ${s}s read $f" compare "$f-$s" read
		check "$VMTEST_SCENARIO ${s}s write+fsync $f" compare "$f-$s" write
		check "$VMTEST_SCENARIO ${s}s device survives $f" survived "$f-$s"
	done
done
