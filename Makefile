# luksd — see README.md. `make deps` once on a fresh Debian machine, then
# `make test` runs every test (unit, interop with cryptsetup and NBD clients,
# cross-architecture under qemu-user, and the VM end-to-end suite).

GO       ?= go
BIN      ?= bin/luksd
APT_PKGS := cryptsetup-bin libnbd-bin nbdkit qemu-utils fio qemu-user-static \
            qemu-system-x86 busybox-static e2fsprogs xz-utils cpio kmod openssl \
            util-linux binutils dmsetup time
export GOFLAGS := -mod=mod

.PHONY: all build deps test unit crossarch vmtest bench lint fuzz demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/luksd

# deps installs what the build and the tests need (root, or sudo), and
# builds SeaweedFS's weed for the S3 tests once into a cache (LUKSD_CACHE).
deps:
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	$$SUDO apt-get update -q && \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $(APT_PKGS)
	$(GO) mod download
	contrib/s3/seaweedfs.sh >/dev/null

# test runs all the tests; CI runs exactly this.
test: lint unit crossarch vmtest

unit:
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -count=1 -run 'Alloc' ./xts ./adiantum ./dmcrypt ./argon2

# crossarch runs the cipher and argon2 packages' tests as arm64 and ARMv7 binaries
# under qemu-user.
crossarch:
	contrib/crossarch.sh

vmtest: build
	contrib/vmtest/run.sh

bench:
	contrib/bench/run.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }
	$(GO) vet ./...

# fuzz runs each fuzz target for a short while (FUZZTIME, default 30s).
FUZZTIME ?= 30s
fuzz:
	contrib/fuzz.sh $(FUZZTIME)

demo: build
	contrib/demo.sh

clean:
	rm -rf bin
