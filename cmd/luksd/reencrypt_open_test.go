package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/keyring"
	"golang.org/x/sys/unix"
)

// A volume whose reencryption was killed part-way (by luksd or by
// cryptsetup) opens with luksd as cryptsetup 2.6.1 activates it: a
// crashed hotzone is recovered, the data rewritten so far reads with the
// new key and cipher, the rest with the old ones. Every byte read through
// `luksd serve` must be the plaintext written before the reencryption;
// writes through it land in the right cipher, so that cryptsetup
// finishes the reencryption and the data is the plaintext as written.
func TestOpenMidReencryption(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	ld := testtool.Luksd(t)
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	tools := map[string]string{"luksd": ld, "cryptsetup": w.cryptsetup}
	for _, c := range reencCases {
		for _, res := range []string{"checksum", "journal", "none"} {
			for _, first := range []string{"luksd", "cryptsetup"} {
				if res == "none" && first == "cryptsetup" {
					// cryptsetup runs resilience none through a volume
					// this size too fast to stop it part-way reliably;
					// luksd's none and kills between cryptsetup's steps
					// leave the same clean state.
					continue
				}
				t.Run(c.name+"-"+res+"-"+first, func(t *testing.T) {
					w := &workspace{t: t, dir: t.TempDir(), cryptsetup: w.cryptsetup}
					base, plain := reencImage(w, "base.img", c, key, 48<<20)
					flags := append([]string{"--resilience", res, "--hotzone-size", "262144", "-d", key, "--force-offline-reencrypt", "-q"}, c.reencrypt...)
					runTool(t, nil, tools[first], append([]string{"reencrypt", "--init-only", base}, flags...)...).ok(t)
					// resilience none is safe only against a clean stop.
					sig := map[bool]syscall.Signal{true: syscall.SIGINT, false: syscall.SIGKILL}[res == "none"]
					img := midReencryption(t, w, base, tools[first], sig, flags)
					// cryptsetup's own copy: it finishes the reencryption
					// and reads the plaintext luksd must read.
					mine := w.path("luksd.img")
					copyFile(t, img, mine)
					// luksDump part-way, each tool on its own copy.
					dumped := w.path("dump.img")
					copyFile(t, img, dumped)
					if a, b := runTool(t, nil, ld, "luksDump", dumped).ok(t).stdout, w.cs(nil, "luksDump", img).ok(t).stdout; a != b {
						t.Errorf("luksDump part-way:\nluksd:\n%s\ncryptsetup:\n%s", a, b)
					}
					w.finishWithCryptsetup(img, key)
					w.checkData(img, key, c, plain)

					got := serveRead(t, w, mine, key)
					if i := firstDiff(got, plain); i >= 0 {
						t.Fatalf("luksd reads the volume in reencryption wrong from byte %d (sector %d)", i, i/512)
					}
					want := serveWrite(t, w, mine, key, plain)
					w.finishWithCryptsetup(mine, key)
					w.checkData(mine, key, c, want)
				})
			}
		}
	}
}

// midReencryption resumes the reencryption of a copy of base with tool
// and stops it with sig part-way, trying longer delays until the volume
// is left with some but not all of its data rewritten; it returns that
// copy.
func midReencryption(t *testing.T, w *workspace, base, tool string, sig syscall.Signal, flags []string) string {
	t.Helper()
	img := w.path("mid.img")
	delay := 20 * time.Millisecond
	for range 40 {
		copyFile(t, base, img)
		interrupt(t, delay, sig, tool, append([]string{"reencrypt", "--resume-only", img}, flags...)...)
		var meta struct {
			Segments map[string]struct {
				Size  string
				Flags []string
			}
		}
		dump := w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(t).stdout
		if err := json.Unmarshal([]byte(dump), &meta); err != nil {
			t.Fatal(err)
		}
		if len(meta.Segments) == 1 {
			// Finished already: stop sooner.
			delay = max(delay*2/3, time.Millisecond)
			continue
		}
		// Part-way: a hotzone, or a first segment of fixed length (the
		// new cipher's; before the first step it is the old, dynamic).
		hot := false
		for _, s := range meta.Segments {
			hot = hot || slices.Contains(s.Flags, "in-reencryption")
		}
		if hot || meta.Segments["0"].Size != "dynamic" {
			t.Logf("killed after %v (hotzone: %v)", delay, hot)
			return img
		}
		delay = delay * 3 / 2
	}
	t.Fatal("no kill left the reencryption part-way")
	return ""
}

