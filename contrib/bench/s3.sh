#!/usr/bin/env bash
# Side-by-side S3 benchmark (not a test), all against one SeaweedFS (weed)
# on loopback, its data on tmpfs:
#   raw        aws-sdk-go-v2 alone (contrib/bench/s3raw): PUT, then GET, of
#              4 MiB objects, 8 at once: the ceiling the store and client allow
#              (its PUTs unsigned over http with their CRC32, as luksd's)
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
# a 256 MiB run); s3raw times its requests alone. So luksd's are also
# given as fio reports them (first request to last, the final flush
# included for writes), the measure that compares with s3raw's.
# Then 4 KiB random writes at iodepth 32 through luksd with an NBD flush
# every second: IOPS, and the store's requests per MiB written (weed's
# metrics count them), all flushed by the end; on a volume in 4 MiB
# chunks and one in 256 KiB chunks.
# Every measure runs once per round (ROUNDS, default 2), the rounds
# interleave them all, and each keeps its best: the machine is shared.
# Targets (issue 12): luksd >= 0.8x raw sequential, ahead of s3backer.
# Each read through luksd also prints the store requests it made (weed's
# metrics): one GET per chunk when nothing is loaded twice.
# AWS_RESPONSE_CHECKSUM_VALIDATION=when_required (the SDK's setting)
# reaches luksd and s3raw alike: both then skip the GETs' CRC32 check.
# LUKSD_BEFORE=PATH (another build of luksd, e.g. of main) adds its
# sequential write, read and copy to each round, for a before/after in
# one run. SEQ_ONLY=1 runs the sequential measures alone (no s3backer,
# no random writes): a quicker before/after of the read and write paths.
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
weed_pid=$!
pids+=("$weed_pid")
for _ in $(seq 120); do "$work/s3raw" -bucket bench -create 2>/dev/null && break; sleep 0.5; done

# cpu_of PID prints the CPU seconds (user + system) process PID has used.
cpu_of() { awk '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / 100 }' "/proc/$1/stat"; }
# timed CMD...: runs CMD in this shell (it may wait for our children),
# and sets T to its wall time in seconds, C to the CPU seconds of CMD and
# the children it waited for (fio, s3raw), W to weed's meanwhile.
timed() {
	local rc=0 w0 u s TIMEFORMAT='%3R %3U %3S'
	w0=$(cpu_of "$weed_pid")
	{ time "$@" >/dev/null 2>&4 || rc=$?; } 4>&2 2>"$work/time"
	read -r T u s <"$work/time"
	C=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
	W=$(awk -v a="$w0" -v b="$(cpu_of "$weed_pid")" 'BEGIN { printf "%.2f", b - a }')
	return "$rc"
}
# cpuline WHAT MIB: one line of the run just timed: its rate, the CPU
# seconds of weed, of luksd (L: the serve's whole life, or the copy's)
# and of the client (fio, s3raw), and the load.
cpuline() {
	printf '  %-22s %7s MiB/s  CPU s: weed %5s  luksd %5s  client %5s  load %s\n' "$1" \
		"$(awk -v s="$T" -v m="$2" 'BEGIN { printf "%.1f", m / s }')" "$W" "${L:--}" "$C" \
		"$(cut -d' ' -f1 /proc/loadavg)"
}

