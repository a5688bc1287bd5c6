#!/bin/sh
# lib.sh: helpers for vmtest scenarios (sourced by each scenario).
#
# Results: pass NAME / fail NAME WHY write "PASS NAME" / "FAIL NAME: WHY" to the
# suite summary. NAME names the scenario, the cipher and the frontend, e.g.
# "10-dmcrypt-baseline aes-xts-plain64/512 dm-crypt".

# Cheap key derivation: TCG is slow and the PBKDF is not what is tested here.
PBKDF_ARGS="--pbkdf pbkdf2 --pbkdf-force-iterations 1000"

# CIPHERS lists the cipher setups every cross-check covers, one a line:
#   label|LUKS type|cipher|key bits|sector bytes
CIPHERS='aes-xts-plain64/512|luks2|aes-xts-plain64|512|512
aes-xts-plain64/4096|luks2|aes-xts-plain64|512|4096
xchacha12,aes-adiantum-plain64/512|luks2|xchacha12,aes-adiantum-plain64|256|512
xchacha12,aes-adiantum-plain64/4096|luks2|xchacha12,aes-adiantum-plain64|256|4096
xchacha20,aes-adiantum-plain64/512|luks2|xchacha20,aes-adiantum-plain64|256|512
aes-cbc-essiv:sha256/luks1|luks1|aes-cbc-essiv:sha256|256|512'

# cipher_field LINE N prints field N (1 label, 2 type, 3 cipher, 4 key bits,
# 5 sector size) of a CIPHERS line.
cipher_field() { echo "$1" | cut -d'|' -f"$2"; }

# cipher_line LABEL prints the CIPHERS line with that label.
cipher_line() { echo "$CIPHERS" | grep -F "$1|" | head -n1; }

SCRATCH=${VMTEST_SCRATCH:-/tmp}
RESULT=${VMTEST_RESULT:-/dev/null}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

say() { echo "[$(uptime_s)] $*"; }

record() {
	echo "$1" >>/out/summary
	echo "$1" >>"$RESULT"
	echo "$1"
	[ "${VMTEST_VERBOSE:-0}" = 1 ] || echo "$1" >/dev/console
}

# note TEXT reports a measurement or remark: an "INFO TEXT" line in the
# summary and on the console (neither a PASS nor a FAIL).
note() { record "INFO $*"; }

# pass NAME
pass() { record "PASS $*"; }

# fail NAME WHY...
fail() {
	n=$1
	shift
	record "FAIL $n: $*"
}