// finishWithCryptsetup resumes and finishes the reencryption of img with
// cryptsetup, running repair first where cryptsetup asks for it.
func (w *workspace) finishWithCryptsetup(img, key string) {
	w.t.Helper()
	w.csResume(key, "", img, "reencrypt", "--resume-only", "--force-offline-reencrypt", "-q", "-d", key, img).ok(w.t)
}

// serveRead reads all of img's plaintext through `luksd serve`.
func serveRead(t *testing.T, w *workspace, img, key string) []byte {
	t.Helper()
	return serveReadWith(t, w, "-d", key, img)
}

// serveReadWith reads all the plaintext `luksd serve ARGS` serves.
func serveReadWith(t *testing.T, w *workspace, args ...string) []byte {
	t.Helper()
	sock := w.path("sock")
	p := startServe(t, sock, args...)
	out := w.path("out")
	testtool.Run(t, "nbdcopy", p.uri(), out)
	p.stop(t)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(out)
	return got
}

// serveWrite writes random data through `luksd serve` at places spread
// over the volume (each straddling sectors, some a segment boundary, whose
// place depends on where the reencryption stopped) and returns plain as
// the volume now holds it.
func serveWrite(t *testing.T, w *workspace, img, key string, plain []byte) []byte {
	t.Helper()
	want := bytes.Clone(plain)
	src := w.path("src")
	sock := w.path("sock")
	p := startServe(t, sock, "-d", key, img)
	for off := int64(700); off < int64(len(plain)); off += 3<<20 + 4096*33 + 11 {
		n := min(int64(300<<10), int64(len(plain))-off)
		data := make([]byte, n)
		rand.Read(data)
		copy(want[off:], data)
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		testtool.Run(t, "qemu-io", "-f", "raw", "-c", fmt.Sprintf("write -s %s %d %d", src, off, n), "-c", "flush",
			"nbd+unix:///?socket="+sock)
	}
	p.stop(t)
	if got := serveRead(t, w, img, key); firstDiff(got, want) >= 0 {
		t.Fatalf("luksd reads back what it wrote wrong from byte %d", firstDiff(got, want))
	}
	os.Remove(filepath.Join(w.dir, "src"))
	return want
}

// firstDiff is the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// A daemon mapping a volume in reencryption (segments) records it, and
// status prints cryptsetup's line for it, with the final segment's cipher
// and key size (cryptsetup's default segment is backup-final).
func TestStatusReencrypting(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	img := testtool.ImageAt(t, t.TempDir(), "r.img", 18<<20)
	vk := make([]byte, 64+32)
	rand.Read(vk)
	key, err := keyring.FromBytes(vk)
	if err != nil {
		t.Fatal(err)
	}
	final := daemon.Segment{Cipher: "aes-xts-plain64", Offset: 16 << 20, SectorSize: 4096, KeySize: 32}
	newPart, oldPart := final, daemon.Segment{Cipher: "aes-cbc-essiv:sha256", Offset: 17 << 20, SectorSize: 512, KeySize: 32, IVOffset: 2048}
	newPart.Size, newPart.KeyOffset = 1<<20, 64
	spec := daemon.Spec{Name: "mid", Location: img, Header: img, Type: "LUKS2", Segment: final,
		Segments: []daemon.Segment{newPart, oldPart}, Options: daemon.Options{Frontend: fe.Name()}}
	done := startDaemon(t, spec, key)
	r := luksd(t, nil, "status", "mid")
	for _, want := range []string{"  type:    LUKS2\n  reencryption:  in-progress\n  cipher:  aes-xts-plain64\n  keysize: 256 bits\n",
		"  sector size:  4096\n", "  size:    4096 sectors\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := luksd(t, nil, "luksSuspend", "mid"); r.code == 0 || !strings.Contains(r.stderr, "reencryption in progress") {
		t.Errorf("luksSuspend of a volume in segments: exit %d, %s", r.code, r.stderr)
	}
	luksd(t, nil, "close", "mid").expect(t, 0, "")
	if err := waitDaemon(t, done); err != nil {
		t.Fatal(err)
	}
}

