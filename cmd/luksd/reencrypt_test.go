package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// Reencryption across tools: one starts (and is killed -9, or interrupted
// for resilience none, which cryptsetup only protects against a clean
// stop), the other finishes; then the data must read back under the new
// key and cipher. Each tool works on its own image copy.

const reencDataOffset = 16 << 20

type reencCase struct {
	name           string
	format         []string // cryptsetup luksFormat flags
	reencrypt      []string // reencrypt flags
	oldCipher      string
	newCipher      string
	oldSec, newSec int
}

var reencCases = []reencCase{
	{"xts512-to-xts256", []string{"--cipher", "aes-xts-plain64", "--key-size", "512", "--sector-size", "4096"},
		[]string{"--key-size", "256"}, "aes-xts-plain64", "aes-xts-plain64", 4096, 4096},
	{"cbc-essiv-to-xts", []string{"--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--sector-size", "512"},
		[]string{"--cipher", "aes-xts-plain64", "--key-size", "512"}, "aes-cbc-essiv:sha256", "aes-xts-plain64", 512, 512},
}

// reencImage formats a size-byte image and fills its data with random
// plaintext, which it returns.
func reencImage(w *workspace, name string, c reencCase, key string, size int64) (string, []byte) {
	w.t.Helper()
	img := testtool.ImageAt(w.t, w.dir, name, size)
	w.cs(nil, append(append([]string{"luksFormat", "-q", img, key}, c.format...), cheapPBKDF("pbkdf2")...)...).ok(w.t)
	plain := make([]byte, size-reencDataOffset)
	rand.Read(plain)
	w.cryptData(img, key, c.oldCipher, c.oldSec, plain, true)
	return img, plain
}

// onTmpfs moves w's files to a directory on /dev/shm where there is one:
// reencryption fsyncs after every hotzone, which on a disk would write
// whole images out again and again.
func (w *workspace) onTmpfs() {
	if d, err := os.MkdirTemp("/dev/shm", "luksd-test-"); err == nil {
		w.t.Cleanup(func() { os.RemoveAll(d) })
		w.dir = d
	}
}

// segmentData decrypts n bytes of img's data (n < 0: all from the data
// offset on) with the volume key cryptsetup dumps from header hdr (img
// itself for a volume that holds its header) and hdr's segment, and
// returns them and the data offset. It fails unless hdr has one segment
// and is out of reencryption.
func (w *workspace) segmentData(img, hdr, key string, n int64) ([]byte, int64) {
	w.t.Helper()
	var meta struct {
		Segments map[string]struct {
			Offset, Encryption string
			SectorSize         int `json:"sector_size"`
		}
		Config struct{ Requirements any }
	}
	dump := w.cs(nil, "luksDump", "--dump-json-metadata", hdr).ok(w.t).stdout
	if err := json.Unmarshal([]byte(dump), &meta); err != nil {
		w.t.Fatal(err)
	}
	seg, ok := meta.Segments["0"]
	if len(meta.Segments) != 1 || !ok || meta.Config.Requirements != nil {
		w.t.Fatalf("%s: not one segment out of reencryption: %s", hdr, dump)
	}
	vk, err := hex.DecodeString(volumeKey(w.t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, hdr).ok(w.t).stdout))
	if err != nil {
		w.t.Fatal(err)
	}
	sc, err := dmcrypt.New(seg.Encryption, vk)
	if err != nil {
		w.t.Fatal(err)
	}
	defer sc.Wipe()
	off, err := strconv.ParseInt(seg.Offset, 10, 64)
	if err != nil {
		w.t.Fatalf("%s: segment offset %q", hdr, seg.Offset)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		w.t.Fatal(err)
	}
	if off > int64(len(b)) || n > int64(len(b))-off {
		w.t.Fatalf("%s: %d bytes, shorter than its data (%d bytes from %d)", img, len(b), n, off)
	}
	b = b[off:]
	if n >= 0 {
		b = b[:n]
	}
	sc.Decrypt(b, 0, seg.SectorSize)
	return b, off
}