# mkkey FILE writes a passphrase file (no trailing newline).
mkkey() { printf 'vmtest-%s' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$1"; }

# mkpattern FILE MiB writes MiB of random data: the known pattern.
mkpattern() { head -c $(($2 * 1048576)) /dev/urandom >"$1"; }

# mkimage FILE MiB creates a sparse image file.
mkimage() { rm -f "$1" && truncate -s "$2M" "$1"; }

# write_at DEV FILE OFFSET_MiB writes FILE into DEV at OFFSET_MiB, synced.
write_at() { dd if="$2" of="$1" bs=1M seek="$3" conv=fsync,notrunc 2>/dev/null; }

# sum_at DEV OFFSET_MiB LEN_MiB prints the sha256 of that range of DEV.
sum_at() { dd if="$1" bs=1M skip="$2" count="$3" iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1; }

# same_data DEV LAST: DEV holds $SCRATCH/head at MiB 0 and $SCRATCH/tail at
# MiB LAST (write_data wrote them).
same_data() {
	[ "$(sum_at "$1" 0 4)" = "$(sum_of "$SCRATCH/head")" ] || because "first 4 MiB through $1 differ"
	[ "$(sum_at "$1" "$2" 1)" = "$(sum_of "$SCRATCH/tail")" ] || because "last MiB through $1 differs"
}

# write_data DEV writes $SCRATCH/head (4 MiB) at MiB 0 and $SCRATCH/tail (1
# MiB) in DEV's last MiB, and prints that MiB.
write_data() {
	_last=$(($(blockdev --getsize64 "$1") / 1048576 - 1))
	write_at "$1" "$SCRATCH/head" 0 && write_at "$1" "$SCRATCH/tail" "$_last" && echo "$_last"
}

# sum_of FILE prints the sha256 of FILE.
sum_of() { sha256sum "$1" | cut -d' ' -f1; }

# size_mib DEV prints DEV's size in MiB (rounded down).
size_mib() { echo $(($(blockdev --getsize64 "$1") / 1048576)); }

# data_offset_mib IMAGE prints where the encrypted data starts in IMAGE, in MiB.
data_offset_mib() {
	cryptsetup luksDump "$1" | awk '
		/^Payload offset:/ { print int($3 * 512 / 1048576); found = 1; exit }
		/^Data segments:/ { seg = 1 }
		seg && $1 == "offset:" { print int($2 / 1048576); found = 1; exit }
		END { exit !found }'
}

# make_tree DIR N STEP: N files of random bytes in ten folders below DIR,
# file i holding i*STEP+1 bytes (small files of many sizes, as a real tree).
make_tree() {
	_i=0
	while [ $_i -lt "$2" ]; do
		mkdir -p "$1/d$((_i % 10))"
		head -c $((_i * $3 + 1)) /dev/urandom >"$1/d$((_i % 10))/f$_i"
		_i=$((_i + 1))
	done
}

# save_tree DIR COUNT: the sums of every file below DIR (lost+found aside)
# to $SCRATCH/manifest; fails unless there are COUNT files.
save_tree() {
	(cd "$1" && find . -type f ! -path './lost+found/*' | sort | xargs sha256sum) >"$SCRATCH/manifest"
	[ "$(wc -l <"$SCRATCH/manifest")" = "$2" ] || because "wrote $(wc -l <"$SCRATCH/manifest") files, not $2"
}

# verify_tree DIR: every file in $SCRATCH/manifest is intact below DIR.
verify_tree() { (cd "$1" && sha256sum -c -s "$SCRATCH/manifest"); }

# fsck_clean DEV WHAT: e2fsck -fn finds DEV clean, else the check ends
# with its last line.
fsck_clean() {
	e2fsck -fn "$1" >"$SCRATCH/fsck.out" 2>&1 || because "e2fsck -fn $2: $(tail -n1 "$SCRATCH/fsck.out")"
}

# drop_caches drops clean cached pages (callers have fsynced what they
# wrote; a global sync could hang on a device an earlier check left dead).
drop_caches() { echo 3 >/proc/sys/vm/drop_caches; }

# cs_format IMAGE KEY LINE [ARGS...] formats IMAGE with cryptsetup for a
# CIPHERS line, with extra luksFormat ARGS.
cs_format() {
	_img=$1 _key=$2 _line=$3
	shift 3
	_type=$(cipher_field "$_line" 2)
	set -- --type "$_type" --cipher "$(cipher_field "$_line" 3)" --key-size "$(cipher_field "$_line" 4)" "$@"
	[ "$_type" = luks1 ] || set -- --sector-size "$(cipher_field "$_line" 5)" "$@"
	# shellcheck disable=SC2086
	cryptsetup luksFormat -q --key-file "$_key" $PBKDF_ARGS "$@" "$_img"
}

# cs_open IMAGE NAME KEY opens IMAGE with the kernel's dm-crypt as /dev/mapper/NAME.
cs_open() { cryptsetup open --key-file "$3" "$1" "$2"; }

cs_close() { cryptsetup close "$1"; }

have_luksd() { command -v luksd >/dev/null 2>&1; }

# luksd_open FRONTEND IMAGE NAME KEY [ARGS...] opens IMAGE with luksd and
# prints the block device. It works whether `luksd open` detaches (prints the
# device and exits) or stays in the foreground (prints it and keeps serving).
luksd_open() {
	_fe=$1 _img=$2 _name=$3 _key=$4
	shift 4
	_out=$SCRATCH/luksd-open.$_name
	rm -f "$_out.pid" "$_out.why"
	: >"$_out.out"
	: >"$_out.err"
	luksd open --key-file "$_key" --frontend "$_fe" "$@" "$_img" "$_name" >"$_out.out" 2>"$_out.err" &
	_pid=$!
	_i=0
	_dev=
	while :; do
		_alive=0
		kill -0 "$_pid" 2>/dev/null && _alive=1
		_dev=$(grep -o '/dev/[^ ]*' "$_out.out" | head -n1 || true)
		[ -n "$_dev" ] && break
		if [ "$_alive" = 0 ]; then
			_rc=0
			wait "$_pid" || _rc=$?
			echo "luksd open exited $_rc without a device: $(cat "$_out.err" "$_out.out" | head -n3 | tr '\n' ' ')" | tee "$_out.why" >&2
			return 1
		fi
		_i=$((_i + 1))
		if [ "$_i" -gt 600 ]; then
			kill -9 "$_pid" 2>/dev/null || true
			echo "luksd open printed no device within 60s" | tee "$_out.why" >&2
			return 1
		fi
		usleep 100000
	done
	kill -0 "$_pid" 2>/dev/null && echo "$_pid" >"$_out.pid"
	# the device is usable once the kernel knows its size
	_i=0
	while [ "$(timeout 10 blockdev --getsize64 "$_dev" 2>/dev/null || echo 0)" = 0 ]; do
		_i=$((_i + 1))
		if [ "$_i" -gt 300 ]; then
			echo "$_dev still has size 0 after 30s" | tee "$_out.why" >&2
			return 1
		fi
		usleep 100000
	done
	say "luksd serves $_img as $_dev (frontend $_fe, name $_name$([ -e "$_out.pid" ] && echo ", foreground pid $_pid"))" >&2
	echo "$_dev"
}

# open_failure NAME prints why the last luksd_open of NAME failed.
open_failure() { cat "$SCRATCH/luksd-open.$1.why" 2>/dev/null || true; }

# luksd_close NAME closes a luksd device and waits for a foreground daemon.
luksd_close() {
	luksd close "$1" || return 1
	_p=$SCRATCH/luksd-open.$1.pid
	if [ -e "$_p" ]; then
		_i=0
		while kill -0 "$(cat "$_p")" 2>/dev/null; do
			_i=$((_i + 1))
			if [ "$_i" -gt 100 ]; then
				echo "luksd daemon for $1 still running 10s after close" >&2
				return 1
			fi
			usleep 100000
		done
		rm -f "$_p"
	fi
}

# luksd_format IMAGE KEY LINE [ARGS...] formats IMAGE with luksd for a
# CIPHERS line (LUKS2 or LUKS1), with cryptsetup's flags.
luksd_format() {
	_img=$1 _key=$2 _line=$3
	shift 3
	# shellcheck disable=SC2086
	luksd luksFormat -q --key-file "$_key" $PBKDF_ARGS --type "$(cipher_field "$_line" 2)" \
		--cipher "$(cipher_field "$_line" 3)" --key-size "$(cipher_field "$_line" 4)" \
		--sector-size "$(cipher_field "$_line" 5)" "$@" "$_img"
}

# fio_bw DEV RW BS DEPTH SECONDS runs one time-based fio job on DEV and
# prints its bandwidth in KiB/s.
fio_bw() {
	fio --name="$2-$3" --filename="$1" --ioengine=libaio --direct=1 --rw="$2" --bs="$3" \
		--iodepth="$4" --runtime="$5" --time_based --randrepeat=0 \
		--output-format=terse --terse-version=3 >"$SCRATCH/fio.out" || return 1
	case $2 in
	*read*) awk -F';' '{ print $7 }' "$SCRATCH/fio.out" ;;
	*) awk -F';' '{ print $48 }' "$SCRATCH/fio.out" ;;
	esac
}

