#!/bin/sh
# runner.sh runs each scenario named in /out/plan (one NN-name a line), each
# in its own scratch directory with a time limit, and records the outcome:
#   /out/summary        PASS/FAIL lines of every scenario, in order
#   /out/logs/NN-name.log   the scenario's stdout and stderr
#   /out/done           "END NN-name rc=N pass=P fail=F secs=S" once a scenario ended
# A scenario that exits non-zero without a FAIL line, or reports nothing,
# gets a FAIL line from here.
. /vmtest/guest/lib.sh
set -a
[ -e /out/config ] && . /out/config
set +a
limit=${VMTEST_SCENARIO_TIMEOUT:-300}

# hang_report NAME SCRATCH tells what a scenario about to time out waits
# for: one INFO line in the summary (each process's state, kernel wait
# channel and command), and in its log the kernel stacks of blocked
# tasks, the goroutines of every luksd (a daemon logs them on SIGUSR1
# and serves on; any other luksd prints them on SIGQUIT and exits), the
# daemons' logs and what the scenario's commands wrote in SCRATCH.
hang_report() {
	_procs=
	for _p in /proc/[0-9]*; do
		_cmd=$(tr '\0' ' ' <"$_p/cmdline" 2>/dev/null | cut -c1-100) || continue
		[ -n "$_cmd" ] || continue # a kernel thread
		_pid=${_p#/proc/}
		[ "$_pid" != 1 ] && [ "$_pid" != $$ ] || continue
		_st=$(sed 's/.*) //' "$_p/stat" 2>/dev/null | cut -d' ' -f1)
		_procs="$_procs; $_pid $_st $(cat "$_p/wchan" 2>/dev/null) $_cmd"
	done
	RESULT=$res record "INFO $1 at its time limit:$(echo "${_procs#;}" | cut -c1-1500)"
	echo "=== at the time limit: processes (pid, state, wait channel, command)"
	echo "${_procs#; }" | sed 's/; /\n/g'
	echo "=== blocked tasks (sysrq w)"
	echo w >/proc/sysrq-trigger 2>/dev/null && dmesg | tail -n 150
	for _pid in $(luksd_pids); do
		case $(readlink "/proc/$_pid/fd/2") in
		/run/luksd/*.log) kill -USR1 "$_pid" ;;
		*) kill -QUIT "$_pid" ;;
		esac
	done
	sleep 3
	for _f in /run/luksd/*.log "$2"/*.err "$2"/*.out; do
		[ -s "$_f" ] || continue
		echo "=== $_f"
		tail -c 60000 "$_f"
	done
}
mkdir -p /out/logs
: >/out/summary
: >/out/done
echo "vmtest: ready at $(uptime_s)s, running: $(tr '\n' ' ' </out/plan)"

while read -r s; do
	[ -n "$s" ] || continue
	script=/vmtest/scenarios/$s.sh
	res=/tmp/result.$s
	: >"$res"
	log=/out/logs/$s.log
	t0=$(uptime_s)
	echo "=== $s"
	if [ ! -e "$script" ]; then
		echo "FAIL $s: no such scenario" | tee -a /out/summary
		echo "END $s rc=127 pass=0 fail=1" >>/out/done
		continue
	fi
	scratch=$(mktemp -d /tmp/vmtest.XXXXXX)
	# A scenario may ask for more time than the default with a
	# "# timeout: SECONDS" line (slow ciphers, a store copied over 9p).
	lim=$limit
	own=$(sed -n 's/^# timeout:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$script" | head -n1)
	[ -n "$own" ] && [ "$own" -gt "$lim" ] && lim=$own
	# Twenty seconds before the limit, a scenario still running gets a
	# report of what its processes wait for (hang_report). Stopped, the
	# watchdog stops its sleep too: left behind, each would crowd the
	# process list of a later report.
	(
		sleep $((lim - 20)) &
		nap=$!
		trap 'kill $nap; exit 0' TERM
		wait $nap && hang_report "$s" "$scratch" >>"$log" 2>&1
	) &
	watchdog=$!
	if [ "${VMTEST_VERBOSE:-0}" = 1 ]; then
		(cd "$scratch" && VMTEST_SCENARIO=$s VMTEST_RESULT=$res VMTEST_SCRATCH=$scratch \
			timeout -s KILL "$lim" sh -e "$script" 2>&1; echo $? >"$scratch.rc") | tee "$log"
	else
		(cd "$scratch" && VMTEST_SCENARIO=$s VMTEST_RESULT=$res VMTEST_SCRATCH=$scratch \
			timeout -s KILL "$lim" sh -e "$script" >"$log" 2>&1; echo $? >"$scratch.rc")
	fi
	kill "$watchdog" 2>/dev/null || true
	rc=$(cat "$scratch.rc")
	npass=$(grep -c '^PASS ' "$res")
	nfail=$(grep -c '^FAIL ' "$res")
	if [ "$rc" = 137 ]; then
		echo "FAIL $s: timed out after ${lim}s (see logs/$s.log)" | tee -a /out/summary
		nfail=$((nfail + 1))
	elif [ "$rc" != 0 ] && [ "$nfail" = 0 ]; then
		echo "FAIL $s: exited $rc: $(tail -n1 "$log") (see logs/$s.log)" | tee -a /out/summary
		nfail=$((nfail + 1))
	elif [ "$npass" = 0 ] && [ "$nfail" = 0 ]; then
		echo "FAIL $s: reported no result (see logs/$s.log)" | tee -a /out/summary
		nfail=1
	fi
	cleanup_all >>"$log" 2>&1
	rm -rf "$scratch" "$scratch.rc" "$res"
	secs=$(awk "BEGIN { printf \"%.1f\", $(uptime_s) - $t0 }")
	echo "END $s rc=$rc pass=$npass fail=$nfail secs=$secs" >>/out/done
	echo "--- $s: $npass passed, $nfail failed, ${secs}s"
done </out/plan
echo "vmtest: finished at $(uptime_s)s"
