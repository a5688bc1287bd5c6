#!/usr/bin/env bash
# Side-by-side benchmark of luksd in front of a remote NBD server (not a
# test): nbdkit's file plugin exports a LUKS2 image (aes-xts-plain64,
# 4096-byte sectors) on tmpfs; `luksd serve --socket` serves its plaintext
# with the image opened as nbd+unix:// (nbdkit on a unix socket) and as
# nbd://127.0.0.1 (nbdkit on loopback TCP). fio's nbd engine (libnbd) reads
# and writes luksd's export, and, as the peer, nbdkit's export directly
# over the same transport: 1 MiB sequential read and write, 4 KiB random
# read, iodepth 32, best of ROUNDS interleaved runs.
# Target (issue #13): luksd in front >= 0.8x the client reading nbdkit
# directly. luksd also encrypts (XTS) what nbdkit only copies: on a small
# shared machine the CPU is the limit.
# LUKSD_BEFORE=PATH (another build of luksd, e.g. of main) serves the same
# exports beside it and adds its runs to each round, for a before/after
# in one run.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-512}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
. contrib/bench/lib.sh
bench_start nbd_front.sh fio nbdkit cryptsetup

printf 'bench passphrase' >"$work/pass"
head -c $(((SIZE_MIB + 16) << 20)) /dev/urandom >"$work/luks2.img"
cryptsetup luksFormat -q --type luks2 --sector-size 4096 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
	--key-file "$work/pass" "$work/luks2.img"

wait_for() { for _ in $(seq 200); do eval "$1" && return 0; sleep 0.05; done; echo "nbd_front.sh: $2 did not start" >&2; exit 1; }
# Each luksd server has its own pair of nbdkit servers on its own copy of
# the image: luksd refuses a second serve of the same location.
declare -A backing peer
servers=(luksd)
[ -z "${LUKSD_BEFORE:-}" ] || servers+=(before)
for s in "${servers[@]}"; do
	img=$work/luks2.img
	if [ "$s" != luksd ]; then
		img=$work/$s.img
		cp "$work/luks2.img" "$img"
	fi
	port=$((20000 + RANDOM % 40000))
	nbdkit -f -U "$work/nbdkit-$s.sock" file "$img" 2>>"$work/nbdkit.log" &
	pids+=($!)
	nbdkit -f -i 127.0.0.1 -p "$port" file "$img" 2>>"$work/nbdkit.log" &
	pids+=($!)
	wait_for '[ -S "$work/nbdkit-$s.sock" ]' "nbdkit (unix)"
	wait_for '(: </dev/tcp/127.0.0.1/$port) 2>/dev/null' "nbdkit (tcp, port $port)"
	backing[$s-unix]="nbd+unix:///?socket=$work/nbdkit-$s.sock"
	backing[$s-tcp]="nbd://127.0.0.1:$port/"
	# The peer reads the first pair.
	[ "$s" != luksd ] || peer=([unix]=${backing[$s-unix]} [tcp]=${backing[$s-tcp]})
done
for t in unix tcp; do
	for s in "${servers[@]}"; do
		bin=$LUKSD
		[ "$s" = luksd ] || bin=$LUKSD_BEFORE
		"$bin" serve --socket "$work/$s-$t.sock" --key-file "$work/pass" "${backing[$s-$t]}" \
			</dev/null >/dev/null 2>"$work/$s-$t.log" &
		pids+=($!)
		wait_for '[ -S "$work/$s-$t.sock" ]' "$s serve ($t)"
	done
done

# fio_run URI RW BS WRITE: KiB/s of one fio run (libnbd). The size stays
# inside the LUKS data area on both exports.
fio_run() {
	fio --name=b --ioengine=nbd --uri="$1" --rw="$2" --bs="$3" --iodepth=32 \
		--size="${SIZE_MIB}M" --time_based --runtime="$RUNTIME" --ramp_time=1 \
		--output-format=terse --terse-version=3 |
		awk -F';' -v w="$4" '$1 == 3 { print (w ? $48 : $7) }'
}

declare -A best
keep() { [ "$2" -gt "${best[$1]:-0}" ] && best[$1]=$2 || true; }
workloads=(seqread:read:1M:0 seqwrite:write:1M:1 randread:randread:4k:0)
for _ in $(seq "$ROUNDS"); do
	for t in unix tcp; do
		for w in "${workloads[@]}"; do
			IFS=: read -r k rw bs wr <<<"$w"
			keep "peer-$t-$k" "$(fio_run "${peer[$t]}" "$rw" "$bs" "$wr")"
			for s in "${servers[@]}"; do
				keep "$s-$t-$k" "$(fio_run "nbd+unix:///?socket=$work/$s-$t.sock" "$rw" "$bs" "$wr")"
			done
		done
	done
done
grep -q serving "$work/luksd-unix.log" || { cat "$work/luksd-unix.log" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
echo
echo "fio nbd engine, iodepth 32, ${SIZE_MIB} MiB on tmpfs, best of $ROUNDS runs of ${RUNTIME}s, $(nproc) CPUs"
echo "peer: fio -> nbdkit file; luksd: fio -> luksd serve (unix socket) -> nbdkit file"
printf '%-10s %-14s %14s %14s %8s' backing workload "nbdkit MiB/s" "luksd MiB/s" ratio
[ -z "${LUKSD_BEFORE:-}" ] || printf ' %14s %8s' "before MiB/s" ratio
echo
for t in unix tcp; do
	for w in seqread:"1M seq read" seqwrite:"1M seq write" randread:"4k rand read"; do
		k=${w%%:*}
		printf '%-10s %-14s %14s %14s %8s' "$t" "${w#*:}" "$(mib "${best[peer-$t-$k]}")" "$(mib "${best[luksd-$t-$k]}")" \
			"$(ratio "${best[luksd-$t-$k]}" "${best[peer-$t-$k]}")"
		[ -z "${LUKSD_BEFORE:-}" ] ||
			printf ' %14s %8s' "$(mib "${best[before-$t-$k]}")" "$(ratio "${best[before-$t-$k]}" "${best[peer-$t-$k]}")"
		echo
	done
done
echo "(target: luksd in front >= 0.8x the client reading nbdkit directly)"
