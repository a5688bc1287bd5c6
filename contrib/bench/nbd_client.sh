#!/usr/bin/env bash
# Side-by-side benchmark of the nbd:// backend (not a test): luksd's NBD
# client (nbd.Client, BenchmarkClient* in nbd/client_bench_test.go) and
# fio's nbd engine (libnbd) reading and writing the same nbdkit `file`
# export over a unix socket, iodepth 32, on tmpfs. 1 MiB sequential read
# and write, 4 KiB random read; best of ROUNDS interleaved runs.
# Target (issue #13): luksd's client >= 0.8x libnbd. (luksd serving an
# nbd:// volume end to end waits for the CLI to read headers through
# blockdev.)
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-512}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
for tool in fio nbdkit; do
	command -v "$tool" >/dev/null || { echo "nbd_client.sh: $tool is not installed (make deps)" >&2; exit 1; }
done
work=$(mktemp -d -p /dev/shm luksd-nbdclient.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
head -c $((SIZE_MIB << 20)) /dev/urandom >"$work/disk.img"
nbdkit -f -U "$work/nbd.sock" file "$work/disk.img" &
pid=$!
for _ in $(seq 100); do [ -S "$work/nbd.sock" ] && break; sleep 0.1; done
uri="nbd+unix:///?socket=$work/nbd.sock"
go test -c -o "$work/nbd.test" ./nbd/

# fio_run RW BS: KiB/s of one fio run (libnbd).
fio_run() {
	fio --name=peer --ioengine=nbd --uri="$uri" --rw="$1" --bs="$2" --iodepth=32 \
		--size="${SIZE_MIB}M" --time_based --runtime="$RUNTIME" --ramp_time=1 \
		--output-format=terse --terse-version=3 |
		awk -F';' -v w="$3" '$1 == 3 { print (w ? $48 : $7) }'
}
# go_run NAME: KiB/s of one run of BenchmarkClientNAME.
go_run() {
	LUKSD_NBD_BENCH_URI=$uri "$work/nbd.test" -test.run '^$' -test.bench "^BenchmarkClient$1\$" \
		-test.benchtime "${RUNTIME}s" | awk '/MB\/s/ { for (i = 1; i < NF; i++) if ($(i+1) == "MB/s") printf "%.0f\n", $i * 1e6 / 1024 }'
}

declare -A best
keep() { [ "$2" -gt "${best[$1]:-0}" ] && best[$1]=$2 || true; }
for _ in $(seq "$ROUNDS"); do
	keep fio-seqread "$(fio_run read 1M 0)"
	keep luksd-seqread "$(go_run SeqRead1M)"
	keep fio-seqwrite "$(fio_run write 1M 1)"
	keep luksd-seqwrite "$(go_run SeqWrite1M)"
	keep fio-randread "$(fio_run randread 4k 0)"
	keep luksd-randread "$(go_run RandRead4K)"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
echo
echo "nbdkit file over a unix socket, iodepth 32, ${SIZE_MIB} MiB on tmpfs, best of $ROUNDS runs of ${RUNTIME}s, $(nproc) CPUs"
printf '%-22s %12s %12s %8s\n' workload "libnbd MiB/s" "luksd MiB/s" ratio
for w in seqread:"1M seq read" seqwrite:"1M seq write" randread:"4k rand read"; do
	k=${w%%:*}
	printf '%-22s %12s %12s %8s\n' "${w#*:}" "$(mib "${best[fio-$k]}")" "$(mib "${best[luksd-$k]}")" \
		"$(ratio "${best[luksd-$k]}" "${best[fio-$k]}")"
done
echo "(target: luksd's client >= 0.8x libnbd)"
