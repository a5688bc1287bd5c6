#!/usr/bin/env bash
# seaweedfs.sh builds SeaweedFS's `weed` (a real distributed object store with
# an S3 gateway, in Go) once per version into a cache outside the checkout,
# and prints the binary's path. The S3 tests and benchmarks start their own
# `weed server` on loopback with it.
#
#   contrib/s3/seaweedfs.sh            build if missing, print the path
#   contrib/s3/seaweedfs.sh --cached   print the path if built, else fail
#
# Cache: $LUKSD_CACHE (default ~/.cache/luksd)/seaweedfs-VERSION/weed. The
# build takes about 8 minutes on 2 cores (CGO_ENABLED=0, a throw-away module;
# go-bip39 is replaced by its maintained fork, as the proxy serves it).
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

version=v0.0.0-20261109003541-7506e5f91cd6
cache=${LUKSD_CACHE:-$HOME/.cache/luksd}/seaweedfs-$version
weed=$cache/weed
if [ -x "$weed" ]; then
	echo "$weed"
	exit 0
fi
if [ "${1:-}" = --cached ]; then
	echo "seaweedfs.sh: $weed is not built (run make deps)" >&2
	exit 1
fi
mkdir -p "$cache"
exec 8>"$cache/.lock"
flock 8
if [ ! -x "$weed" ]; then
	mod=$(mktemp -d)
	trap 'rm -rf "$mod"' EXIT
	cd "$mod"
	cat >go.mod <<EOM
module luksd.local/weedbuild

go 1.26

require github.com/seaweedfs/seaweedfs $version

replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
EOM
	cat >tools.go <<'EOM'
//go:build tools

package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
EOM
	echo "seaweedfs.sh: building weed $version (about 8 minutes, once)" >&2
	GOFLAGS=-mod=mod go mod tidy >&2
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$weed.tmp" github.com/seaweedfs/seaweedfs/weed >&2
	mv "$weed.tmp" "$weed"
fi
echo "$weed"
