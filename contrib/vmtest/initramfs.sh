#!/usr/bin/env bash
# initramfs.sh builds the VM's initramfs (an uncompressed cpio: the kernel
# unpacks it faster than it could decompress one under TCG).
#
#   initramfs.sh KDIR KVER LUKSD OUT.cpio [TESTS]
#
# KDIR/KVER come from kernel.sh, LUKSD is the luksd binary to test (may be
# missing: scenarios that need it then fail with "luksd missing"), TESTS a
# folder of Go test binaries (*.test) put in /usr/local/lib/luksd-tests.
# Contents:
# busybox-static, the kernel modules the suite needs (decompressed, with an
# ordered load list; dm-delay and dm-flakey for fault scenarios, dm's error
# target is built in), cryptsetup, dmsetup, e2fsprogs, fio, blkid, tangd and jose, nbdkit (file plugin) with their shared
# libraries, luksd, and contrib/vmtest/guest + contrib/vmtest/scenarios.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin

[ $# -eq 4 ] || [ $# -eq 5 ] || { echo "usage: initramfs.sh KDIR KVER LUKSD OUT.cpio [TESTS]" >&2; exit 2; }
kdir=$1 kver=$2 luksd=$3 out=$4 tests=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$out.root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc/vmtest,proc,sys,dev,tmp,run,mnt,out,vmtest}

# Modules, by name, not by alias (an alias like crypto-aes would pull in
# padlock-aes, which cannot load here). Accelerated variants that the
# emulated CPU cannot run just fail to load; the generic ones remain.
modules=(
	nbd ublk_drv loop dm-mod dm-crypt dm-delay dm-flakey
	netfs 9pnet 9pnet_virtio 9p ext4 virtio-rng
	af_alg algif_skcipher algif_hash authenc
	xts essiv aesni-intel sha256-ssse3 crc32c_generic crc32c-intel
	chacha_generic chacha-x86_64 poly1305_generic poly1305-x86_64
	nhpoly1305 nhpoly1305-sse2 nhpoly1305-avx2 adiantum
	# The generic C only: dm-crypt and cryptsetup benchmark then run the
	# kernel code scenario 22 compares luksd with (the SSE2/AVX variants
	# would win where the emulated CPU runs them).
	serpent_generic twofish_generic
)
mdir=lib/modules/$kver
mkdir -p "$root/$mdir"
: >"$root/etc/vmtest/modules.load"
for m in "${modules[@]}"; do
	modprobe -d "$kdir" -S "$kver" --show-depends "$m" | while read -r kind path _; do
		[ "$kind" = insmod ] || continue
		rel=${path#"$kdir/$mdir/"}
		rel=${rel%.xz}
		if [ ! -e "$root/$mdir/$rel" ]; then
			mkdir -p "$(dirname "$root/$mdir/$rel")"
			case $path in
			*.xz) xz -dc "$path" >"$root/$mdir/$rel" ;;
			*) cp "$path" "$root/$mdir/$rel" ;;
			esac
			echo "/$mdir/$rel" >>"$root/etc/vmtest/modules.load"
		fi
	done
done
cp "$kdir/$mdir"/modules.{order,builtin,builtin.modinfo} "$root/$mdir/"
depmod -b "$root" "$kver"

# busybox provides the shell and the small tools; its applets go in /bin so
# that the real tools in /usr/bin, /usr/sbin and /sbin win on PATH.
cp /bin/busybox "$root/bin/busybox"
for a in $(/bin/busybox --list); do
	[ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
done

# Dynamically linked tools and their libraries (same paths as on the host).
# tangd and jose: a tang server inside the VM for unattended unlock.
# nbdkit and its file plugin (at the plugin directory nbdkit was built
# with): a remote NBD server for luksd's nbd:// backend.
tools=(/usr/sbin/cryptsetup /usr/sbin/dmsetup /usr/bin/fio /usr/sbin/blkid /usr/bin/lsblk /usr/bin/findmnt /usr/sbin/e2fsck /usr/sbin/mke2fs /usr/sbin/dumpe2fs /usr/sbin/resize2fs /usr/sbin/fstrim
	/usr/libexec/tangd /usr/bin/jose
	/usr/bin/nbdkit /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-file-plugin.so)
libs=()
for t in "${tools[@]}"; do
	mkdir -p "$root$(dirname "$t")"
	cp -L "$t" "$root$t"
	while read -r lib; do libs+=("$lib"); done < <(ldd "$t" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
# argon2 threads need libgcc_s at pthread_exit time (dlopen'ed by glibc).
libs+=(/lib/x86_64-linux-gnu/libgcc_s.so.1)
for l in $(printf '%s\n' "${libs[@]}" | sort -u); do
	mkdir -p "$root$(dirname "$l")"
	cp -L "$l" "$root$l"
done
ln -s mke2fs "$root/usr/sbin/mkfs.ext4"
ln -s ../usr/sbin/e2fsck "$root/sbin/e2fsck"
mkdir -p "$root/lib64"
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
printf '%s\n' /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/ceph >"$root/etc/ld.so.conf"
# a cache only speeds lookups up: the libraries sit in ld.so's default
# directories, and librados/librbd carry a RUNPATH for ceph/
ldconfig -r "$root" 2>/dev/null || echo "initramfs.sh: ldconfig -r failed (not needed)" >&2
[ -e /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$root/etc/"
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"

if [ -x "$luksd" ]; then
	cp "$luksd" "$root/usr/local/bin/luksd"
fi
if [ -n "$tests" ]; then
	mkdir -p "$root/usr/local/lib/luksd-tests"
	for t in "$tests"/*.test; do
		[ -x "$t" ] && cp "$t" "$root/usr/local/lib/luksd-tests/"
	done
fi

cp -r "$here/guest" "$root/vmtest/guest"
mkdir -p "$root/vmtest/contrib"
cp -r "$here/../unraid" "$root/vmtest/contrib/unraid"
cp -r "$here/scenarios" "$root/vmtest/scenarios"
cp "$here/guest/init" "$root/init"
chmod +x "$root/init"

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) >"$out.tmp"
mv "$out.tmp" "$out"
rm -rf "$root"