# wait_gone PID... waits (up to 30 s) until each process has exited: gone
# from /proc or a zombie. A SIGKILLed daemon takes a while to release its
# kernel device (io_uring teardown).
wait_gone() {
	for _p in "$@"; do
		_i=0
		while [ -e "/proc/$_p/stat" ] && ! sed 's/.*) //' "/proc/$_p/stat" | grep -q '^Z'; do
			_i=$((_i + 1))
			if [ $_i -gt 300 ]; then
				echo "process $_p still exists 30 s after SIGKILL" >&2
				return 1
			fi
			usleep 100000
		done
	done
}

# luksd_pids prints the pids of all running luksd processes.
luksd_pids() { pidof luksd || true; }

# fault_stack IMAGE NAME makes /dev/mapper/NAME, a device-mapper device
# over a loop device over IMAGE, whose table fault_set switches between a
# working and a failing target; prints /dev/mapper/NAME.
fault_stack() {
	_loop=$(mkloop "$1") || return 1
	echo "$_loop" >"$SCRATCH/fault.$2"
	echo "0 $(blockdev --getsz "$_loop") linear $_loop 0" | dmsetup create "$2" || return 1
	# No udev in the VM: the node is made here.
	[ -b "/dev/mapper/$2" ] || dmsetup mknodes "$2" || return 1
	echo "/dev/mapper/$2"
}

