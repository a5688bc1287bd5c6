#!/bin/sh
# 52-reencrypt-online-nbd: a volume open in luksd (/dev/nbdN) is
# reencrypted from aes-xts-plain64 to xchacha12,aes-adiantum-plain64 by
# its daemon (`luksd reencrypt NAME`) while fio's random writes with
# crc32c verification run on it; fio's verify_only pass then reads it all
# back through luksd, and, after luksd close, through the kernel's
# dm-crypt (cryptsetup open), with no reencryption metadata left. Then
# the same with ext4 mounted on it, files written while the daemon
# rewrites the volume underneath (aes-xts/4096 to Adiantum/4096).
# requires: luksd-reencrypt-online luksd-open-nbd
# timeout: 600
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
to="--cipher xchacha12,aes-adiantum-plain64 --key-size 256 --hotzone-size 256K"

# fio_job DEV [ARGS] runs the randwrite+verify job (fixed seed) on DEV.
fio_job() {
	_dev=$1
	shift
	fio --name=online-verify --filename="$_dev" --ioengine=libaio --direct=1 \
		--rw=randwrite --bs=4k --iodepth=32 --size=48M --randseed=4321 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "$@" >"$SCRATCH/fio.out" 2>&1
}

fio_failure() { grep -m1 -E 'verify: |error' "$SCRATCH/fio.out" || tail -n2 "$SCRATCH/fio.out"; }

# wait_job: until the daemon of vol runs the job luksd reencrypt (pid $rp) handed it.
wait_job() {
	for _ in $(seq 300); do
		luksd status vol | grep -q "running in the daemon" && return 0
		usleep 100000
	done
	because "no online reencryption runs: $(cat "$SCRATCH/reenc.err") $(luksd status vol)"
}

online() {
	img=$SCRATCH/img
	mkimage "$img" 128
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/512)" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	# shellcheck disable=SC2086
	luksd reencrypt --progress-json --key-file "$key" $to vol >"$SCRATCH/reenc.out" 2>"$SCRATCH/reenc.err" &
	rp=$!
	wait_job
	fio_job "$dev" || because "fio randwrite+verify on $dev during the reencryption: $(fio_failure)"
	note "$VMTEST_SCENARIO: when fio's writes were verified: $(luksd status vol | grep reencrypted || echo 'reencryption over')"
	rc=0
	wait "$rp" || rc=$?
	[ "$rc" = 0 ] || because "luksd reencrypt exited $rc: $(cat "$SCRATCH/reenc.err")"
	grep -q '"device_bytes"' "$SCRATCH/reenc.out" || because "luksd reencrypt printed no progress: $(head -c 300 "$SCRATCH/reenc.out")"
	st=$(luksd status vol)
	echo "$st" | grep -q "cipher:  xchacha12,aes-adiantum-plain64" || because "luksd status after the reencryption: $st"
	! echo "$st" | grep -q "reencryption" || because "luksd status still shows a reencryption: $st"
	fio_job "$dev" --verify_only || because "fio verify_only through luksd after the reencryption: $(fio_failure)"
	luksd_close vol || because "luksd close failed"
	dump=$(cryptsetup luksDump "$img")
	! echo "$dump" | grep -q reencrypt || because "reencryption metadata left behind"
	echo "$dump" | grep -q "cipher: xchacha12,aes-adiantum-plain64" || because "the header's segment is not Adiantum"
	cs_open "$img" vmt "$key" || because "cryptsetup open after the online reencryption failed"
	fio_job /dev/mapper/vmt --verify_only || { cs_close vmt; because "fio verify_only through dm-crypt: $(fio_failure)"; }
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img"
}

mounted() {
	img=$SCRATCH/img mnt=$SCRATCH/mnt
	mkimage "$img" 128
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	mkfs.ext4 -q "$dev" || because "mkfs.ext4 on $dev failed"
	mkdir -p "$mnt"
	mount "$dev" "$mnt" || because "mounting $dev failed"
	make_tree "$mnt/before" 100 997
	sync -f "$mnt"
	# shellcheck disable=SC2086
	luksd reencrypt -q --key-file "$key" $to vol 2>"$SCRATCH/reenc.err" &
	rp=$!
	wait_job
	make_tree "$mnt/during" 300 331
	sync -f "$mnt"
	note "$VMTEST_SCENARIO: the tree was written by: $(luksd status vol | grep reencrypted || echo 'reencryption over')"
	rc=0
	wait "$rp" || rc=$?
	[ "$rc" = 0 ] || because "luksd reencrypt under ext4 exited $rc: $(cat "$SCRATCH/reenc.err")"
	save_tree "$mnt" 400
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	drop_caches
	mount "$dev" "$mnt" || because "mounting $dev again failed"
	verify_tree "$mnt" || { umount "$mnt"; because "files differ through luksd after the online reencryption"; }
	umount "$mnt"
	luksd_close vol || because "luksd close failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open after the online reencryption failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt"
	mount -o ro /dev/mapper/vmt "$mnt" || { cs_close vmt; because "mounting through dm-crypt failed"; }
	verify_tree "$mnt" || { umount "$mnt"; cs_close vmt; because "files differ through dm-crypt after the online reencryption"; }
	umount "$mnt"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img"
}

check "$VMTEST_SCENARIO aes-xts to adiantum under fio ($FRONTEND)" online
check "$VMTEST_SCENARIO aes-xts to adiantum under mounted ext4 ($FRONTEND)" mounted
