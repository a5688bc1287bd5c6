#!/bin/sh
# 48-ext4-s3-nbd: a filesystem on an S3 volume. A real SeaweedFS (weed, from
# the 9p share) serves S3 on the VM's loopback; luksd luksFormat makes an
# s3:// volume in 1 MiB chunks and opens it as /dev/nbdN; mkfs.ext4, a big
# file and a tree of small ones, sync, umount, close; reopen: e2fsck -fn
# clean, every file intact; then `luksd copy` moves the ciphertext to an
# image file, which the kernel's dm-crypt opens: e2fsck clean, files intact.
# requires: luksd-open-nbd luksd-format
# timeout: 600
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

weed=$SCRATCH/weed.bin
key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"
loc=s3://vmtest/vol

# The store sees loopback only: the VM has no network device.
export AWS_ENDPOINT_URL=http://127.0.0.1:8333 AWS_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=vmtest AWS_SECRET_ACCESS_KEY=vmtest-secret-key \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true \
	LUKSD_S3_CACHE_MIB=64 LUKSD_S3_DIRTY_MIB=32

# start_weed runs weed server on loopback (data on tmpfs) and makes the
# bucket; the S3 gateway checks the one identity.
start_weed() {
	ip link set lo up
	mkdir -p "$SCRATCH/weed"
	printf '{"identities":[{"name":"vm","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
		"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$SCRATCH/weed/s3.json"
	"$weed" server -dir "$SCRATCH/weed" -ip 127.0.0.1 -ip.bind 127.0.0.1 -s3 -s3.port 8333 \
		-master.telemetry=false -s3.port.iceberg 0 -s3.port.lance 0 -master.volumeSizeLimitMB 64 \
		-volume.max 0 -s3.config "$SCRATCH/weed/s3.json" >"$SCRATCH/weed.log" 2>&1 &
	echo $! >"$SCRATCH/weed.pid"
	# Each `weed shell` is a slow start under TCG: wait for the S3 port
	# first.
	i=0
	until wget -S -O /dev/null http://127.0.0.1:8333/ 2>&1 | grep -q "HTTP/"; do
		i=$((i + 1))
		[ $i -lt 300 ] || { tail -n5 "$SCRATCH/weed.log"; return 1; }
		sleep 1
	done
	say "weed listens"
	i=0
	until echo "s3.bucket.create -name vmtest" | "$weed" shell -master 127.0.0.1:9333 2>&1 | grep -q "created bucket vmtest"; do
		i=$((i + 1))
		[ $i -lt 30 ] || { tail -n5 "$SCRATCH/weed.log"; return 1; }
		sleep 2
	done
}

stop_weed() { [ -e "$SCRATCH/weed.pid" ] && kill "$(cat "$SCRATCH/weed.pid")" 2>/dev/null; rm -f "$SCRATCH/weed.pid"; }
trap stop_weed EXIT

s3volume() {
	# From the 9p share (cache=none) to tmpfs: weed's pages then fault in
	# from memory.
	cp /out/bin/weed "$weed" || because "weed missing from the 9p share (contrib/s3/seaweedfs.sh, make deps)"
	say "weed copied"
	start_weed || because "weed server did not serve S3 on loopback"
	say "weed serves S3"
	luksd luksFormat -q $PBKDF_ARGS --device-size 64M --chunk-size 1M --key-file "$key" "$loc" ||
		because "luksd luksFormat --device-size of $loc failed"
	say "formatted"
	dev=$(luksd_open "$FRONTEND" "$loc" vol "$key") || because "luksd open of $loc failed: $(open_failure vol)"
	say "opened"
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 on $dev failed"
	mount -t ext4 "$dev" "$mnt" || because "mounting $dev failed"
	say "mounted"
	mkpattern "$mnt/big.bin" 8
	make_tree "$mnt/tree" 100 197
	save_tree "$mnt" 101
	sync -f "$mnt"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"
	say "written and closed"

	dev=$(luksd_open "$FRONTEND" "$loc" vol "$key") || because "luksd reopen failed: $(open_failure vol)"
	drop_caches
	fsck_clean "$dev" "through luksd"
	mount -t ext4 -o ro "$dev" "$mnt" || because "mounting $dev after reopen failed"
	verify_tree "$mnt" || because "files differ after luksd close and reopen"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	luksd_close vol || because "luksd close failed"

	say "verified through luksd"
	luksd copy -q "$loc" "$SCRATCH/copy.img" || because "luksd copy $loc to a file failed"
	say "copied"
	cs_open "$SCRATCH/copy.img" vmt "$key" || because "cryptsetup open of the copy failed"
	fsck_clean /dev/mapper/vmt "through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/vmt "$mnt" || because "mounting the copy through dm-crypt failed"
	verify_tree "$mnt" || because "files read through dm-crypt from the copy differ"
	umount "$mnt" || because "umount failed$(held_by "$mnt")"
	cs_close vmt || because "cryptsetup close failed"
}

check "$VMTEST_SCENARIO aes-xts-plain64/4096 $FRONTEND" s3volume
