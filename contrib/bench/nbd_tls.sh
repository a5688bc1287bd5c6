#!/usr/bin/env bash
# Side-by-side NBD-over-TLS benchmark (not a test): 1 MiB sequential reads
# over loopback TCP, read by nbdcopy (libnbd; fio's nbd engine cannot load
# TLS certificates) into null:, one connection with 32 requests in flight,
# from
#   luksd serve --tls=on --tls-verify-peer, read through TLS (client
#                 certificate) and in plaintext: aes-xts-plain64 LUKS2
#   nbdkit file --tls=require --tls-verify-peer   unencrypted file
# all backed by files on tmpfs, best of ROUNDS interleaved runs.
# Targets (issue 13): luksd TLS >= 0.8x luksd without TLS, and ahead of
# nbdkit file with TLS.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZE_MIB=${SIZE_MIB:-512}
ROUNDS=${ROUNDS:-3}
. contrib/bench/lib.sh
bench_start nbd_tls.sh nbdcopy nbdkit cryptsetup openssl

# Certificates as an administrator makes them with openssl (ECDSA keys).
mkdir "$work/server" "$work/client"
ossl() { openssl "$@" 2>/dev/null; }
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
ossl req -x509 "${ec[@]}" -days 1 -subj "/CN=bench CA" -keyout "$work/ca-key.pem" -out "$work/ca-cert.pem"
for role in server client; do
	ossl req "${ec[@]}" -subj "/CN=$role" -keyout "$work/$role/$role-key.pem" -out "$work/$role.csr"
	ext="extendedKeyUsage=clientAuth"
	[ $role = server ] && ext=$'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'
	ossl x509 -req -in "$work/$role.csr" -CA "$work/ca-cert.pem" -CAkey "$work/ca-key.pem" -CAcreateserial \
		-days 1 -extfile <(printf '%s\n' "$ext") -out "$work/$role/$role-cert.pem"
	cp "$work/ca-cert.pem" "$work/$role/"
done

printf 'bench passphrase' >"$work/pass"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$work/plain.img"
head -c $(((SIZE_MIB + 16) << 20)) /dev/urandom >"$work/luks2.img"
cryptsetup luksFormat -q --type luks2 --sector-size 4096 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
	--key-file "$work/pass" "$work/luks2.img"

# Ports: luksd logs the one it got; nbdkit takes a random one.
# start_luksd NAME ARGS... starts a server in the background (not in a
# subshell, so that cleanup can stop it) and sets addr to where it listens.
start_luksd() {
	local name=$1
	shift
	"$LUKSD" serve --listen 127.0.0.1:0 --key-file "$work/pass" "$@" "$work/luks2.img" </dev/null >/dev/null 2>"$work/$name.log" &
	pids+=($!)
	addr=
	for _ in $(seq 100); do
		addr=$(grep -o 'on nbd://[0-9.:]*' "$work/$name.log" | sed 's|on nbd://||' | head -n1 || true)
		[ -n "$addr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] || { echo "nbd_tls.sh: luksd ($name) did not start" >&2; cat "$work/$name.log" >&2; exit 1; }
}
# One server for both (a volume is served by one luksd at a time): with
# --tls=on it takes TLS and plaintext clients on the same data path.
start_luksd luksd --tls=on --tls-certificates "$work/server" --tls-verify-peer
nbdkit_port=$((20000 + RANDOM % 40000))
nbdkit -f -i 127.0.0.1 -p "$nbdkit_port" --tls=require --tls-certificates "$work/server" --tls-verify-peer \
	file "$work/plain.img" &
pids+=($!)
for _ in $(seq 100); do (: </dev/tcp/127.0.0.1/"$nbdkit_port") 2>/dev/null && break; sleep 0.1; done

declare -A uri
uri[luksd-tls]="nbds://$addr/?tls-certificates=$work/client"
uri[luksd-plain]="nbd://$addr/"
uri[nbdkit-tls]="nbds://127.0.0.1:$nbdkit_port/?tls-certificates=$work/client"

# mibs URI: MiB/s of one nbdcopy of the whole export into null:.
mibs() {
	local t0 t1
	t0=$(date +%s%N)
	nbdcopy --connections=1 --requests=32 --request-size=1048576 --no-extents "$1" null:
	t1=$(date +%s%N)
	awk -v n="$SIZE_MIB" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }'
}

declare -A best
order=(luksd-tls luksd-plain nbdkit-tls)
for round in $(seq "$ROUNDS"); do
	order=("${order[@]:1}" "${order[0]}")
	for s in "${order[@]}"; do
		v=$(mibs "${uri[$s]}")
		[ "$v" -gt "${best[$s]:-0}" ] && best[$s]=$v
	done
done
grep -q 'TLS 1.3' "$work/luksd.log" || { echo "nbd_tls.sh: luksd did not log a TLS 1.3 session" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo
echo "nbdcopy 1 MiB requests x32, one TCP connection on loopback, ${SIZE_MIB} MiB on tmpfs, best of $ROUNDS, $(nproc) CPUs"
printf '%-34s %12s\n' server "MiB/s"
printf '%-34s %12s\n' "luksd serve, TLS" "${best[luksd-tls]}"
printf '%-34s %12s\n' "luksd serve (plaintext)" "${best[luksd-plain]}"
printf '%-34s %12s\n' "nbdkit file --tls=require" "${best[nbdkit-tls]}"
echo
echo "luksd TLS / luksd plaintext:    $(ratio "${best[luksd-tls]}" "${best[luksd-plain]}")  (target >= 0.8)"
echo "luksd TLS / nbdkit file TLS:    $(ratio "${best[luksd-tls]}" "${best[nbdkit-tls]}")  (target > 1)"
