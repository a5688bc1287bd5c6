#!/bin/sh
# 50-fio-verify-nbd: fio 4 KiB random writes with crc32c verification at
# iodepth 32 on a luksd device (/dev/nbdN); after luksd close, fio's
# verify_only pass over the same job reads it all back, first through a new
# luksd, then through the kernel's dm-crypt.
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"

# fio_job DEV [ARGS] runs the randwrite+verify job (fixed seed) on DEV.
fio_job() {
	_dev=$1
	shift
	fio --name=randwrite-verify --filename="$_dev" --ioengine=libaio --direct=1 \
		--rw=randwrite --bs=4k --iodepth=32 --size=16M --randseed=1234 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "$@" >"$SCRATCH/fio.out" 2>&1
}

verified_writes() {
	img=$SCRATCH/img
	mkimage "$img" 40
	cs_format "$img" "$key" "$1" || because "cryptsetup luksFormat failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	fio_job "$dev" || because "fio randwrite+verify on $dev: $(grep -m1 -E 'verify: |error' "$SCRATCH/fio.out")"
	luksd_close vol || because "luksd close failed"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd reopen failed"
	fio_job "$dev" --verify_only || because "fio verify_only after luksd reopen: $(grep -m1 -E 'verify: |error' "$SCRATCH/fio.out")"
	luksd_close vol || because "luksd close failed"
	cs_open "$img" vmt "$key" || because "cryptsetup open failed"
	fio_job /dev/mapper/vmt --verify_only || because "fio verify_only through dm-crypt: $(grep -m1 -E 'verify: |error' "$SCRATCH/fio.out")"
	cs_close vmt || because "cryptsetup close failed"
	rm -f "$img"
}

for label in aes-xts-plain64/512 xchacha12,aes-adiantum-plain64/4096; do
	check "$VMTEST_SCENARIO $label $FRONTEND" verified_writes "$(cipher_line "$label")"
done
