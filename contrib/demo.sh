#!/usr/bin/env bash
# `make demo`: a tour of luksd on a throw-away image. It formats a LUKS2
# volume with a key file, dumps the header, adds a second passphrase, serves
# the volume over NBD on a unix socket, writes and reads data through it
# with the libnbd and qemu tools, and cleans up. It needs no kernel module.
set -euo pipefail
cd "$(dirname "$0")/.."

LUKSD=${LUKSD:-bin/luksd}
[ -x "$LUKSD" ] || { echo "demo: $LUKSD is missing; run 'make build' (or 'make demo')" >&2; exit 1; }
for tool in nbdinfo nbdcopy qemu-io; do
	command -v "$tool" >/dev/null || { echo "demo: $tool is not installed; run 'make deps'" >&2; exit 1; }
done
# Fail clearly when a verb this demo needs is not in this build of luksd.
verbs=$("$LUKSD" --help)
for verb in luksFormat luksDump luksAddKey serve; do
	grep -qE "^   $verb([ ,]|$)" <<<"$verbs" || { echo "demo: this luksd has no '$verb' verb yet" >&2; exit 1; }
done

work=$(mktemp -d)
server=
cleanup() {
	if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
		kill -TERM "$server"
		wait "$server" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

img=$work/demo.img
sock=$work/nbd.sock
umask 077
printf 'correct horse battery staple' >"$work/key1"
printf 'second passphrase' >"$work/key2"

step "an empty 64 MiB image"
truncate -s 64M "$img"
ls -l "$img"

step "luksd luksFormat (LUKS2, aes-xts-plain64, 4096-byte sectors)"
# Cheap PBKDF so the demo is quick; real volumes keep the argon2id default.
"$LUKSD" luksFormat -q --type luks2 --sector-size 4096 --pbkdf pbkdf2 \
	--pbkdf-force-iterations 1000 --key-file "$work/key1" "$img"

step "luksd luksDump"
"$LUKSD" luksDump "$img"

step "luksd luksAddKey (a second passphrase, keyslot 1)"
"$LUKSD" luksAddKey -q --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
	--key-file "$work/key1" "$img" "$work/key2"
"$LUKSD" luksDump "$img" | sed -n '/^Keyslots:/,/^Tokens:/p' | grep -E '^ +[0-9]+: '

step "luksd serve on a unix socket (unlocked with the second passphrase)"
"$LUKSD" serve --socket "$sock" --export-name demo --key-file "$work/key2" "$img" &
server=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "demo: luksd serve did not start" >&2; exit 1; }
uri="nbd+unix:///demo?socket=$sock"

step "nbdinfo $uri"
nbdinfo "$uri"

step "write 8 MiB of random data with nbdcopy (4 connections), read it back"
head -c 8M /dev/urandom >"$work/data"
nbdcopy --connections=4 --flush "$work/data" "$uri"
nbdcopy "$uri" "$work/back"
cmp -n 8388608 "$work/data" "$work/back" && echo "nbdcopy: the 8 MiB read back are identical"

step "qemu-io: 512-byte writes inside 4096-byte sectors, then verify"
qemu-io --image-opts -c 'write -P 0x5a 512 512' -c 'write -P 0xa5 1536 1024' -c flush \
	-c 'read -P 0x5a 512 512' -c 'read -P 0xa5 1536 1024' \
	"driver=nbd,server.type=unix,export=demo,server.path=$sock"

step "the image holds only ciphertext"
offset=$("$LUKSD" luksDump "$img" | awk '/offset: [0-9]+ \[bytes\]/ { print $2; exit }')
if cmp -s <(tail -c +$((offset + 1)) "$img" | head -c 1M) <(head -c 1M "$work/data"); then
	echo "demo: plaintext found in the image!" >&2
	exit 1
fi
echo "the data segment at byte $offset of the image is not the plaintext"

step "stop the server (SIGTERM flushes and exits)"
kill -TERM "$server"
wait "$server"
server=
echo "done; cleaning up $work"