# fault_set NAME MODE switches fault_stack's NAME to MODE: linear (works),
# error (dm's error target: every read, write and flush fails with EIO) or
# error-writes (dm-flakey with error_writes: writes fail, reads work).
fault_set() {
	_loop=$(cat "$SCRATCH/fault.$1")
	_sz=$(blockdev --getsz "$_loop")
	case $2 in
	linear) _t="0 $_sz linear $_loop 0" ;;
	error) _t="0 $_sz error" ;;
	error-writes) _t="0 $_sz flakey $_loop 0 0 3600 1 error_writes" ;;
	*) echo "fault_set: no mode $2" >&2; return 1 ;;
	esac
	echo "$_t" | dmsetup load "$1" && dmsetup resume "$1"
}

# fault_volume ENGINE FRONTEND IMAGE KEY formats IMAGE with cryptsetup
# (aes-xts-plain64, 4096-byte sectors), puts it under fault_stack's flt and
# opens it with ENGINE: dm-crypt (/dev/mapper/vmt) or luksd (FRONTEND, name
# vol); prints the device. On failure, why is in $SCRATCH/fault.why.
fault_volume() {
	cs_format "$3" "$4" "$(cipher_line aes-xts-plain64/4096)" || { echo "cryptsetup luksFormat failed" >"$SCRATCH/fault.why"; return 1; }
	_flt=$(fault_stack "$3" flt) || { echo "cannot set up the dm device over the image" >"$SCRATCH/fault.why"; return 1; }
	if [ "$1" = dm-crypt ]; then
		cs_open "$_flt" vmt "$4" || { echo "cryptsetup open failed" >"$SCRATCH/fault.why"; return 1; }
		echo /dev/mapper/vmt
		return
	fi
	luksd_open "$2" "$_flt" vol "$4" || { echo "luksd open failed: $(open_failure vol)" >"$SCRATCH/fault.why"; return 1; }
}

# flush_dev DEV sends DEV a cache flush (fdatasync on the device node: the
# kernel passes it to the driver as a FLUSH request) and returns its result.
flush_dev() { sync -d "$1" 2>/dev/null; }

# mem_kib PID prints VmRSS and VmLck of a process, in KiB: "RSS LCK".
mem_kib() {
	awk '/^VmRSS:/ { r = $2 } /^VmLck:/ { l = $2 } END { print r, l }' "/proc/$1/status"
}