// cryptData encrypts plain into img's data area (encrypt) or decrypts the
// data area into plain, with the volume key cryptsetup dumps.
func (w *workspace) cryptData(img, key, cipher string, sector int, plain []byte, encrypt bool) {
	w.t.Helper()
	vk, err := hex.DecodeString(volumeKey(w.t, w.cs(nil, "luksDump", "--dump-volume-key", "-q", "-d", key, img).ok(w.t).stdout))
	if err != nil {
		w.t.Fatal(err)
	}
	sc, err := dmcrypt.New(cipher, vk)
	if err != nil {
		w.t.Fatal(err)
	}
	defer sc.Wipe()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Clone(plain)
	if encrypt {
		sc.Encrypt(buf, 0, sector)
		if _, err := f.WriteAt(buf, reencDataOffset); err != nil {
			w.t.Fatal(err)
		}
		return
	}
	if _, err := f.ReadAt(buf, reencDataOffset); err != nil {
		w.t.Fatal(err)
	}
	sc.Decrypt(buf, 0, sector)
	copy(plain, buf)
}

// checkData fails unless img holds want under the new cipher.
func (w *workspace) checkData(img, key string, c reencCase, want []byte) {
	w.t.Helper()
	got := make([]byte, len(want))
	w.cryptData(img, key, c.newCipher, c.newSec, got, false)
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		w.t.Fatalf("%s: data differs from byte %d (sector %d)", img, i, i/512)
	}
	if r := w.cs(nil, "luksDump", img).ok(w.t).stdout; bytes.Contains([]byte(r), []byte("reencrypt")) {
		w.t.Fatalf("%s: reencryption metadata left:\n%s", img, r)
	}
}

// csResume finishes a reencryption with cryptsetup as its user would:
// resume (args, with --resume-only), and on "Run repair first" a repair
// and the resume again. hdr is the detached header, or "". A repair that
// recovers the last hotzone finishes the whole job (cryptsetup's
// recovery tears a finished reencryption down), so the resume after it
// finds nothing to do: that counts as done once the header holds no
// reencryption; the caller's data check holds the result to the
// plaintext.
func (w *workspace) csResume(key, hdr, img string, args ...string) result {
	w.t.Helper()
	r := w.cs(nil, args...)
	if !strings.Contains(r.stderr, "Run repair first") {
		return r
	}
	repair, where := []string{"repair", "-q", "-d", key, img}, img
	if hdr != "" {
		repair, where = []string{"repair", "-q", "-d", key, "--header", hdr, img}, hdr
	}
	w.cs(nil, repair...).ok(w.t)
	r = w.cs(nil, args...)
	if r.code != 0 && strings.Contains(r.stderr, "Device reencryption not in progress.") &&
		!strings.Contains(w.cs(nil, "luksDump", "--dump-json-metadata", where).ok(w.t).stdout, "online-reencrypt") {
		w.t.Logf("cryptsetup's repair finished the reencryption of %s", img)
		return result{}
	}
	return r
}

// interrupt starts prog and stops it with sig after delay.
func interrupt(t *testing.T, delay time.Duration, sig syscall.Signal, prog string, args ...string) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	cmd.Process.Signal(sig)
	cmd.Wait()
}

