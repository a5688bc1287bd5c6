#!/usr/bin/env bash
# Side-by-side NBD benchmark (not a test): fio's nbd engine against
#   luksd serve     aes-xts-plain64, LUKS2, 4096-byte sectors
#   nbdkit file     the same size, unencrypted (the ceiling)
#   nbdkit luks     nbdkit's luks filter on a LUKS1 aes-xts-plain64 volume
# all backed by files on tmpfs: 1 MiB sequential reads and 4 KiB random
# reads at iodepth 32 (best of ROUNDS interleaved runs), plus luksd's peak
# resident memory.
# Targets: luksd >= 0.8x nbdkit-file sequential, >= 2x nbdkit-luks,
# >= 0.7x nbdkit-file 4k IOPS, peak RSS < 100 MiB.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-512}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
for tool in fio nbdkit cryptsetup; do
	command -v "$tool" >/dev/null || { echo "nbd.sh: $tool is not installed (make deps)" >&2; exit 1; }
done
make -s build
LUKSD=$PWD/bin/luksd

work=$(mktemp -d -p /dev/shm luksd-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

printf 'bench passphrase' >"$work/pass"
pbkdf=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)

# Fully allocated backing files: random bytes, then a header on top.
head -c $((SIZE_MIB << 20)) /dev/urandom >"$work/plain.img"
head -c $(((SIZE_MIB + 16) << 20)) /dev/urandom >"$work/luks2.img"
cryptsetup luksFormat -q --type luks2 --sector-size 4096 "${pbkdf[@]}" --key-file "$work/pass" "$work/luks2.img"
head -c $(((SIZE_MIB + 2) << 20)) /dev/urandom >"$work/luks1.img"
cryptsetup luksFormat -q --type luks1 --key-file "$work/pass" --iter-time 1 "$work/luks1.img"

"$LUKSD" serve --socket "$work/luksd.sock" --key-file "$work/pass" "$work/luks2.img" 2>"$work/luksd.log" &
luksd_pid=$!
pids+=("$luksd_pid")
nbdkit -f -U "$work/file.sock" file "$work/plain.img" &
pids+=($!)
nbdkit -f -U "$work/luks.sock" file "$work/luks1.img" --filter=luks passphrase=+"$work/pass" &
pids+=($!)
for s in luksd file luks; do
	for _ in $(seq 100); do [ -S "$work/$s.sock" ] && break; sleep 0.1; done
	[ -S "$work/$s.sock" ] || { echo "nbd.sh: the $s server did not start" >&2; cat "$work/luksd.log" >&2; exit 1; }
done

# run NAME SOCKET RW BS: prints "KiB/s IOPS" of one fio run.
run() {
	fio --name="$1" --ioengine=nbd --uri="nbd+unix:///?socket=$2" --rw="$3" --bs="$4" \
		--iodepth=32 --size="${SIZE_MIB}M" --time_based --runtime="$RUNTIME" --ramp_time=1 \
		--output-format=terse --terse-version=3 | awk -F';' '$1 == 3 { print $7, $8 }'
}

# The machine is shared: rounds interleave the servers and each keeps its
# best run, so a burst of someone else's load does not decide the ratios.
declare -A bw iops
order=(luksd file luks)
for round in $(seq "$ROUNDS"); do
	# Rotate who goes first, so no server always follows the same one.
	order=("${order[@]:1}" "${order[0]}")
	for server in "${order[@]}"; do
		read -r b i < <(run "$server-seq" "$work/$server.sock" read 1M)
		[ "$b" -gt "${bw[$server-seq]:-0}" ] && bw[$server-seq]=$b
		read -r b i < <(run "$server-rand" "$work/$server.sock" randread 4k)
		[ "$i" -gt "${iops[$server-rand]:-0}" ] && iops[$server-rand]=$i
	done
done
rss_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$luksd_pid/status")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }

echo
echo "fio nbd engine, iodepth 32, ${SIZE_MIB} MiB on tmpfs, best of $ROUNDS runs of ${RUNTIME}s, $(nproc) CPUs"
printf '%-14s %16s %16s\n' server "1M seq MiB/s" "4k rand IOPS"
for server in file luks luksd; do
	name=$server
	[ "$server" = file ] && name="nbdkit file"
	[ "$server" = luks ] && name="nbdkit luks"
	[ "$server" = luksd ] && name="luksd serve"
	printf '%-14s %16s %16s\n' "$name" "$(mib "${bw[$server-seq]}")" "${iops[$server-rand]}"
done
echo
echo "luksd / nbdkit-file, 1M seq read:  $(ratio "${bw[luksd-seq]}" "${bw[file-seq]}")  (target >= 0.8)"
echo "luksd / nbdkit-luks, 1M seq read:  $(ratio "${bw[luksd-seq]}" "${bw[luks-seq]}")  (target >= 2)"
echo "luksd / nbdkit-file, 4k rand IOPS: $(ratio "${iops[luksd-rand]}" "${iops[file-rand]}")  (target >= 0.7)"
echo "luksd peak RSS: $((rss_kib / 1024)) MiB  (target < 100)"
