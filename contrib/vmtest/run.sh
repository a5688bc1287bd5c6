#!/usr/bin/env bash
# run.sh boots Debian's Linux 6.12 under qemu (TCG, no network) and runs the
# vmtest scenarios inside; see README.md.
#
#   contrib/vmtest/run.sh                 the default list: every scenario whose
#                                         "# requires:" features are all enabled
#   contrib/vmtest/run.sh SCENARIO...     only these (20, 20-dmcrypt-to-luksd-nbd,
#                                         dmcrypt-to-luksd-nbd or a path), enabled or not
#   contrib/vmtest/run.sh --all           every scenario
#   contrib/vmtest/run.sh --list          list scenarios, their features, default or not
#
# Prints one "PASS name" or "FAIL name: why" line per check and exits non-zero
# on any FAIL, on a scenario without a result, or on a timeout.
#
# Environment: VMTEST_FEATURES (features enabled on top of the file
# contrib/vmtest/features), VMTEST_OUT (results directory, default
# contrib/vmtest/out), VMTEST_TIMEOUT (whole VM, seconds, default 3600),
# VMTEST_SCENARIO_TIMEOUT (each scenario, default 300), VMTEST_VERBOSE=1
# (scenario output on the console), VMTEST_LUKSD (a prebuilt luksd to test
# instead of building one), VMTEST_MEM (MiB, default 1536), VMTEST_SMP (2),
# VMTEST_SPEED_SECONDS and VMTEST_SPEED_ROUNDS (the speed scenarios),
# VMTEST_QEMU_ARGS (more qemu arguments, e.g. "-icount shift=3,sleep=on"),
# VMTEST_VMS (VMs at once, default 1), VMTEST_PART (shared or alone).
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${VMTEST_OUT:-$here/out}
sdir=$here/scenarios

die() { echo "vmtest: $*" >&2; exit 2; }

# requires FILE prints the features a scenario needs (its "# requires:" line).
requires() { sed -n 's/^# requires:[[:space:]]*//p' "$1" | head -n1; }

enabled_features() {
	{ [ -e "$here/features" ] && sed 's/#.*//' "$here/features"; echo "${VMTEST_FEATURES:-}"; } | tr ' ,' '\n\n' | grep -v '^$' || true
}

# is_default FILE: every feature the scenario requires is enabled.
is_default() {
	local f
	for f in $(requires "$1"); do
		enabled_features | grep -qxF "$f" || return 1
	done
}

# resolve ARG prints the scenario name (NN-name) ARG stands for.
resolve() {
	local a=${1##*/} m
	a=${a%.sh}
	for m in "$sdir/$a.sh" "$sdir/$a"-*.sh "$sdir"/[0-9][0-9]-"$a".sh; do
		if [ -e "$m" ]; then
			m=${m##*/}
			echo "${m%.sh}"
			return
		fi
	done
	die "no scenario matches '$1' (see contrib/vmtest/run.sh --list)"
}

plan=()
case ${1:-} in
--list)
	for f in "$sdir"/[0-9][0-9]-*.sh; do
		n=${f##*/}
		if is_default "$f"; then d=default; else d=disabled; fi
		printf '%-32s %-9s requires: %s\n' "${n%.sh}" "$d" "$(requires "$f")"
	done
	exit 0
	;;
--all)
	for f in "$sdir"/[0-9][0-9]-*.sh; do n=${f##*/}; plan+=("${n%.sh}"); done
	;;
-h | --help)
	sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
"")
	for f in "$sdir"/[0-9][0-9]-*.sh; do
		is_default "$f" || continue
		n=${f##*/}
		plan+=("${n%.sh}")
	done
	;;
*)
	for a in "$@"; do plan+=("$(resolve "$a")"); done
	;;
