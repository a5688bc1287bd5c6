#!/usr/bin/env bash
# kernel.sh fetches Debian's newest bookworm-backports Linux 6.12 kernel
# package through a private apt configuration (the system's apt sources are
# never touched), caches it outside the clone in $LUKSD_CACHE/vmtest (default
# ~/.cache/luksd/vmtest, shared by every clone and worktree, as SeaweedFS's
# build is), and extracts vmlinuz and the kernel modules with a depmod'ed
# modules.dep.
#
# Output (stdout, one line each): KVER=<version> and KDIR=<extracted root>;
# vmlinuz is $KDIR/boot/vmlinuz-$KVER, modules under $KDIR/lib/modules/$KVER.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin

cache=${LUKSD_CACHE:-$HOME/.cache/luksd}/vmtest
apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/sources.list.d" "$cache/debs"
# one download or extraction at a time (runs with different VMTEST_OUT share the cache)
exec 8>"$cache/.lock"
flock 8

# mirror returns the Debian mirror the machine already uses for bookworm.
mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		uri=$(awk '
			/^[[:space:]]*$/ { if (ok && u != "") { print u; exit } ok=0; u=""; next }
			/^URIs:/ { u=$2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") ok=1 }
			END { if (ok && u != "") print u }' "$f" | head -n1)
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -e "$f" ] || continue
		uri=$(awk '$1 == "deb" && $0 ~ / bookworm / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f")
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	echo http://deb.debian.org/debian
}

aptopts=(
	-o "Dir::Etc::SourceList=$apt/sources.list"
	-o "Dir::Etc::SourceParts=$apt/sources.list.d"
	-o "Dir::State::Lists=$apt/lists"
	-o "Dir::Cache=$apt"
	-o "Dir::Cache::archives=$apt/archives"
	-o "Dir::Cache::pkgcache=$apt/pkgcache.bin"
	-o "Dir::Cache::srcpkgcache=$apt/srcpkgcache.bin"
	-o "APT::Get::List-Cleanup=false"
	-o "Debug::NoLocking=true"
	-o "APT::Sandbox::User=root"
)

# newest_cached picks the newest kernel package already downloaded.
newest_cached() {
	ls "$cache/debs"/linux-image-6.12.*-amd64*_amd64.deb 2>/dev/null | sort -V | tail -n1
}

deb=$(newest_cached || true)
if [ -z "$deb" ] || [ -n "${VMTEST_REFRESH:-}" ]; then
	m=$(mirror)
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m bookworm-backports main" >"$apt/sources.list"
	echo "kernel.sh: apt-get update (bookworm-backports from $m, private lists)" >&2
	apt-get "${aptopts[@]}" -q update >&2
	pkg=$(apt-cache "${aptopts[@]}" pkgnames linux-image-6.12. |
		grep -E '^linux-image-6\.12\.[0-9]+\+(bpo|deb12)-amd64(-unsigned)?$' |
		sort -V | tail -n1)
	[ -n "$pkg" ] || { echo "kernel.sh: no linux-image-6.12.*-amd64 in bookworm-backports" >&2; exit 1; }
	echo "kernel.sh: apt-get download $pkg" >&2
	(cd "$cache/debs" && apt-get "${aptopts[@]}" -q download "$pkg" >&2)
	deb=$(newest_cached)
fi
[ -n "$deb" ] || { echo "kernel.sh: download failed" >&2; exit 1; }

kdir=$cache/kernel/$(basename "$deb" .deb)
if [ ! -e "$kdir/.done" ]; then
	echo "kernel.sh: extracting $(basename "$deb")" >&2
	rm -rf "$kdir"
	mkdir -p "$kdir"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$kdir" --wildcards './boot/vmlinuz-*' './lib/modules/*' './usr/lib/modules/*' 2>/dev/null ||
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$kdir" --wildcards './boot/vmlinuz-*' './lib/modules/*'
	# usrmerge packages put modules in usr/lib/modules; depmod -b wants lib/modules.
	if [ ! -d "$kdir/lib/modules" ] && [ -d "$kdir/usr/lib/modules" ]; then
		mkdir -p "$kdir/lib" && ln -s ../usr/lib/modules "$kdir/lib/modules"
	fi
	kver=$(ls "$kdir/lib/modules" | head -n1)
	depmod -b "$kdir" "$kver"
	touch "$kdir/.done"
fi
kver=$(ls "$kdir/lib/modules" | head -n1)
[ -e "$kdir/boot/vmlinuz-$kver" ] || { echo "kernel.sh: no vmlinuz-$kver in $deb" >&2; exit 1; }
echo "KVER=$kver"
echo "KDIR=$kdir"
