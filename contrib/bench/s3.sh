#!/usr/bin/env bash
# Side-by-side S3 benchmark (not a test), all against one SeaweedFS (weed)
# on loopback, its data on tmpfs:
#   raw        aws-sdk-go-v2 alone (contrib/bench/s3raw): PUT, then GET, of
#              4 MiB objects, 8 at once: the ceiling the store and client allow
#   luksd      fio's nbd engine on `luksd serve` of an s3:// volume (LUKS2
#              aes-xts-plain64, 4 MiB chunks, 8 uploads at once): 1 MiB
#              sequential writes until flushed, then reads on a fresh serve
#              (cold cache)
#   copy       `luksd copy s3://... FILE` of that volume (its header too) to
#              a new file on tmpfs: the backend's read path alone, without
#              NBD or decryption, start and lease included
#   s3backer   s3backer (Debian's 1.5.4) in FUSE mode, --encrypt, 4 MiB
#              blocks, 8 threads: fio on its file, O_DIRECT, the same
# The luksd and s3backer figures are wall times of the fio command, fio's
# start and connection included (under load that start is a good part of
# a 256 MiB read); s3raw times its GETs alone. So luksd's reads are also
# given as fio reports them (first request to last), the measure that
# compares with s3raw's.
# then 4 KiB random writes at iodepth 32 through luksd with an NBD flush
# every second: IOPS, and the store's requests per MiB written (weed's
# metrics count them), all flushed by the end.
# Targets (issue 12): luksd >= 0.8x raw sequential, ahead of s3backer.
# LUKSD_BEFORE=PATH (another build of luksd, e.g. of main) adds its
# sequential write, read and copy to each round, for a before/after in
# one run.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-256}
RUNTIME=${RUNTIME:-10}
for tool in fio qemu-io s3backer curl python3; do
	command -v "$tool" >/dev/null || { echo "s3.sh: $tool is not installed (make deps)" >&2; exit 1; }
done
weed=$(contrib/s3/seaweedfs.sh --cached) || { echo "s3.sh: weed is not built (make deps)" >&2; exit 1; }
make -s build
LUKSD=$PWD/bin/luksd
work=$(mktemp -d -p /dev/shm luksd-s3bench.XXXXXX)
GOFLAGS=-mod=mod go build -o "$work/s3raw" ./contrib/bench/s3raw

pids=()
cleanup() {
	umount "$work/mnt" 2>/dev/null || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# Ports nobody uses now: weed's nine, its metrics.
read -r -a ports < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(10)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
mkdir -p "$work/weed" "$work/mnt"
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret-key AWS_REGION=us-east-1 \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true \
	AWS_ENDPOINT_URL=http://127.0.0.1:${ports[0]}
printf '{"identities":[{"name":"bench","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$work/s3.json"
"$weed" server -dir "$work/weed" -ip 127.0.0.1 -ip.bind 127.0.0.1 -s3 -master.telemetry=false \
	-s3.port.iceberg 0 -s3.port.lance 0 -master.volumeSizeLimitMB 256 -volume.max 0 -s3.config "$work/s3.json" \
	-s3.port "${ports[0]}" -s3.port.grpc "${ports[1]}" -master.port "${ports[2]}" -master.port.grpc "${ports[3]}" \
	-volume.port "${ports[4]}" -volume.port.grpc "${ports[5]}" -filer.port "${ports[6]}" -filer.port.grpc "${ports[7]}" \
	-s3.port.https "${ports[8]}" -metricsPort "${ports[9]}" \
	-filer.localSocket "$work/filer.sock" -s3.localSocket "$work/s3.sock" >"$work/weed.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do "$work/s3raw" -bucket bench -create 2>/dev/null && break; sleep 0.5; done

# s3requests prints how many S3 requests weed has served.
s3requests() {
	curl -s "http://127.0.0.1:${ports[9]}/metrics" |
		awk '/^SeaweedFS_s3_request_total/ { n += $NF } END { printf "%d", n }'
}
# timed CMD...: runs CMD in this shell (it may wait for our children),
# and sets T to its wall time in seconds.
timed() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null
	t1=$(date +%s.%N)
	T=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}
