#!/bin/sh
# 57-clevis-unattended-nbd: a volume unlocked with no passphrase anywhere.
# A real tangd serves on the VM's loopback (busybox nc runs it per
# connection, as inetd would); luksd binds the volume to it with
# `luksd clevis bind`, then opens it by its clevis token alone
# (--token-only, stdin closed, no key file) as /dev/nbdN and mounts the
# ext4 made through dm-crypt. With tang stopped, the same open fails and
# says why; the kernel's dm-crypt reads what luksd wrote.
# requires: luksd-open-nbd luksd-tokens
. /vmtest/guest/lib.sh
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

start_tang() {
	db=$SCRATCH/tang
	mkdir -p "$db"
	[ -e "$db/sig.jwk" ] || jose jwk gen -i '{"alg":"ES512"}' -o "$db/sig.jwk"
	[ -e "$db/exc.jwk" ] || jose jwk gen -i '{"alg":"ECMR"}' -o "$db/exc.jwk"
	nc -ll -p 7500 -e /usr/libexec/tangd "$db" &
	TANG=$!
	usleep 300000
}

unattended() {
	img=$SCRATCH/img
	mkimage "$img" 64
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	mkfs.ext4 -q -F /dev/mapper/vmt || because "mkfs.ext4 failed"
	mount -t ext4 /dev/mapper/vmt "$mnt" && mkpattern "$mnt/data" 3 && sum=$(sum_of "$mnt/data") && umount "$mnt" ||
		because "writing through dm-crypt failed"
	cs_close vmt

	start_tang
	luksd clevis bind -y -k "$key" -d "$img" tang '{"url":"http://127.0.0.1:7500"}' || because "luksd clevis bind failed"
	luksd clevis list -d "$img" | grep -q "tang '{\"url\":\"http://127.0.0.1:7500\"}'" || because "clevis list shows no binding"

	dev=$(luksd_open nbd "$img" vol /dev/null --token-only </dev/null) || because "open by token failed: $(open_failure vol)"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	[ "$(sum_of "$mnt/data")" = "$sum" ] || because "the file differs through luksd"
	mkpattern "$mnt/more" 2
	more=$(sum_of "$mnt/more")
	sync -f "$mnt"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"

	kill "$TANG" 2>/dev/null
	wait "$TANG" 2>/dev/null || true
	if luksd open --token-only --frontend nbd "$img" vol2 </dev/null >"$SCRATCH/down.out" 2>&1; then
		luksd close vol2
		because "opened with tang down"
	fi
	grep -q "tang server http://127.0.0.1:7500" "$SCRATCH/down.out" || because "tang down: $(head -n1 "$SCRATCH/down.out")"

	cs_open "$img" vmt "$key" || because "cryptsetup open after luksd failed"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mounting through dm-crypt failed"
	[ "$(sum_of "$mnt/more")" = "$more" ] || because "dm-crypt reads another file than luksd wrote"
	umount "$mnt"
	cs_close vmt
	rm -f "$img"
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096 nbd" unattended "$(cipher_line aes-xts-plain64/4096)"