# held_by DIR prints " (held by PID comm ...)" for the processes whose
# working directory or open files are under DIR, and the mounts on top of
# it: what makes an umount of DIR say busy. Nothing when there is none.
held_by() {
	_h=$(for _p in /proc/[0-9]*; do
		for _l in "$_p"/cwd "$_p"/fd/*; do
			case $(readlink "$_l" 2>/dev/null) in
			"$1" | "$1"/*)
				echo "${_p#/proc/} $(cat "$_p"/comm 2>/dev/null)"
				break
				;;
			esac
		done
	done
	awk -v d="$1/" 'index($2, d) == 1 { print "mount " $2 }' /proc/mounts)
	[ -z "$_h" ] || echo " (held by $(echo "$_h" | tr '\n' ',' | sed 's/,$//; s/,/, /g'))"
}

# pss_kib PID prints PID's proportional set size and private memory (KiB):
# the pages only it maps, plus its share of those it maps with others (the
# luksd binary's text, which the guest keeps in tmpfs, is shared by every
# daemon but counted whole in each one's VmRSS).
pss_kib() {
	awk '/^Pss:/ { p = $2 } /^Private_(Clean|Dirty):/ { v += $2 } END { print p, v }' "/proc/$1/smaps_rollup"
}

# cleanup_all releases whatever a scenario left behind: mounts under /mnt
# or its scratch folder, luksd daemons, dm-crypt mappings, fault_stack
# devices, loop devices.
cleanup_all() {
	for m in $(awk '$2 ~ /^\/mnt/ { print $2 }' /proc/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" || true
	done
	# A scenario that failed or timed out may leave its file system
	# mounted in the scratch folder, which is removed next: detached at
	# once, as its device may hang.
	for m in $(awk '$2 ~ /^\/tmp\/vmtest\./ { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" || true
	done
	for d in /run/luksd/*; do
		[ -e "$d" ] && luksd close "${d##*/}" 2>/dev/null || true
	done
	for p in $(luksd_pids); do
		kill -9 "$p" 2>/dev/null || true
	done
	rm -rf /run/luksd/* 2>/dev/null || true
	for m in /dev/mapper/*; do
		[ "$m" = /dev/mapper/control ] || [ ! -e "$m" ] || cryptsetup close "${m##*/}" 2>/dev/null || true
	done
	# what is left is not dm-crypt (dm_delay's, fault_volume's targets)
	for m in /dev/mapper/*; do
		[ "$m" = /dev/mapper/control ] || [ ! -e "$m" ] || DM_DISABLE_UDEV=1 dmsetup remove --noudevsync "${m##*/}" 2>/dev/null || true
	done
	DM_DISABLE_UDEV=1 dmsetup remove_all --noudevsync 2>/dev/null || true
	losetup -D 2>/dev/null || for l in /dev/loop[0-9]*; do losetup -d "$l" 2>/dev/null; done || true
}

# mkloop FILE attaches FILE to a free loop device and prints the device
# (busybox losetup has no --show).
mkloop() {
	_l=$(losetup -f) && losetup "$_l" "$1" && echo "$_l"
}

# dm_delay NAME DEV puts a device-mapper delay target over DEV, with no
# delay yet, and prints its path (/dev/mapper/NAME). (No udev in the VM.)
dm_delay() {
	_sectors=$(blockdev --getsz "$2") || return 1
	DM_DISABLE_UDEV=1 dmsetup create --noudevsync "$1" --table "0 $_sectors delay $2 0 0" || return 1
	echo "/dev/mapper/$1"
}

# set_delay NAME MS makes every request to dm_delay's NAME (reads, writes
# and flushes) take MS milliseconds from now on. Setting it releases the
# requests held so far at once.
set_delay() {
	_table=$(DM_DISABLE_UDEV=1 dmsetup table "$1" | awk -v ms="$2" '{ $6 = ms; print }')
	DM_DISABLE_UDEV=1 dmsetup suspend --noudevsync "$1" &&
		DM_DISABLE_UDEV=1 dmsetup load "$1" --table "$_table" &&
		DM_DISABLE_UDEV=1 dmsetup resume --noudevsync "$1"
}