rate() { awk -v s="$1" -v m="$SIZE_MIB" 'BEGIN { printf "%.1f", m / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

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
# unserve stops the serve, its CPU seconds in L.
unserve() {
	L=$(cpu_of "$serve_pid")
	kill "$serve_pid"
	wait "$serve_pid" 2>/dev/null || true
	rm -f "$work/luksd.sock"
}
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
s3b_write() { s3bfio s3bw --rw=write --bs=1M --iodepth=32 --end_fsync=1 2>>"$work/s3backer.log" && s3b_unmount; }

# fiobw FILE FIELD: a field of fio's terse (version 3) output, in MiB/s
# for the bandwidth fields (7 read, 48 write: fio's own figure, first
# request to last).
fiobw() { awk -F';' -v f="$2" '$1 == 3 { printf "%.1f", $f / 1024 }' "$1"; }

# s3backer_seq: s3backer's sequential write and read, best so far in
# bw[s3b-w] and bw[s3b-r]; a run that fails (its log says why) leaves
# "failed" and the others go on.
s3backer_seq() {
	local rc=0
	s3b_mount
	timed s3b_write || rc=$?
	if [ "$rc" = 0 ]; then
		bw[s3b-w]=$(best "$(rate "$T")" "${bw[s3b-w]:-}")
		L=- cpuline "s3backer write" "$SIZE_MIB"
		s3b_mount
		timed s3bfio s3br --rw=read --bs=1M --iodepth=32 2>>"$work/s3backer.log" || rc=$?
		s3b_unmount
		L=- cpuline "s3backer read" "$SIZE_MIB"
	else
		umount "$work/mnt" 2>/dev/null || true
		wait "$s3b_pid" 2>/dev/null || true
	fi
	if [ "$rc" = 0 ]; then
		bw[s3b-r]=$(best "$(rate "$T")" "${bw[s3b-r]:-}")
	else
		echo "s3.sh: s3backer failed (exit $rc), see its log:" >&2
		tail -3 "$work/s3backer.log" >&2
		bw[s3b-w]=${bw[s3b-w]:-failed} bw[s3b-r]=${bw[s3b-r]:-failed}
	fi
}

# luksd_seq NAME BINARY: sequential write, read and copy with BINARY,
# best so far in bw[NAME-w], bw[NAME-r], bw[NAME-copy] (wall times) and
# bw[NAME-wfio], bw[NAME-rfio] (fio's own).
luksd_seq() {
	SERVE_LUKSD=$2 serve s3://bench/luksd
	timed nbdfio seqw --rw=write --bs=1M --iodepth=32 --end_fsync=1 \
		--output-format=terse --terse-version=3 --output="$work/fio.terse"
	bw[$1-w]=$(best "$(rate "$T")" "${bw[$1-w]:-}")
	bw[$1-wfio]=$(best "$(fiobw "$work/fio.terse" 48)" "${bw[$1-wfio]:-}")
	unserve
	cpuline "$1 write (fio $(fiobw "$work/fio.terse" 48))" "$SIZE_MIB"
	SERVE_LUKSD=$2 serve s3://bench/luksd # a cold cache
	local reqs
	reqs=$(s3requests)
	timed nbdfio seqr --rw=read --bs=1M --iodepth=32 --output-format=terse --terse-version=3 --output="$work/fio.terse"
	reqs=$(($(s3requests) - reqs))
	bw[$1-r]=$(best "$(rate "$T")" "${bw[$1-r]:-}")
	bw[$1-rfio]=$(best "$(fiobw "$work/fio.terse" 7)" "${bw[$1-rfio]:-}")
	unserve
	cpuline "$1 read (fio $(fiobw "$work/fio.terse" 7))" "$SIZE_MIB"
	echo "    its store requests: $reqs for $((SIZE_MIB / 4)) chunks of 4 MiB"
	rm -f "$work/copy.img"
	timed "$2" copy -q s3://bench/luksd "$work/copy.img"
	bw[$1-copy]=$(best "$(awk -v s="$T" -v m="$((SIZE_MIB + 16))" 'BEGIN { printf "%.1f", m / s }')" "${bw[$1-copy]:-}")
	L=$C C=-
	cpuline "$1 copy" $((SIZE_MIB + 16))
	rm -f "$work/copy.img"
}

# s3rawto FILE ARGS...: s3raw with ARGS, its output in FILE.
s3rawto() { "$work/s3raw" "${@:2}" >"$1"; }

# s3requests prints how many S3 requests weed has served.
s3requests() {
	curl -s "http://127.0.0.1:${ports[9]}/metrics" |
		awk '/^SeaweedFS_s3_request_total/ { n += $NF } END { printf "%d", n }'
}

# randwrite VOLUME NAME: 4 KiB random writes at iodepth 32 for RUNTIME
# seconds, a flush every second from a second connection (a flush covers
# every write before it, whichever connection made it), then a last
# flush; the store's requests from the serve's start to its end (weed's
# metrics) per MiB written. The run with the best IOPS so far is kept in
# rw[NAME-iops], rw[NAME-mib], rw[NAME-reqs].
randwrite() {
	local before rand reqs flusher iops kib
	serve "$1"
	before=$(s3requests)
	(while sleep 1; do
		qemu-io -f raw --image-opts "driver=nbd,server.type=unix,server.path=$work/luksd.sock" -c flush >/dev/null 2>&1 || true
	done) &
	flusher=$!
	rand=$(nbdfio randw --rw=randwrite --bs=4k --iodepth=32 --time_based --runtime="$RUNTIME" --end_fsync=1 \
		--output-format=terse --terse-version=3 | awk -F';' '$1 == 3 { print $49, $47 }')
	kill "$flusher"
	wait "$flusher" 2>/dev/null || true
	unserve
	read -r iops kib <<<"$rand"
	reqs=$(($(s3requests) - before))
	if [ "$(best "$iops" "${rw[$2-iops]:-}")" = "$iops" ]; then
		rw[$2-iops]=$iops rw[$2-mib]=$(awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }') rw[$2-reqs]=$reqs
	fi
}

# Warm the store up (its first writes make its volumes), then rounds that
# interleave them all, each keeping its best: the machine is shared.
"$work/s3raw" -bucket bench -prefix warm/ -total $((64 << 20)) >/dev/null
format s3://bench/luksd
format --chunk-size 256k s3://bench/small
declare -A bw rw
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "${ROUNDS:-2}"); do
	# The SDK's PUTs, then its GETs, each run apart for its CPU; the
	# rates are s3raw's own (its requests alone).
	raw=(-bucket bench -prefix "raw$round/" -total $((SIZE_MIB << 20)) -object $((4 << 20)) -parallel 8)
	timed s3rawto "$work/raw.out" "${raw[@]}" -get=false
	read -r put _ <"$work/raw.out"
	L=- cpuline "SDK PUT (own $put)" "$SIZE_MIB"
	timed s3rawto "$work/raw.out" "${raw[@]}" -put=false
	read -r _ get <"$work/raw.out"
	L=- cpuline "SDK GET (own $get)" "$SIZE_MIB"
	bw[raw-w]=$(best "$put" "${bw[raw-w]:-}") bw[raw-r]=$(best "$get" "${bw[raw-r]:-}")
	luksd_seq luksd "$LUKSD"
	[ -z "${LUKSD_BEFORE:-}" ] || luksd_seq before "$LUKSD_BEFORE"
	if [ -z "${SEQ_ONLY:-}" ]; then
		s3backer_seq
		randwrite s3://bench/luksd big
		randwrite s3://bench/small small
	fi
	echo "round $round: raw $put/$get, luksd ${bw[luksd-w]}/${bw[luksd-r]} copy ${bw[luksd-copy]}," \
		"s3backer ${bw[s3b-w]:-}/${bw[s3b-r]:-}${LUKSD_BEFORE:+, before ${bw[before-w]}/${bw[before-r]} copy ${bw[before-copy]}}" \
		"MiB/s, randwrite ${rw[big-iops]:-}/${rw[small-iops]:-} IOPS (best so far), load $(cut -d' ' -f1 /proc/loadavg)"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

