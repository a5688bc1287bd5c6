#!/bin/sh
# 84-signals-nbd: signals to the daemon while ext4 is mounted on its
# device. For each of SIGTERM, SIGINT and SIGQUIT: the daemon keeps serving
# (files written after the signal sync fine), logs that it waits, and closes
# by itself once the filesystem is unmounted. SIGHUP reopens the log file
# (moved away, as logrotate does) and changes nothing else; close works.
# Afterwards the kernel's dm-crypt opens the image: e2fsck -fn is clean and
# every file is intact. (dm-crypt has no daemon to signal; it is the
# reference for the data.)
# requires: luksd-open-nbd
. /vmtest/guest/lib.sh
FRONTEND=${FRONTEND:-nbd}
require_luksd

key=$SCRATCH/key
mkkey "$key"
mnt=/mnt/vol
mkdir -p "$mnt"
log=/run/luksd/vol.log

running() {
	_st=$(cat /proc/"$1"/stat 2>/dev/null) || return 1
	case ${_st##*) } in Z*) return 1 ;; esac
}

# files DIR N writes N small files into DIR (not synced).
files() {
	mkdir -p "$1"
	_i=0
	while [ $_i -lt "$2" ]; do
		head -c $((_i * 1031 + 5)) /dev/urandom >"$1/f$_i"
		_i=$((_i + 1))
	done
}

signal() {
	sig=$1
	img=$SCRATCH/img
	mkimage "$img" 48
	cs_format "$img" "$key" "$(cipher_line aes-xts-plain64/4096)" || because "cryptsetup luksFormat failed"
	rm -f "$log" "$log.1"
	dev=$(luksd_open "$FRONTEND" "$img" vol "$key") || because "luksd open failed: $(open_failure vol)"
	pid=$(sed -n 's/^pid=//p' /run/luksd/vol/state)
	mkfs.ext4 -q -F "$dev" || because "mkfs.ext4 failed"
	mount -t ext4 "$dev" "$mnt" || because "mount failed"
	files "$mnt/before" 30 # in the page cache, not synced yet
	[ "$sig" = HUP ] && mv "$log" "$log.1"
	kill -"$sig" "$pid"
	sleep 2
	running "$pid" || because "SIG$sig ended the daemon while its device was mounted"
	[ -e /run/luksd/vol/state ] || because "SIG$sig removed the state"
	files "$mnt/after" 20
	sync -f "$mnt" || because "sync after SIG$sig failed: the device is not served"
	(cd "$mnt" && find before after -type f | sort | xargs sha256sum) >"$SCRATCH/manifest"
	if [ "$sig" = HUP ]; then
		grep -q 'vol: hangup: reopened /run/luksd/vol.log' "$log" || because "SIGHUP did not reopen the log: $(cat "$log" 2>/dev/null)"
		umount "$mnt" || because "umount failed$(held_by "$mnt")"
		sleep 2
		running "$pid" || because "the daemon ended after SIGHUP"
		luksd_close vol || because "close after SIGHUP failed"
	else
		grep -q "is in use: serving on, closing once it is released" "$log" || because "no waiting line in the log: $(tail -n2 "$log")"
		umount "$mnt" || because "umount failed$(held_by "$mnt")"
		i=0
		while running "$pid"; do
			i=$((i + 1))
			[ $i -lt 150 ] || because "the daemon did not close within 15 s of the umount"
			usleep 100000
		done
		grep -q "released, detaching" "$log" || because "no release line in the log: $(tail -n2 "$log")"
		tail -n1 "$log" | grep -q 'vol: closed$' || because "the log does not end with the close: $(tail -n1 "$log")"
		[ ! -e /run/luksd/vol ] || because "the state was left behind"
	fi
	cs_open "$img" chk "$key" || because "cryptsetup open failed"
	fsck_clean /dev/mapper/chk "through dm-crypt"
	mount -t ext4 -o ro /dev/mapper/chk "$mnt" || because "mount through dm-crypt failed"
	verify_tree "$mnt" || because "files differ through dm-crypt"
	[ "$(wc -l <"$SCRATCH/manifest")" = 50 ] || because "manifest has $(wc -l <"$SCRATCH/manifest") files, not 50"
	umount "$mnt"
	cs_close chk
}

for sig in TERM INT QUIT HUP; do
	check "$VMTEST_SCENARIO SIG$sig $FRONTEND" signal "$sig"
done