func TestReencryptResumesAcrossTools(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	for _, c := range reencCases {
		for _, res := range []string{"checksum", "journal", "none"} {
			t.Run(c.name+"-"+res, func(t *testing.T) {
				w := &workspace{t: t, dir: t.TempDir(), cryptsetup: w.cryptsetup}
				base, plain := reencImage(w, "base.img", c, key, 48<<20)
				sig := syscall.SIGKILL
				if res == "none" {
					sig = syscall.SIGINT
				}
				flags := append([]string{"--resilience", res, "--hotzone-size", "262144", "-d", key, "--force-offline-reencrypt", "-q"}, c.reencrypt...)
				tools := map[string]string{"luksd": ld, "cryptsetup": w.cryptsetup}
				for _, first := range []string{"luksd", "cryptsetup"} {
					second := map[string]string{"luksd": "cryptsetup", "cryptsetup": "luksd"}[first]
					for trial := range 3 {
						img := w.path(fmt.Sprintf("%s-%d.img", first, trial))
						copyFile(t, base, img)
						runTool(t, nil, tools[first], append([]string{"reencrypt", "--init-only", img}, flags...)...).ok(t)
						delay := time.Duration(20+trial*120) * time.Millisecond
						interrupt(t, delay, sig, tools[first], append([]string{"reencrypt", "--resume-only", img}, flags...)...)
						resume := []string{"reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, img}
						var r result
						if second == "cryptsetup" {
							r = w.csResume(key, "", img, resume...)
						} else {
							r = runTool(t, nil, tools[second], resume...)
						}
						// A first run that finished leaves nothing to resume.
						if r.code != 0 && !bytes.Contains([]byte(r.stderr), []byte("not in progress")) {
							t.Fatalf("%s after %s (%v): exit %d: %s", second, first, delay, r.code, r.stderr)
						}
						w.checkData(img, key, c, plain)
					}
				}
			})
		}
	}
}

// kill -9 at random moments, one to three times in a row, then a resume
// (luksd, or cryptsetup every third trial) and a full data check; the
// test runs trials for a bounded time, with checksum and with journal
// resilience (none cannot survive a kill mid-hotzone, in either tool).
func TestReencryptKilledAtRandom(t *testing.T) {
	for _, res := range []string{"checksum", "journal"} {
		t.Run(res, func(t *testing.T) { testKilledAtRandom(t, res, 15*time.Second) })
	}
}

// testKilledAtRandom is TestReencryptKilledAtRandom with resilience res,
// for about budget.
func testKilledAtRandom(t *testing.T, res string, budget time.Duration) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	c := reencCases[1]
	base, plain := reencImage(w, "base.img", c, key, 40<<20)
	flags := append([]string{"--resilience", res, "--hotzone-size", "1048576", "-d", key, "-q"}, c.reencrypt...)
	w.luksd(nil, append([]string{"reencrypt", "--init-only", base}, flags...)...).ok(t)
	// How long an uninterrupted run takes bounds the kill delays.
	probe := w.path("probe.img")
	copyFile(t, base, probe)
	start := time.Now()
	w.luksd(nil, "reencrypt", "--resume-only", "-d", key, probe).ok(t)
	full := time.Since(start)
	deadline := time.Now().Add(budget)
	trials := 0
	for ; time.Now().Before(deadline) || trials < 10; trials++ {
		img := w.path("trial.img")
		copyFile(t, base, img)
		var delays []time.Duration
		for range 1 + mathrand.IntN(3) {
			d := time.Duration(mathrand.Int64N(int64(full)))
			delays = append(delays, d)
			interrupt(t, d, syscall.SIGKILL, ld, "reencrypt", "--resume-only", "-d", key, img)
		}
		resume := []string{"reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, img}
		tool := ld
		if trials%3 == 2 {
			tool = w.cryptsetup
		}
		var r result
		if tool == w.cryptsetup {
			r = w.csResume(key, "", img, resume...)
		} else {
			r = runTool(t, nil, tool, resume...)
		}
		if r.code != 0 && !bytes.Contains([]byte(r.stderr), []byte("not in progress")) {
			t.Fatalf("trial %d (kills after %v): %s: exit %d: %s", trials, delays, tool, r.code, r.stderr)
		}
		w.checkData(img, key, c, plain)
	}
	t.Logf("%d trials; an uninterrupted run took %v", trials, full)
}

// Refusals as cryptsetup's: messages and exit codes, each tool on its own
// copy, and the image unchanged by either.
func TestReencryptRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key, bad := w.key("key", "pw"), w.key("bad", "nope")
	plain, _ := w.formatted("pbkdf2")
	marked := w.path("marked.img")
	copyFile(t, plain, marked)
	w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, marked).ok(t)
	for _, c := range []struct {
		img  string
		args []string
	}{
		{marked, []string{"--init-only", "-d", key}},
		{plain, []string{"--resume-only", "-d", key}},
		{plain, []string{"--init-only", "--resume-only", "-d", key}},
		{marked, []string{"--resume-only", "-d", bad}},
		{plain, []string{"-d", bad}},
		{plain, []string{"-S", "3", "-d", key}},
	} {
		var res [2]result
		var after [2][]byte
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			img := w.path(fmt.Sprintf("copy%d.img", i))
			copyFile(t, c.img, img)
			res[i] = runTool(t, nil, tool, append([]string{"reencrypt", "--force-offline-reencrypt", "-q", img}, c.args...)...)
			after[i], _ = os.ReadFile(img)
		}
		if res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", c.args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
		if before, _ := os.ReadFile(c.img); !bytes.Equal(after[1], before) {
			t.Errorf("%v: luksd changed the image", c.args)
		}
	}
}

