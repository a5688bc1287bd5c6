# luksd — see README.md. `make deps` once on a fresh Debian machine, then
# `make test` runs every test (unit, interop with cryptsetup and NBD clients,
# cross-architecture under qemu-user, and the VM end-to-end suite).

GO       ?= go
BIN      ?= bin/luksd
APT_PKGS := cryptsetup-bin libnbd-bin nbdkit qemu-utils fio qemu-user-static \
            qemu-system-x86 busybox-static e2fsprogs xz-utils cpio kmod openssl \
            util-linux binutils dmsetup time clevis-luks tang keyutils \
            systemd swtpm swtpm-tools libtss2-tcti-swtpm0 libtss2-esys-3.0.2-0 \
            libtss2-rc0 libtss2-mu0 \
            nbd-server s3backer curl strace gnutls-bin
export GOFLAGS := -mod=mod
# staticcheck, pinned; `make deps` installs it from the module proxy.
STATICCHECK_VERSION := v0.8.2
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: all build deps test unit crossarch vmtest bench lint asmcheck fuzz demo clean install release releasecheck

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
	cd _asm && $(GO) mod download
	GOBIN=$(dir $(STATICCHECK)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	contrib/s3/seaweedfs.sh >/dev/null

# test runs all the tests; CI runs exactly this. (Running the unit tests
# beside the VMs saved about 15 minutes but failed timing-bound checks on
# both sides: 2 cores cannot carry both.)
test: lint unit crossarch releasecheck vmtest

# unit runs every package under -race but cmd/luksd, and beside it
# cmd/luksd without -race: its tests drive the luksd binary (built without
# -race) and cryptsetup, so -race would check only their harness, at 2.4
# times the wall time and 3.6 times the CPU. Then what -race skips:
# allocation counts (sync.Pool drops items at random under it) and argon2's
# 64 MiB, 256 MiB and 1 GiB vectors (minutes on the instrumented generic
# path, no concurrency to check).
unit:
	@pkgs=$$($(GO) list ./... | grep -vx 'github.com/luksd/luksd/cmd/luksd'); \
	$(GO) test -race -count=1 -timeout 45m $$pkgs & race=$$!; \
	$(GO) test -count=1 -timeout 45m ./cmd/luksd & cli=$$!; \
	rc=0; wait $$race || rc=1; wait $$cli || rc=1; exit $$rc
	$(GO) test -count=1 -run 'Alloc|ReferenceVectors' ./xts ./adiantum ./dmcrypt ./argon2

# crossarch runs the cipher, argon2 and sha256mb packages' tests as arm64 and ARMv7 binaries
# under qemu-user.
crossarch:
	contrib/crossarch.sh

# The speed scenarios (70, 71, 72) report ratios and never fail on them; in
# the test suite one round of each engine is enough for the report and
# saves minutes of CI. `VMTEST_SPEED_ROUNDS=3 make vmtest` (or run.sh,
# whose default is 3) measures with alternating rounds. The other
# scenarios run in three VMs at once: their guests wait much of the time
# (timeouts, one-threaded steps), so three share the host's 2 cores well
# (1270 s of VMs against about 1900 s with two, same host).
vmtest: build
	VMTEST_SPEED_ROUNDS=$${VMTEST_SPEED_ROUNDS:-1} VMTEST_VMS=$${VMTEST_VMS:-3} contrib/vmtest/run.sh

bench:
	contrib/bench/run.sh

# lint checks the main module and the _asm generators' module: gofmt, go
# vet, staticcheck, and that the generated assembly is up to date.
lint: asmcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }
	@[ -x $(STATICCHECK) ] || { echo "$(STATICCHECK) missing: run make deps"; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...
	cd _asm && $(GO) vet ./... && $(STATICCHECK) ./...

# asmcheck regenerates the amd64 assembly from _asm into a temporary
# directory and fails when a committed file differs (but for its first
# line, which names the output path).
ASM := xts/xts_amd64.s adiantum/adiantum_amd64.s argon2/argon2_amd64.s sha256mb/sha256mb_amd64.s
asmcheck:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	for s in $(ASM); do \
		pkg=$${s%%/*}; \
		(cd _asm/$$pkg && $(GO) run . -out "$$tmp/new.s") || exit 1; \
		tail -n +2 "$$tmp/new.s" > "$$tmp/a"; tail -n +2 "$$s" > "$$tmp/b"; \
		cmp -s "$$tmp/a" "$$tmp/b" || { echo "$$s is not what _asm/$$pkg generates: cd _asm/$$pkg && go generate"; exit 1; }; \
	done

# fuzz runs each fuzz target for a short while (FUZZTIME, default 30s).
FUZZTIME ?= 30s
fuzz:
	contrib/fuzz.sh $(FUZZTIME)

demo: build
	contrib/demo.sh

clean:
	rm -rf bin dist

# install puts luksd, its systemd generator (a link to luksd, which acts
# as luksd-generator by that name) and its udev rules under DESTDIR and
# PREFIX; the rules call luksd where it is installed.
PREFIX     ?= /usr/local
DESTDIR    ?=
SBINDIR    := $(PREFIX)/sbin
UNITDIR    ?= /usr/lib/systemd
UDEVDIR    ?= /usr/lib/udev/rules.d
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(SBINDIR)/luksd
	install -d $(DESTDIR)$(UNITDIR)/system-generators
	ln -sf $(SBINDIR)/luksd $(DESTDIR)$(UNITDIR)/system-generators/luksd-generator
	install -d $(DESTDIR)$(UDEVDIR)
	sed 's,/usr/local/sbin/luksd,$(SBINDIR)/luksd,' contrib/udev/60-luksd.rules >$(DESTDIR)$(UDEVDIR)/60-luksd.rules
	chmod 0644 $(DESTDIR)$(UDEVDIR)/60-luksd.rules

# release builds static, stripped luksd binaries for the NAS
# architectures, the version (git describe) built in, and their SHA-256
# sums, in dist/.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASES := amd64 arm64 arm7 arm6
release:
	rm -rf dist && mkdir -p dist
	for r in $(RELEASES); do \
		arch=$${r%[67]}; arm=$${r#arm}; [ "$$arch" = arm ] || arm=; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOARM=$$arm $(GO) build -trimpath \
			-ldflags "-s -w -X main.version=$(VERSION)" -o dist/luksd-$(VERSION)-linux-$$r ./cmd/luksd || exit 1; \
	done
	cd dist && sha256sum luksd-* >SHA256SUMS

# releasecheck runs each release binary (ARM ones under qemu-user): its
# version is the one built in, and `luksd benchmark` runs its ciphers.
QEMU_amd64 :=
QEMU_arm64 := qemu-aarch64-static
QEMU_arm7  := qemu-arm-static -cpu cortex-a15
QEMU_arm6  := qemu-arm-static -cpu arm1176
releasecheck: release
	cd dist && sha256sum -c SHA256SUMS
	for r in $(RELEASES); do \
		b=dist/luksd-$(VERSION)-linux-$$r; \
		case $$r in amd64) q="$(QEMU_amd64)";; arm64) q="$(QEMU_arm64)";; arm7) q="$(QEMU_arm7)";; arm6) q="$(QEMU_arm6)";; esac; \
		[ "$$($$q $$b --version)" = "luksd $(VERSION)" ] || { echo "$$b: wrong version"; exit 1; }; \
		$$q $$b benchmark --cipher xchacha12,aes-adiantum-plain64 --key-size 256 >/dev/null || exit 1; \
		$$q $$b benchmark --cipher aes-xts-plain64 >/dev/null || exit 1; \
		echo "$$b: version and benchmark ok"; \
	done
