#!/usr/bin/env bash
# Side-by-side NBD benchmark (not a test): fio's nbd engine against
#   luksd serve     aes-xts-plain64, LUKS2, 4096-byte sectors
#   nbdkit file     the same size, unencrypted (the reference)
#   nbdkit luks     nbdkit's luks filter on a LUKS1 aes-xts-plain64 volume
# all backed by files on tmpfs. The matrix (issue #17): 1 MiB sequential
# read and write at iodepth 8, 4 KiB random read and write at iodepth 32,
# over a unix socket and over loopback TCP, luksd against nbdkit file;
# nbdkit luks over the unix socket only. Each shape runs ROUNDS times,
# the servers interleaved (who goes first rotates), and keeps its best
# run, so a burst of someone else's load does not decide the ratios.
# Targets: luksd >= 1.0x nbdkit file on every shape, >= 2x nbdkit luks,
# peak RSS < 100 MiB.
# LUKSD_BEFORE=PATH (another build of luksd, e.g. of main) serves its own
# copies of the volume beside it and joins every round, for a
# before/after in one run.
#
#   ROUNDS=5 RUNTIME=5 SHAPES="randread randwrite" NETS=unix contrib/bench/nbd.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-512}
RUNTIME=${RUNTIME:-4}
ROUNDS=${ROUNDS:-3}
SHAPES=${SHAPES:-"read write randread randwrite"}
NETS=${NETS:-"unix tcp"}
. contrib/bench/lib.sh
bench_start nbd.sh fio nbdkit cryptsetup

printf 'bench passphrase' >"$work/pass"
pbkdf=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)

# Fully allocated backing files: random bytes, then a header on top. Each
# luksd server has its own image (a served volume is locked).
head -c $((SIZE_MIB << 20)) /dev/urandom >"$work/plain.img"
head -c $(((SIZE_MIB + 16) << 20)) /dev/urandom >"$work/luks2-unix.img"
cryptsetup luksFormat -q --type luks2 --sector-size 4096 "${pbkdf[@]}" --key-file "$work/pass" "$work/luks2-unix.img"
cp "$work/luks2-unix.img" "$work/luks2-tcp.img"
head -c $(((SIZE_MIB + 2) << 20)) /dev/urandom >"$work/luks1.img"
cryptsetup luksFormat -q --type luks1 --key-file "$work/pass" --iter-time 1 "$work/luks1.img"

[ -z "${LUKSD_BEFORE:-}" ] || {
	cp "$work/luks2-unix.img" "$work/before-unix.img"
	cp "$work/luks2-unix.img" "$work/before-tcp.img"
}

port() { echo $((20000 + RANDOM % 40000)); }
declare -A uri luksd_pid pid
luksd_tcp=$(port)
nbdkit_tcp=$(port)
[ "$nbdkit_tcp" != "$luksd_tcp" ] || nbdkit_tcp=$((luksd_tcp + 1))
"$LUKSD" serve --socket "$work/luksd.sock" --key-file "$work/pass" "$work/luks2-unix.img" 2>"$work/luksd-unix.log" &
luksd_pid[unix]=$!
pid[luksd-unix]=$!
pids+=($!)
"$LUKSD" serve --listen "127.0.0.1:$luksd_tcp" --key-file "$work/pass" "$work/luks2-tcp.img" 2>"$work/luksd-tcp.log" &
luksd_pid[tcp]=$!
pid[luksd-tcp]=$!
pids+=($!)
if [ -n "${LUKSD_BEFORE:-}" ]; then
	before_tcp=$((luksd_tcp + 2))
	"$LUKSD_BEFORE" serve --socket "$work/before.sock" --key-file "$work/pass" "$work/before-unix.img" 2>"$work/before-unix.log" &
	pid[before-unix]=$!
	pids+=($!)
	"$LUKSD_BEFORE" serve --listen "127.0.0.1:$before_tcp" --key-file "$work/pass" "$work/before-tcp.img" 2>"$work/before-tcp.log" &
	pid[before-tcp]=$!
	pids+=($!)
	uri[before-tcp]="nbd://127.0.0.1:$before_tcp/"