esac
[ ${#plan[@]} -gt 0 ] || die "no scenario to run"

mkdir -p "$out"
exec 9>"$out/.lock"
if ! flock -n 9; then
	echo "vmtest: $out is in use by another run; waiting (set VMTEST_OUT for a separate one)" >&2
	flock 9
fi

t0=$(date +%s)

# luksd, statically linked so that it needs nothing from the initramfs.
luksd=${VMTEST_LUKSD:-}
if [ -z "$luksd" ]; then
	luksd=$out/luksd
	echo "vmtest: building luksd (CGO_ENABLED=0)" >&2
	rm -f "$luksd"
	# A tree that does not build yet still lets the dm-crypt scenarios run;
	# the luksd ones then fail with "luksd missing".
	(cd "$top" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$luksd" ./cmd/luksd) ||
		echo "vmtest: WARNING: go build ./cmd/luksd failed; the VM has no luksd" >&2
fi

# Go test binaries of the packages that drive the kernel directly; the
# scenarios that run them fail when one is missing.
tests=$out/tests
rm -rf "$tests"
mkdir -p "$tests"
for pkg in ublk nbd; do
	(cd "$top" && CGO_ENABLED=0 GOFLAGS=-mod=mod go test -c -o "$tests/$pkg.test" "./$pkg") ||
		echo "vmtest: WARNING: go test -c ./$pkg failed; the VM has no $pkg.test" >&2
done

eval "$("$here/kernel.sh")"
echo "vmtest: kernel $KVER; building the initramfs" >&2
"$here/initramfs.sh" "$KDIR" "$KVER" "$luksd" "$out/initrd.cpio" "$tests"

share=$out/results
rm -rf "$share"
mkdir -p "$share/logs"
weed=$("$top/contrib/s3/seaweedfs.sh" --cached 2>/dev/null) || {
	weed=
	echo "vmtest: WARNING: weed is not built (contrib/s3/seaweedfs.sh); the S3 scenarios will fail" >&2
}

# The scenarios are spread over VMTEST_VMS VMs that run at once (their
# guests wait on timeouts and single-threaded steps much of the time), in
# turn so that neighbours (often the long ones of a kind) part; those with
# an "# alone:" line (the speed scenarios) run afterwards in a VM of their
# own, so that no other VM's load moves their figures. Each VM has its own
# share, $share/vmK; their results are merged into $share at the end.
vms=${VMTEST_VMS:-1}
[ "$vms" -ge 1 ] 2>/dev/null || die "VMTEST_VMS must be a positive number, not '$vms'"
together=() alone=()
for s in "${plan[@]}"; do
	if [ -e "$sdir/$s.sh" ] && grep -q '^# alone:' "$sdir/$s.sh"; then alone+=("$s"); else together+=("$s"); fi
done
# VMTEST_PART runs one part: "shared" the scenarios the VMs share, "alone"
# those that run alone.
case ${VMTEST_PART:-} in
"") ;;
shared) alone=() ;;
alone) together=() ;;
*) die "VMTEST_PART must be shared or alone, not '$VMTEST_PART'" ;;
esac
plan=("${together[@]}" "${alone[@]}")
[ ${#plan[@]} -gt 0 ] || { echo "vmtest: no scenario in part ${VMTEST_PART:-}" >&2; exit 0; }
[ "${#together[@]}" -ge "$vms" ] || vms=${#together[@]}
i=0
for s in "${together[@]}"; do
	echo "$s" >>"$share/vm$((i % vms + 1)).plan"
	i=$((i + 1))
done
[ "${#alone[@]}" = 0 ] || printf '%s\n' "${alone[@]}" >"$share/vm$((vms + 1)).plan"

# oops matches the line a kernel begins its report of a crash with.
oops='Oops|BUG:|Kernel panic|general protection'

# console_text LOG: a console log without its terminal escapes and CRs.
console_text() {
	sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\r$//' "$1"
}

# boot K: runs VM K on the scenarios in $share/vmK.plan, its console in
# $share/vmK/console.log and on stdout (each line prefixed [vmK] when
# several VMs share stdout).
boot() {
	local d=$share/vm$1 prefix= rc
	mkdir -p "$d/logs"
	mv "$share/vm$1.plan" "$d/plan"
	{
		echo "VMTEST_SCENARIO_TIMEOUT=${VMTEST_SCENARIO_TIMEOUT:-300}"
		echo "VMTEST_VERBOSE=${VMTEST_VERBOSE:-0}"
		echo "VMTEST_STANDIN=${VMTEST_STANDIN:-0}"
		[ -z "${VMTEST_SPEED_SECONDS:-}" ] || echo "VMTEST_SPEED_SECONDS=$VMTEST_SPEED_SECONDS"
		[ -z "${VMTEST_SPEED_ROUNDS:-}" ] || echo "VMTEST_SPEED_ROUNDS=$VMTEST_SPEED_ROUNDS"
	} >"$d/config"
	# SeaweedFS's weed (static, 160 MB: too big for the initramfs) for the
	# S3 scenarios, which run it from the share; `make deps` builds it.
	if [ -n "$weed" ]; then
		mkdir -p "$d/bin"
		ln "$weed" "$d/bin/weed" 2>/dev/null || cp "$weed" "$d/bin/weed"
	fi
	[ "$vms" = 1 ] || prefix="[vm$1] "
	echo "vmtest: booting VM $1, scenarios: $(tr '\n' ' ' <"$d/plan")" >&2
	# tsc=reliable: no clocksource watchdog on the TSC. On a loaded host the
	# watchdog finds TCG's TSC skewed against the HPET and marks it
	# unstable, and the kernel then patches the sched_clock_stable static
	# key into running code; under TCG that once ended a CI run in "Oops:
	# int3" at sched_clock_idle_wakeup_event, killing the VM and its
	# scenarios. TCG derives every vCPU's TSC from one host clock, so it is
	# reliable.
	#
	# Still, TCG now and then runs a stale int3 the kernel's text patching
	# (static keys at late_initcall) left: "Oops: int3" in sched_clock_cpu
	# four seconds into boot, once in about 40 CI boots. A guest that
	# dies before its init says "ready" ran nothing, so it boots again at
	# once, up to twice; its console is kept as console.bootN.log.
	local try why
	for try in 1 2 3; do
		{
			timeout -k 10 "${VMTEST_TIMEOUT:-3600}" qemu-system-x86_64 \
				-cpu max -m "${VMTEST_MEM:-1536}" -smp "${VMTEST_SMP:-2}" \
				-nographic -no-reboot -nic none \
				-kernel "$KDIR/boot/vmlinuz-$KVER" -initrd "$out/initrd.cpio" \
				-append "console=ttyS0 quiet loglevel=3 panic=-1 tsc=reliable rdinit=/init" \
				-device virtio-rng-pci \
				-virtfs "local,path=$d,mount_tag=vmtest,security_model=none,id=vmtest" \
				${VMTEST_QEMU_ARGS:-} </dev/null 2>&1 && rc=0 || rc=$?
			echo "$rc" >"$d/rc"
		} | tee "$d/console.log" | sed -u "s/^/$prefix/" || true
		rc=$(cat "$d/rc")
		case $rc in 124 | 137) break ;; esac # timed out: its time is spent
		grep -q 'vmtest: ready at' "$d/console.log" && break
		[ "$try" -lt 3 ] || break
		mv "$d/console.log" "$d/console.boot$try.log"
		why=$(console_text "$d/console.boot$try.log" | grep -m1 -E "$oops" || true)
		echo "vm$1 died booting (qemu exit $rc) and booted again: ${why:-no kernel message}" >>"$share/crashes"
		echo "vmtest: vm$1 died booting (qemu exit $rc): ${why:-no kernel message}; booting it again" >&2
	done
	rm -rf "$d/bin"
}

# unfinished K: the scenarios of VM K's plan without an END line.
unfinished() {
	local d=$share/vm$1 s
	while read -r s; do
		[ -n "$s" ] || continue
		grep -q "^END $s " "$d/done" 2>/dev/null || echo "$s"
	done <"$d/plan"
}

# console_end LOG: the end of a console log that matters: from the kernel's
# first $oops line after the last scenario began (the message and the top
# of its trace), or else its last lines.
console_end() {
	console_text "$1" | awk -v oops="$oops" '
		/^=== / { n = 0; start = 0 }
		{ line[++n] = $0 }
		!start && $0 ~ oops { start = n }
		END {
			if (start) { from = start; to = start + 19 } else { from = n - 19; to = n }
			if (from < 1) from = 1
			for (i = from; i <= to && i <= n; i++) print line[i]
		}'
}

# crashed FIRST LAST [again]: a VM among FIRST..LAST that ended before its
# plan did (its guest kernel died, or qemu did) loses the rest of its plan.
# Its console's last lines go to stderr and a line to $share/crashes,
# which the report repeats; the scenario it was running has its partial
# lines dropped. With "again", what each such VM left unfinished runs once
# more in a fresh VM, all at once, so that one crash costs one scenario a
# second run rather than a whole VM's results. A VM that timed out is
# neither: its time is spent, and the report fails it.
next=$vms
[ "${#alone[@]}" = 0 ] || next=$((vms + 1))
crashed() {
	local k d rc left running end more=()
	for k in $(seq "$1" "$2"); do
		d=$share/vm$k
		rc=$(cat "$d/rc" 2>/dev/null || echo none)
		case $rc in 124 | 137) continue ;; esac
		left=$(unfinished "$k")
		[ -n "$left" ] || continue
		running=$(sed -n 's/^=== \([0-9][0-9]-[^[:space:]]*\).*/\1/p' "$d/console.log" | tail -n1)
		if [ -z "$running" ]; then
			running="boot, before its first scenario"
		elif grep -q "^END $running " "$d/done" 2>/dev/null; then
			running="the clean-up after $running"
		else
			awk -v s="$running" '$2 != s && $2 != s ":"' "$d/summary" >"$d/summary.new" 2>/dev/null || true
			mv -f "$d/summary.new" "$d/summary" 2>/dev/null || true
		fi
		end=$(console_end "$d/console.log")
		{
			echo "vmtest: vm$k ended (qemu exit $rc) during $running, with $(echo "$left" | wc -l) scenario(s) unfinished; its console:"
			echo "$end" | sed 's/^/    /'
		} >&2
		if [ "${3:-}" = again ]; then
			next=$((next + 1))
			echo "$left" >"$share/vm$next.plan"
			more+=("$next")
			echo "vm$k ended (qemu exit $rc) during $running; its unfinished scenarios ran again in vm$next" >>"$share/crashes"
		else
			echo "vm$k ended (qemu exit $rc) during $running" >>"$share/crashes"
		fi
		# In the report's last lines: the crash's message, process and
		# first frames, or the console's last four lines.
		echo "$end" | awk -v oops="$oops" '
			$0 ~ oops { k = 1 }
			k && ($0 ~ oops || /Comm:|RIP:|[a-z_]\+0x/) && !/\? / && ++n <= 8 { print }
			{ last[NR % 4] = $0 }
			END { if (!k) for (i = NR - 3; i <= NR; i++) if (i > 0) print last[i % 4] }' |
			sed 's/^/        /' >>"$share/crashes"
	done
	[ ${#more[@]} -gt 0 ] || return 0
	for k in "${more[@]}"; do boot "$k" & done
	wait
}

t1=$(date +%s)
echo "vmtest: $(( t1 - t0 ))s of preparation; $vms VM(s) at once${alone[*]:+, then one for ${alone[*]}}" >&2
for k in $(seq "$vms"); do boot "$k" & done
wait
[ "${#alone[@]}" = 0 ] || boot $((vms + 1))
first=$((next + 1))
crashed 1 "$next" again
[ "$next" -lt "$first" ] || crashed "$first" "$next"
t2=$(date +%s)

# Merge the VMs' results, in scenario order. A VM that timed out fails the
# run below; any other end shows as its scenarios' missing results.
timedout=
for d in "$share"/vm*; do
	mv "$d"/logs/* "$share/logs/" 2>/dev/null || true
	case $(cat "$d/rc" 2>/dev/null) in 124 | 137) timedout="$timedout ${d##*/}" ;; esac
done
cat "$share"/vm*/summary 2>/dev/null | LC_ALL=C sort -s -k2,2 >"$share/summary" || true
cat "$share"/vm*/done 2>/dev/null | LC_ALL=C sort -s -k2,2 >"$share/done" || true

fails=0
echo
echo "vmtest summary ($out/results):"
cat "$share/summary"
fails=$(grep -c '^FAIL ' "$share/summary" 2>/dev/null || true)
for s in "${plan[@]}"; do
	if ! grep -q "^END $s " "$share/done" 2>/dev/null; then
		echo "FAIL $s: no result (the VM timed out or crashed; see $share/vm*/console.log)"
		fails=$((fails + 1))
	fi
done
if [ -s "$share/crashes" ]; then
	echo "vmtest: VMs that crashed (their consoles are above):"
	sed 's/^/    /' "$share/crashes"
fi
if [ -n "$timedout" ]; then
	echo "FAIL vmtest:$timedout did not finish within ${VMTEST_TIMEOUT:-3600}s"
	fails=$((fails + 1))
fi
npass=$(grep -c '^PASS ' "$share/summary" 2>/dev/null || true)
echo "vmtest: VMs ran $(( t2 - t1 ))s, total $(( t2 - t0 ))s"
# The count alone on the last line, in the form CI reads as a test summary.
echo "vmtest: ${npass:-0} passed, $fails failed"
if [ "${VMTEST_STANDIN:-0}" = 1 ]; then
	echo "vmtest: VMTEST_STANDIN=1: dm-crypt stood in for luksd; these results say nothing about luksd"
	exit 3
fi
[ "$fails" = 0 ]