// An image a process holds that cannot take the job over (here a `luksd
// serve` without a run directory, hence no control socket; a luksd that
// has one reencrypts online) is not reencrypted under it (exit 5,
// unchanged), before the reencryption starts or while it is in progress
// (a volume in reencryption is served, mapped in segments).
func TestReencryptRefusesDeviceInUse(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	sock := w.path("s.sock")
	refused := func(what string, args ...string) {
		t.Helper()
		serve := exec.Command(testtool.Luksd(t), "serve", "--socket", sock, "--key-file", key, img)
		serve.Env = append(os.Environ(), "LUKSD_RUN_DIR="+filepath.Join(img, "not-a-directory"))
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, served := os.Stat(sock)
		before, _ := os.ReadFile(img)
		r := w.luksd(nil, append([]string{"reencrypt", "-q", "-d", key}, append(args, img)...)...)
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
		if served != nil {
			t.Fatalf("%s: serve did not start: %v", what, served)
		}
		if r.code != 5 {
			t.Fatalf("%s: reencrypt of a served image: exit %d: %s", what, r.code, r.stderr)
		}
		if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
			t.Fatalf("%s: the image changed", what)
		}
	}
	refused("before")
	w.luksd(nil, "reencrypt", "--header", img, "-q", "-d", key, img).expect(t, 1, "Option --header is not supported by luksd reencrypt.\n")
	w.luksd(nil, "reencrypt", "--init-only", "-q", "-d", key, img).ok(t)
	refused("in reencryption", "--resume-only")
}

// --resilience on resume changes the mode recorded in the header, with a
// new reencryption digest cryptsetup accepts; SIGTERM stops luksd between
// hotzones with the metadata written.
func TestReencryptResilienceChangedOnResume(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	c := reencCases[0]
	img, plain := reencImage(w, "vol.img", c, key, 48<<20)
	w.luksd(nil, append([]string{"reencrypt", "--init-only", "-q", "-d", key, img}, c.reencrypt...)...).ok(t)
	interrupt(t, 150*time.Millisecond, syscall.SIGTERM, ld, "reencrypt", "--resume-only", "--resilience", "journal",
		"--hotzone-size", "262144", "-q", "-d", key, img)
	dump := w.cs(nil, "luksDump", img).ok(t).stdout
	if !bytes.Contains([]byte(dump), []byte("Resilience: journal")) {
		t.Fatalf("the resilience did not change:\n%s", dump)
	}
	w.cs(nil, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, img).ok(t)
	w.checkData(img, key, c, plain)
}

// refusal is a reencrypt run both tools must refuse alike.
type refusal struct {
	name     string
	files    []string                              // copied into each tool's own directory
	args     func(dir string, p []string) []string // reencrypt's arguments; p: the copies
	want     string                                // cryptsetup's stderr, exit 1
	csWrites bool                                  // cryptsetup writes to the files all the same
}