# timed FILE CMD... runs CMD and writes how long it took, in seconds with
# two decimals, to FILE; it returns CMD's status.
timed() {
	_tf=$1
	shift
	_t0=$(uptime_s)
	_trc=0
	"$@" || _trc=$?
	awk -v a="$_t0" -v b="$(uptime_s)" 'BEGIN { printf "%.2f\n", b - a }' >"$_tf"
	return $_trc
}

# because WHY... records why the current check failed and ends it: use
# `step || because "..."` inside a function run by check (which runs it in
# a subshell, so this exit ends only the check).
because() {
	echo "$*" >"$SCRATCH/why"
	exit 1
}

# check NAME FUNC ARGS... runs FUNC ARGS in a subshell and reports PASS NAME
# if it succeeds, else FAIL NAME with the reason FUNC gave through because
# (or its exit status). Whatever FUNC left open is released afterwards.
check() {
	_n=$1
	shift
	rm -f "$SCRATCH/why"
	say "begin: $_n"
	_rc=0
	("$@") || _rc=$?
	if [ "$_rc" = 0 ]; then
		pass "$_n"
	elif [ -s "$SCRATCH/why" ]; then
		fail "$_n" "$(cat "$SCRATCH/why")"
	else
		fail "$_n" "exited $_rc"
	fi
	cleanup_all
}

# require_luksd ends the scenario with a FAIL when the VM has no luksd.
require_luksd() {
	have_luksd && return 0
	fail "${VMTEST_SCENARIO:-scenario}" "luksd missing from the VM (did go build ./cmd/luksd fail?)"
	exit 1
}

# side_by_side_setup is the start of a scenario that runs luksd and
# dm-crypt on the same volume: it needs luksd, makes the key file $key,
# and the mount points $mnt (luksd's) and $csmnt (dm-crypt's).
side_by_side_setup() {
	require_luksd
	key=$SCRATCH/key
	mkkey "$key"
	mnt=/mnt/vol
	csmnt=/mnt/cs
	mkdir -p "$mnt" "$csmnt"
}

# The suite checks luksd's block devices themselves: its opens ask for a
# /dev/mapper/NAME symlink, which leaves /dev/nbdN or /dev/ublkbN usable (a
# dm mapping, luksd's default, holds it). A script first on PATH that
# execs luksd, so that `luksd ... &` and $! still name the daemon;
# 47-mapper-names exports VMTEST_MAPPING=dm.
if _real=$(command -v luksd) && [ "$_real" != /run/vmtest-bin/luksd ]; then
	mkdir -p /run/vmtest-bin
	cat >/run/vmtest-bin/luksd <<EOF
#!/bin/sh
if [ "\$1" = open ] && [ "\${VMTEST_MAPPING:-symlink}" = symlink ]; then
	shift
	exec $_real open --mapping symlink "\$@"
fi
exec $_real "\$@"
EOF
	chmod +x /run/vmtest-bin/luksd
	PATH=/run/vmtest-bin:$PATH
fi

# VMTEST_STANDIN=1 replaces luksd by the kernel's dm-crypt, to debug the
# scenario scripts themselves; run.sh then never reports success.
if [ "${VMTEST_STANDIN:-0}" = 1 ]; then
	luksd() {
		case $1 in
		open)
			shift
			_k= _args=
			while [ $# -gt 2 ]; do
				case $1 in
				--key-file) _k=$2; shift 2 ;;
				--frontend) shift 2 ;;
				*) shift ;;
				esac
			done
			cryptsetup open --key-file "$_k" "$1" "$2" && echo "/dev/mapper/$2"
			;;
		close) cryptsetup close "$2" ;;
		status) cryptsetup status "$2" ;;
		luksFormat) shift; cryptsetup luksFormat "$@" ;;
		*) echo "standin luksd: no $1" >&2; return 1 ;;
		esac
	}
	have_luksd() { true; }
fi