rate() { awk -v s="$1" -v m="$SIZE_MIB" 'BEGIN { printf "%.1f", m / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

best() { awk -v a="$1" -v b="${2:-0}" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }

# luksd: volumes of SIZE_MIB after their 16 MiB header.
printf 'bench passphrase' >"$work/pass"
format() {
	"$LUKSD" luksFormat -q --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --device-size $((SIZE_MIB + 16))M \
		--key-file "$work/pass" "$@"
}
serve() {
	"${SERVE_LUKSD:-$LUKSD}" serve --socket "$work/luksd.sock" --key-file "$work/pass" "$1" 2>>"$work/luksd.log" &
	serve_pid=$!
	pids+=("$serve_pid")
	for _ in $(seq 100); do [ -S "$work/luksd.sock" ] && return; sleep 0.1; done
	echo "s3.sh: luksd serve did not start" >&2; cat "$work/luksd.log" >&2; exit 1
}
unserve() { kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; rm -f "$work/luksd.sock"; }
nbdfio() {
	fio --name="$1" --ioengine=nbd --uri="nbd+unix:///?socket=$work/luksd.sock" --size="${SIZE_MIB}M" "${@:2}"
}

# s3backer: FUSE, its encryption on, the same block size and threads. It
# runs in the foreground (-f) so that a write's time can include its exit:
# it uploads the blocks still dirty once unmounted.
printf 'bench passphrase' >"$work/s3b.pass"
s3b_mount() {
	s3backer -f --baseURL="$AWS_ENDPOINT_URL/" --accessId="$AWS_ACCESS_KEY_ID" --accessKey="$AWS_SECRET_ACCESS_KEY" \
		--prefix=s3backer/ --blockSize=4M --size="${SIZE_MIB}M" --encrypt --passwordFile="$work/s3b.pass" \
		--blockCacheThreads=8 --blockCacheSize=64 --listBlocks bench "$work/mnt" 2>>"$work/s3backer.log" &
	s3b_pid=$!
	pids+=("$s3b_pid")
	for _ in $(seq 100); do [ -e "$work/mnt/file" ] && return; sleep 0.1; done
	echo "s3.sh: s3backer did not mount" >&2; cat "$work/s3backer.log" >&2; exit 1
}
s3b_unmount() { umount "$work/mnt"; wait "$s3b_pid" 2>/dev/null || true; }
s3bfio() { fio --name="$1" --ioengine=libaio --direct=1 --filename="$work/mnt/file" --size="${SIZE_MIB}M" "${@:2}"; }
s3b_write() { s3bfio s3bw --rw=write --bs=1M --iodepth=32 --end_fsync=1 && s3b_unmount; }

# luksd_seq NAME BINARY: sequential write, read and copy with BINARY,
# best so far in bw[NAME-w], bw[NAME-r], bw[NAME-copy].
luksd_seq() {
	SERVE_LUKSD=$2 serve s3://bench/luksd
	timed nbdfio seqw --rw=write --bs=1M --iodepth=32 --end_fsync=1
	bw[$1-w]=$(best "$(rate "$T")" "${bw[$1-w]:-}")
	unserve
	SERVE_LUKSD=$2 serve s3://bench/luksd # a cold cache
	timed nbdfio seqr --rw=read --bs=1M --iodepth=32 --output-format=terse --terse-version=3 --output="$work/fio.terse"
	bw[$1-r]=$(best "$(rate "$T")" "${bw[$1-r]:-}")
	bw[$1-rfio]=$(best "$(awk -F';' '$1 == 3 { printf "%.1f", $7 / 1024 }' "$work/fio.terse")" "${bw[$1-rfio]:-}")
	unserve
	rm -f "$work/copy.img"
	timed "$2" copy -q s3://bench/luksd "$work/copy.img"
	bw[$1-copy]=$(best "$(awk -v s="$T" -v m="$((SIZE_MIB + 16))" 'BEGIN { printf "%.1f", m / s }')" "${bw[$1-copy]:-}")
	rm -f "$work/copy.img"
}

# Warm the store up (its first writes make its volumes), then rounds that
# interleave the three, each keeping its best: the machine is shared.
"$work/s3raw" -bucket bench -prefix warm/ -total $((64 << 20)) >/dev/null
format s3://bench/luksd
declare -A bw
for round in $(seq "${ROUNDS:-2}"); do
	read -r put get < <("$work/s3raw" -bucket bench -prefix "raw$round/" -total $((SIZE_MIB << 20)) \
		-object $((4 << 20)) -parallel 8)
	bw[raw-w]=$(best "$put" "${bw[raw-w]:-}") bw[raw-r]=$(best "$get" "${bw[raw-r]:-}")
	luksd_seq luksd "$LUKSD"
	[ -z "${LUKSD_BEFORE:-}" ] || luksd_seq before "$LUKSD_BEFORE"
	s3b_mount
	timed s3b_write
	bw[s3b-w]=$(best "$(rate "$T")" "${bw[s3b-w]:-}")
	s3b_mount
	timed s3bfio s3br --rw=read --bs=1M --iodepth=32
	bw[s3b-r]=$(best "$(rate "$T")" "${bw[s3b-r]:-}")
	s3b_unmount
	echo "round $round: raw $put/$get, luksd ${bw[luksd-w]}/${bw[luksd-r]} copy ${bw[luksd-copy]}," \
		"s3backer ${bw[s3b-w]}/${bw[s3b-r]}${LUKSD_BEFORE:+, before ${bw[before-w]}/${bw[before-r]} copy ${bw[before-copy]}}" \
		"MiB/s (best write/read so far)"
done

# 4 KiB random writes, a flush every second from a second connection (a
# flush covers every write before it, whichever connection made it), on a
# volume in 4 MiB chunks and one in 256 KiB chunks.
randwrite() {
	local before rand reqs flusher
	serve "$1"
	before=$(s3requests)
	( while sleep 1; do
		qemu-io -f raw --image-opts "driver=nbd,server.type=unix,server.path=$work/luksd.sock" -c flush >/dev/null 2>&1 || true
	done ) &
	flusher=$!
	rand=$(nbdfio randw --rw=randwrite --bs=4k --iodepth=32 --time_based --runtime="$RUNTIME" --end_fsync=1 \
		--output-format=terse --terse-version=3 | awk -F';' '$1 == 3 { print $49, $47 }')
	kill "$flusher"
	wait "$flusher" 2>/dev/null || true
	read -r iops kib <<<"$rand"
	reqs=$(($(s3requests) - before))
	unserve
	printf '%-22s %8s IOPS %8s requests for %5s MiB written: %s per MiB\n' "$2" "$iops" "$reqs" "$((kib / 1024))" \
		"$(awk -v r="$reqs" -v k="$kib" 'BEGIN { if (k > 0) printf "%.1f", r / (k / 1024); else print "n/a" }')"
}
format --chunk-size 256k s3://bench/small

echo
echo "SeaweedFS on loopback (tmpfs), ${SIZE_MIB} MiB, 4 MiB objects, 8 at once, best of ${ROUNDS:-2}, $(nproc) CPUs"
printf '%-28s %12s %12s\n' "" "write MiB/s" "read MiB/s"
printf '%-28s %12s %12s\n' "aws-sdk-go-v2 PUT/GET" "${bw[raw-w]}" "${bw[raw-r]}"
printf '%-28s %12s %12s\n' "luksd serve (fio nbd)" "${bw[luksd-w]}" "${bw[luksd-r]}"
printf '%-28s %12s %12s\n' "luksd serve, fio's own" "" "${bw[luksd-rfio]}"
printf '%-28s %12s %12s\n' "luksd copy s3:// -> file" "" "${bw[luksd-copy]}"
if [ -n "${LUKSD_BEFORE:-}" ]; then
	printf '%-28s %12s %12s\n' "before: luksd serve" "${bw[before-w]}" "${bw[before-r]}"
	printf '%-28s %12s %12s\n' "before: serve, fio's own" "" "${bw[before-rfio]}"
	printf '%-28s %12s %12s\n' "before: luksd copy" "" "${bw[before-copy]}"
fi
printf '%-28s %12s %12s\n' "s3backer --encrypt (FUSE)" "${bw[s3b-w]}" "${bw[s3b-r]}"
echo
echo "luksd / raw SDK, 1M seq:  write $(ratio "${bw[luksd-w]}" "${bw[raw-w]}")  read $(ratio "${bw[luksd-r]}" "${bw[raw-r]}")  (target >= 0.8)"
echo "luksd / raw SDK, 1M seq read, fio's own figure: $(ratio "${bw[luksd-rfio]}" "${bw[raw-r]}")"
echo "luksd copy / raw SDK GET:  read $(ratio "${bw[luksd-copy]}" "${bw[raw-r]}")"
echo "luksd / s3backer, 1M seq: write $(ratio "${bw[luksd-w]}" "${bw[s3b-w]}")  read $(ratio "${bw[luksd-r]}" "${bw[s3b-r]}")  (target > 1)"
if [ -n "${LUKSD_BEFORE:-}" ]; then
	echo "before / raw SDK, 1M seq: write $(ratio "${bw[before-w]}" "${bw[raw-w]}")  read $(ratio "${bw[before-r]}" "${bw[raw-r]}")  copy $(ratio "${bw[before-copy]}" "${bw[raw-r]}")" \
		" read, fio's own: $(ratio "${bw[before-rfio]}" "${bw[raw-r]}")"
	echo "before / s3backer, 1M seq: write $(ratio "${bw[before-w]}" "${bw[s3b-w]}")  read $(ratio "${bw[before-r]}" "${bw[s3b-r]}")"
fi
echo
echo "luksd, 4k random writes at iodepth 32 for ${RUNTIME}s, an NBD flush every second:"
randwrite s3://bench/luksd "4 MiB chunks"
randwrite s3://bench/small "256 KiB chunks"