// refusedAlike runs each case in cryptsetup and in luksd (reencrypt
// --force-offline-reencrypt -q, each tool on its own copies of the files,
// in its own directory) and checks that both exit 1 with c.want on
// stderr, and that luksd (and cryptsetup, unless c.csWrites) left every
// file as it was and made no new.hdr.
func refusedAlike(t *testing.T, w *workspace, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		var res [2]result
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			dir := w.path(fmt.Sprintf("%s-%d", strings.ReplaceAll(c.name, " ", "_"), i))
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			var copies []string
			for _, f := range c.files {
				cp := filepath.Join(dir, filepath.Base(f))
				copyFile(t, f, cp)
				copies = append(copies, cp)
			}
			args := append([]string{"reencrypt", "--force-offline-reencrypt", "-q"}, c.args(dir, copies)...)
			res[i] = runTool(t, nil, tool, args...)
			if i == 0 && c.csWrites {
				continue
			}
			for j, f := range c.files {
				if fileSum(t, copies[j]) != fileSum(t, f) {
					t.Errorf("%s: %s changed %s", c.name, filepath.Base(tool), filepath.Base(f))
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "new.hdr")); err == nil {
				t.Errorf("%s: %s made new.hdr", c.name, filepath.Base(tool))
			}
		}
		if res[0].code != 1 || res[0].stderr != c.want {
			t.Errorf("%s: cryptsetup exit %d %q, want 1 %q", c.name, res[0].code, res[0].stderr, c.want)
		}
		if res[1].code != res[0].code || res[1].stderr != res[0].stderr {
			t.Errorf("%s: cryptsetup exit %d %q, luksd exit %d %q", c.name, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
	}
}

// fileSum is the SHA-256 of the file at path, in hex.
func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A --device-size past the data, or not a multiple of the sector size,
// is refused as cryptsetup refuses it: its two lines and exit code, and
// luksd refuses it before writing anything (cryptsetup rewrites a
// keyslot area and bumps the epoch, its metadata the same as before), so
// the volume is not left marked for reencryption, --init-only included.
// The 20 MiB image holds 4 MiB of data after its header.
func TestReencryptDeviceSizeRefusedBeforeInit(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	plain, det := w.image("plain.img"), w.path("det.hdr")
	w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--header", det, plain}, cheapPBKDF("pbkdf2")...)...).ok(t)
	const fails = "Failed to initialize LUKS2 reencryption in metadata.\n"
	const tooLarge = "Reduced data size is larger than real device size.\n" + fails
	onImage := func(extra ...string) func(string, []string) []string {
		return func(_ string, p []string) []string { return append([]string{"-d", key, p[0]}, extra...) }
	}
	refusedAlike(t, w, []refusal{
		{name: "past the data", files: []string{img}, want: tooLarge, csWrites: true, args: onImage("--device-size", "8M")},
		{name: "by a sector", files: []string{img}, want: tooLarge, csWrites: true, args: onImage("--device-size", "4198912")},
		{name: "init-only", files: []string{img}, want: tooLarge, csWrites: true, args: onImage("--device-size", "8M", "--init-only")},
		{name: "unaligned", files: []string{img}, csWrites: true, args: onImage("--device-size", "6144", "--sector-size", "4096"),
			want: "Data device is not aligned to encryption sector size (4096 bytes).\n" + fails},
		{name: "decrypt detached", files: []string{plain, det}, want: tooLarge, args: func(_ string, p []string) []string {
			return []string{"-d", key, "--decrypt", "--device-size", "24M", "--header", p[1], p[0]}
		}},
	})
	// cryptsetup leaves HDR a header without keyslots; luksd makes none.
	hdr := w.path("new.hdr")
	r := w.luksd(nil, append([]string{"reencrypt", "--encrypt", "-q", "-d", key, "--device-size", "24M", "--header", hdr, plain}, cheapPBKDF("pbkdf2")...)...)
	if r.code != 1 || r.stderr != tooLarge {
		t.Errorf("--encrypt --header: exit %d %q, want 1 %q", r.code, r.stderr, tooLarge)
	}
	if _, err := os.Stat(hdr); err == nil {
		t.Errorf("--encrypt --header: luksd made %s", hdr)
	}
	// Within the data the size is taken and marked, as cryptsetup does.
	w.luksd(nil, "reencrypt", "--init-only", "-q", "-d", key, "--device-size", "4M", img).ok(t)
	if out := w.cs(nil, "luksDump", img).ok(t).stdout; !strings.Contains(out, "online-reencrypt") {
		t.Errorf("--device-size 4M --init-only did not mark the volume:\n%s", out)
	}
}