row() { printf '%-30s %12s %12s\n' "$@"; }
echo
echo "SeaweedFS on loopback (tmpfs), ${SIZE_MIB} MiB, 4 MiB objects, 8 at once, best of ${ROUNDS:-2} interleaved rounds,"
echo "$(nproc) CPUs, load average $load0 before, $load1 after"
row "" "write MiB/s" "read MiB/s"
row "aws-sdk-go-v2 PUT/GET" "${bw[raw-w]}" "${bw[raw-r]}"
row "luksd serve, fio wall time" "${bw[luksd-w]}" "${bw[luksd-r]}"
row "luksd serve, fio's own" "${bw[luksd-wfio]}" "${bw[luksd-rfio]}"
row "luksd copy s3:// -> file" "" "${bw[luksd-copy]}"
if [ -n "${LUKSD_BEFORE:-}" ]; then
	row "before: serve, fio wall time" "${bw[before-w]}" "${bw[before-r]}"
	row "before: serve, fio's own" "${bw[before-wfio]}" "${bw[before-rfio]}"
	row "before: luksd copy" "" "${bw[before-copy]}"
fi
row "s3backer --encrypt (FUSE)" "${bw[s3b-w]:-}" "${bw[s3b-r]:-}"
echo
echo "1 MiB sequential, ratios (targets: >= 0.8 of the SDK, > 1 of s3backer):"
row "" "write" "read"
row "luksd / SDK, wall time" "$(ratio "${bw[luksd-w]}" "${bw[raw-w]}")" "$(ratio "${bw[luksd-r]}" "${bw[raw-r]}")"
row "luksd / SDK, fio's own" "$(ratio "${bw[luksd-wfio]}" "${bw[raw-w]}")" "$(ratio "${bw[luksd-rfio]}" "${bw[raw-r]}")"
row "luksd copy / SDK GET" "" "$(ratio "${bw[luksd-copy]}" "${bw[raw-r]}")"
row "luksd / s3backer, wall time" "$(ratio "${bw[luksd-w]}" "${bw[s3b-w]:-}")" "$(ratio "${bw[luksd-r]}" "${bw[s3b-r]:-}")"
if [ -n "${LUKSD_BEFORE:-}" ]; then
	row "before / SDK, wall time" "$(ratio "${bw[before-w]}" "${bw[raw-w]}")" "$(ratio "${bw[before-r]}" "${bw[raw-r]}")"
	row "before / SDK, fio's own" "$(ratio "${bw[before-wfio]}" "${bw[raw-w]}")" "$(ratio "${bw[before-rfio]}" "${bw[raw-r]}")"
	row "before copy / SDK GET" "" "$(ratio "${bw[before-copy]}" "${bw[raw-r]}")"
	row "luksd / before, wall time" "$(ratio "${bw[luksd-w]}" "${bw[before-w]}")" "$(ratio "${bw[luksd-r]}" "${bw[before-r]}")"
fi
[ -z "${SEQ_ONLY:-}" ] || exit 0
echo
echo "luksd, 4 KiB random writes at iodepth 32 for ${RUNTIME}s, an NBD flush every second (best IOPS of ${ROUNDS:-2}):"
for name in big small; do
	label="4 MiB chunks"
	[ "$name" = big ] || label="256 KiB chunks"
	printf '%-16s %8s IOPS  %6s store requests for %6s MiB written and flushed: %s per MiB\n' "$label" \
		"${rw[$name-iops]}" "${rw[$name-reqs]}" "${rw[$name-mib]}" \
		"$(awk -v r="${rw[$name-reqs]}" -v m="${rw[$name-mib]}" 'BEGIN { if (m > 0) printf "%.1f", r / m; else print "n/a" }')"
done