fi
nbdkit -f -U "$work/file.sock" file "$work/plain.img" &
pid[file-unix]=$!
pids+=($!)
nbdkit -f -i 127.0.0.1 -p "$nbdkit_tcp" file "$work/plain.img" &
pid[file-tcp]=$!
pids+=($!)
nbdkit -f -U "$work/luks.sock" file "$work/luks1.img" --filter=luks passphrase=+"$work/pass" &
pid[luks-unix]=$!
pids+=($!)
for s in luksd file luks ${LUKSD_BEFORE:+before}; do
	uri[$s-unix]="nbd+unix:///?socket=$work/$s.sock"
	for _ in $(seq 100); do [ -S "$work/$s.sock" ] && break; sleep 0.1; done
	[ -S "$work/$s.sock" ] || { echo "nbd.sh: the $s server did not start" >&2; cat "$work"/*.log >&2; exit 1; }
done
uri[luksd-tcp]="nbd://127.0.0.1:$luksd_tcp/"
uri[file-tcp]="nbd://127.0.0.1:$nbdkit_tcp/"
for p in "$luksd_tcp" "$nbdkit_tcp" ${before_tcp:-}; do
	for _ in $(seq 100); do (: </dev/tcp/127.0.0.1/"$p") 2>/dev/null && break; sleep 0.1; done
	(: </dev/tcp/127.0.0.1/"$p") 2>/dev/null || {
		echo "nbd.sh: no server listens on 127.0.0.1:$p (port taken? run again)" >&2
		cat "$work"/*.log >&2
		exit 1
	}
done

# cputicks PID: the process's CPU time (user + system) in clock ticks.
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# switches PID: the context switches of the process's live threads so far
# (luksd's live as long as it does; nbdkit's end with each connection).
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }

# run URI RW PID: prints "KiB/s IOPS server-µs-per-request
# server-context-switches-per-request" of one fio run of shape RW against
# the server PID. The server's CPU time per request is the measure a
# loaded machine disturbs least; its context switches per request say how
# much of that time goes to waking threads. A run that fails (fio's error,
# a server gone) says so on stderr and counts as "0 0 0 0", so one failure
# costs its cell of the matrix, not the whole matrix.
failed=0
run() {
	local bs=4k depth=32 rw=$2 field=8 t0 t1 s0 s1
	case $rw in read | write) bs=1M depth=8 ;; esac
	case $rw in *write) field=49 ;; esac
	kill -0 "$3" 2>/dev/null || { echo "nbd.sh: the server of $1 is gone" >&2; echo "0 0 0 0"; return; }
	s0=$(switches "$3")
	t0=$(cputicks "$3")
	if ! fio --name=bench --ioengine=nbd --uri="$1" --rw="$rw" --bs="$bs" \
		--iodepth="$depth" --size="${SIZE_MIB}M" --time_based --runtime="$RUNTIME" --ramp_time=1 \
		--output-format=terse --terse-version=3 >"$work/fio.out" 2>&1 || ! kill -0 "$3" 2>/dev/null; then
		echo "nbd.sh: fio $rw against $1 failed:" >&2
		tail -n 3 "$work/fio.out" >&2
		echo "0 0 0 0"
		return
	fi
	t1=$(cputicks "$3")
	s1=$(switches "$3")
	awk -F';' -v f="$field" -v ticks=$((t1 - t0)) -v cs=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" -v rt="$RUNTIME" '$1 == 3 {
		ios = $f * (rt + 1); printf "%d %d %.1f %.2f\n", $(f - 1), $f, (ios > 0 ? ticks * 1e6 / hz / ios : 0), (ios > 0 ? cs / ios : 0) }' "$work/fio.out"
}

declare -A best cpu csw
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for shape in $SHAPES; do
	for net in $NETS; do
		servers=(luksd file ${LUKSD_BEFORE:+before})
		[ "$net" = unix ] && case $shape in read | randread) servers+=(luks) ;; esac
		for _ in $(seq "$ROUNDS"); do
			servers=("${servers[@]:1}" "${servers[0]}")
			for s in "${servers[@]}"; do
				read -r kib iops us sw < <(run "${uri[$s-$net]}" "$shape" "${pid[$s-$net]}") || kib=0 iops=0
				[ "$kib$iops" != 00 ] || { failed=$((failed + 1)) && continue; }
				v=$kib
				case $shape in rand*) v=$iops ;; esac
				[ "$v" -gt "${best[$s-$net-$shape]:-0}" ] && best[$s-$net-$shape]=$v
				awk -v u="$us" -v b="${cpu[$s-$net-$shape]:-}" 'BEGIN { exit !(b == "" || u < b) }' &&
					cpu[$s-$net-$shape]=$us csw[$s-$net-$shape]=$sw
			done
		done
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
value() {
	case $2 in rand*) echo "$1" ;; *) awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }' ;; esac
}

echo
echo "fio nbd engine, ${SIZE_MIB} MiB on tmpfs, best of $ROUNDS interleaved runs of ${RUNTIME}s, $(nproc) CPUs"
echo "1M read/write: MiB/s at iodepth 8; 4k randread/randwrite: IOPS at iodepth 32"
echo "cpu: the server's CPU time per request (user + system, best run), microseconds;"
echo "cs: luksd's context switches per request in that run (nbdkit's threads end with"
echo "their connection, taking their counts with them)"
printf '%-5s %-10s %12s %12s %8s %12s %8s %9s %9s %8s' net shape "nbdkit file" "luksd serve" ratio "nbdkit luks" vs-luks \
	"cpu file" "cpu luksd" "cs luksd"
[ -z "${LUKSD_BEFORE:-}" ] || printf ' %12s %8s %10s %9s' before ratio "cpu before" "cs before"
echo
for net in $NETS; do
	for shape in $SHAPES; do
		l=${best[luksd-$net-$shape]:-0} f=${best[file-$net-$shape]:-0} k=${best[luks-$net-$shape]:-}
		printf '%-5s %-10s %12s %12s %8s %12s %8s %9s %9s %8s' "$net" "$shape" "$(value "$f" "$shape")" "$(value "$l" "$shape")" \
			"$(ratio "$l" "$f")" "${k:+$(value "$k" "$shape")}" "${k:+$(ratio "$l" "$k")}" \
			"${cpu[file-$net-$shape]:-}" "${cpu[luksd-$net-$shape]:-}" "${csw[luksd-$net-$shape]:-}"
		b=${best[before-$net-$shape]:-0}
		[ -z "${LUKSD_BEFORE:-}" ] ||
			printf ' %12s %8s %10s %9s' "$(value "$b" "$shape")" "$(ratio "$b" "$f")" "${cpu[before-$net-$shape]:-}" "${csw[before-$net-$shape]:-}"
		echo
	done
done
echo "target: luksd serve >= 1.0x nbdkit file on every shape, >= 2x nbdkit luks"
[ "$failed" = 0 ] || echo "failed runs: $failed (see above; a cell of 0 had no run that worked)"
echo "load average (1, 5, 15 min): $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
for net in $NETS; do
	echo "luksd peak RSS ($net): $(($(awk '/^VmHWM:/ { print $2 }' "/proc/${luksd_pid[$net]}/status" 2>/dev/null || echo 0) / 1024)) MiB  (target < 100)"
	[ -z "${LUKSD_BEFORE:-}" ] ||
		echo "before peak RSS ($net): $(($(awk '/^VmHWM:/ { print $2 }' "/proc/${pid[before-$net]}/status" 2>/dev/null || echo 0) / 1024)) MiB"
done
exit $((failed > 0))
