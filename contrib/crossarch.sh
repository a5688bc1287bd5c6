#!/usr/bin/env bash
# Runs the cipher, argon2 and sha256mb packages' tests as arm64 and ARMv7 binaries under qemu-user
# (Debian's qemu-user-static), so the non-amd64 paths are proven in CI.
# -short leaves out argon2's 256 MiB and 1 GiB vectors, minutes each under
# qemu; its other tests run every path.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(./xts ./adiantum ./dmcrypt ./argon2 ./sha256mb)
run() {
	local arch=$1 qemu=$2; shift 2
	command -v "$qemu" >/dev/null || { echo "FAIL: $qemu missing (make deps)"; exit 1; }
	for p in "${pkgs[@]}"; do
		[ -n "$(ls "$p"/*.go 2>/dev/null)" ] || continue
		echo "== $p as $arch"
		env "$@" go test -short -count=1 -exec "$qemu" "$p"
	done
}
run arm64 qemu-aarch64-static GOARCH=arm64
run armv7 qemu-arm-static GOARCH=arm GOARM=7