// A --hotzone-size or --device-size that is not a multiple of
// cryptsetup's calculated zone alignment (the larger of the image's
// block size, 4096 here, and the sector sizes) is refused with its words,
// not rounded: luksd before marking the volume (cryptsetup after), and
// when resuming, where a --device-size off the 4096-byte sector size is
// "Illegal" (luksd used to crash on it).
func TestReencryptZoneAlignmentLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	vol := func(name, sector string, marked bool) string {
		img := w.image(name)
		w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--sector-size", sector, img}, cheapPBKDF("pbkdf2")...)...).ok(t)
		if marked {
			w.cs(nil, "reencrypt", "--init-only", "--force-offline-reencrypt", "-q", "-d", key, img).ok(t)
		}
		return img
	}
	s512, s4096 := vol("s512.img", "512", false), vol("s4096.img", "4096", false)
	m512, m4096 := vol("m512.img", "512", true), vol("m4096.img", "4096", true)
	const loadFails = "Failed to load LUKS2 reencryption context.\n"
	const hotzone = "Hotzone size must be multiple of calculated zone alignment (4096 bytes).\n" + loadFails
	run := func(extra ...string) func(string, []string) []string {
		return func(_ string, p []string) []string { return append([]string{"-d", key, p[0]}, extra...) }
	}
	var cases []refusal
	for _, hz := range []string{"512", "1000", "2048", "5000"} {
		cases = append(cases,
			refusal{name: "hotzone " + hz + " sector 512", files: []string{s512}, want: hotzone, csWrites: true, args: run("--hotzone-size", hz)},
			refusal{name: "hotzone " + hz + " sector 4096", files: []string{s4096}, want: hotzone, csWrites: true, args: run("--hotzone-size", hz)})
	}
	cases = append(cases,
		refusal{name: "device size 4608", files: []string{s512}, csWrites: true, args: run("--device-size", "4608"),
			want: "Device size must be multiple of calculated zone alignment (4096 bytes).\n" + loadFails},
		refusal{name: "resume hotzone 5000", files: []string{m512}, want: hotzone, csWrites: true, args: run("--resume-only", "--hotzone-size", "5000")},
		refusal{name: "resume device size 6144", files: []string{m4096}, csWrites: true, args: run("--resume-only", "--device-size", "6144"),
			want: "Illegal device size requested in reencryption parameters.\n"},
	)
	refusedAlike(t, w, cases)
}

// --keep-key is a reencrypt option as in cryptsetup: alone it changes
// nothing, in cryptsetup's words; with a new segment parameter luksd
// says it does not support it (not that the option is not allowed), and
// the image is left as it was.
func TestReencryptKeepKey(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2")
	refusedAlike(t, w, []refusal{{name: "keep-key alone", files: []string{img}, want: "No data segment parameters changed. Reencryption aborted.\n",
		args: func(_ string, p []string) []string { return []string{"-d", key, "--keep-key", p[0]} }}})
	w.sameOutput("--test-args", "reencrypt", "--keep-key", img)
	cp := w.path("copy.img")
	copyFile(t, img, cp)
	w.luksd(nil, "reencrypt", "-q", "-d", key, "--keep-key", "--sector-size", "512", cp).expect(t, 1, "Option --keep-key is not supported by luksd reencrypt.\n")
	if fileSum(t, cp) != fileSum(t, img) {
		t.Error("--keep-key --sector-size 512 changed the image")
	}
}
