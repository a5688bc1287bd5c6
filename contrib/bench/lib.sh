# The start the NBD bench scripts share (bash; source it from the
# repository's top folder).

# bench_start NAME TOOL...: NAME's TOOLs are installed, bin/luksd is built
# ($LUKSD), $work is a fresh folder on tmpfs, and at exit the processes in
# $pids are killed and $work is removed.
bench_start() {
	local name=$1 tool
	shift
	for tool in "$@"; do
		command -v "$tool" >/dev/null || { echo "$name: $tool is not installed (make deps)" >&2; exit 1; }
	done
	make -s build
	LUKSD=$PWD/bin/luksd
	work=$(mktemp -d -p /dev/shm "luksd-${name%.sh}.XXXXXX")
	pids=()
	trap bench_cleanup EXIT
}

bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