// luksd and cryptsetup exclude each other through cryptsetup's
// reencryption lock: a reencryption runs in one tool at a time, and luksd
// does not map a volume another tool is reencrypting.
func TestReencryptionLockAcrossTools(t *testing.T) {
	w := newWorkspace(t)
	key := w.key("key", "pw")
	c := reencCases[0]
	img, _ := reencImage(w, "lock.img", c, key, 20<<20)
	flags := append([]string{"--hotzone-size", "262144", "-q", "--force-offline-reencrypt"}, c.reencrypt...)
	runTool(t, nil, testtool.Luksd(t), append([]string{"reencrypt", "--init-only", "-d", key, img}, flags...)...).ok(t)
	uuid := strings.TrimSpace(w.cs(nil, "luksUUID", img).ok(t).stdout)

	// luksd holds the lock while it waits for its passphrase on stdin.
	cmd := exec.Command(testtool.Luksd(t), append([]string{"reencrypt", "--resume-only", "-d", "-", img}, flags...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitLocked(t, filepath.Join("/run/cryptsetup", "LN_LUKS2-reencryption-"+uuid), "luksd reencrypt")
	r := w.cs(nil, append([]string{"reencrypt", "--resume-only", "-d", key, img}, flags...)...)
	if r.code != exitBusy || !strings.Contains(r.stderr, "Reencryption process is already running.") {
		t.Errorf("cryptsetup reencrypt beside luksd's: exit %d: %s", r.code, r.stderr)
	}
	stdin.Write([]byte("pw"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("luksd reencrypt: %v: %s", err, stderr.String())
	}

	// The other way: a holder of the lock (flock(1) standing in for a
	// running cryptsetup) keeps luksd from reencrypting or mapping.
	img2, _ := reencImage(w, "lock2.img", c, key, 20<<20)
	runTool(t, nil, testtool.Luksd(t), append([]string{"reencrypt", "--init-only", "-d", key, img2}, flags...)...).ok(t)
	uuid2 := strings.TrimSpace(w.cs(nil, "luksUUID", img2).ok(t).stdout)
	lock2 := filepath.Join("/run/cryptsetup", "LN_LUKS2-reencryption-"+uuid2)
	holder := exec.Command("flock", "-xn", lock2, "sleep", "120")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	waitLocked(t, lock2, "flock")
	luksd(t, nil, append([]string{"reencrypt", "--resume-only", "-d", key, img2}, flags...)...).expect(t, exitBusy, "Reencryption process is already running.")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	luksd(t, nil, "serve", "--socket", w.path("sock"), "-d", key, img2).expect(t, exitBusy, "Reencryption in-progress. Cannot activate device.")
}

// waitLocked waits until something holds an flock on path; who names it
// in the failure. It reads /proc/locks rather than trying the lock, which
// would make a non-blocking locker that tries at the same moment fail
// (cryptsetup's and luksd's reencryption lock is LOCK_NB). The bound is
// generous: on a loaded machine a process takes seconds to start.
func waitLocked(t *testing.T, path, who string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if flockHeld(t, path) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never took the lock %s", who, path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flockHeld reports whether /proc/locks lists an flock on path's inode.
func flockHeld(t *testing.T, path string) bool {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false // not created yet
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(locks), "\n") {
		// "1: FLOCK  ADVISORY  WRITE 1234 00:1f:5678 0 EOF"
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == id {
			return true
		}
	}
	return false
}
