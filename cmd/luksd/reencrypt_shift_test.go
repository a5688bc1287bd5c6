package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// Reencryption with a data shift (reencrypt --reduce-device-size on a
// LUKS2 volume) across tools: the data moves toward the device's end
// and its last bytes are given up; each tool on its own copy.

// metadataShape is img's JSON metadata with what differs from run to run
// (salts, digests, PBKDF iterations) left out.
func (w *workspace) metadataShape(img string) any {
	w.t.Helper()
	var meta any
	if err := json.Unmarshal([]byte(w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout), &meta); err != nil {
		w.t.Fatal(err)
	}
	var scrub func(v any) any
	scrub = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "salt" || k == "digest" || k == "iterations" {
					v[k] = "*"
				} else {
					v[k] = scrub(x)
				}
			}
		case []any:
			for i, x := range v {
				v[i] = scrub(x)
			}
		}
		return v
	}
	return scrub(meta)
}

// shiftState reads which data segments img has: still in the old cipher
// (at the old data offset), in the new one, a hotzone.
func (w *workspace) shiftState(img string) (old, new, hot bool) {
	var meta struct {
		Segments map[string]struct {
			Offset string
			Flags  []string
		}
	}
	if err := json.Unmarshal([]byte(w.cs(nil, "luksDump", "--dump-json-metadata", img).ok(w.t).stdout), &meta); err != nil {
		w.t.Fatal(err)
	}
	for _, s := range meta.Segments {
		switch {
		case slices.ContainsFunc(s.Flags, func(f string) bool { return strings.HasPrefix(f, "backup-") }):
		case slices.Contains(s.Flags, "in-reencryption"):
			hot = true
		case s.Offset == fmt.Sprint(reencDataOffset):
			old = true
		default:
			new = true
		}
	}
	return old, new, hot
}

// A whole run by luksd gives the data cryptsetup's gives (the first
// size-shift bytes, under the new key at the new offset) and the same
// header: data offset, segments, keyslots, the grown keyslots area.
func TestReencryptShiftLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	tools := map[string]string{"luksd": testtool.Luksd(t), "cryptsetup": w.cryptsetup}
	for i, c := range reencCases {
		for _, shift := range []int64{8 << 20, 3 << 20} {
			t.Run(fmt.Sprintf("%s-%d", c.name, shift), func(t *testing.T) {
				w := &workspace{t: t, dir: w.dir, cryptsetup: w.cryptsetup}
				// The second image's data is not a multiple of the shift.
				base, plain := reencImage(w, "base.img", c, key, int64(64+4*i)<<20)
				want := plain[:int64(len(plain))-shift]
				var shapes []any
				for _, tool := range []string{"cryptsetup", "luksd"} {
					img := w.path(tool + ".img")
					copyFile(t, base, img)
					runTool(t, nil, tools[tool], append([]string{"reencrypt", "-q", "--force-offline-reencrypt", "-d", key,
						"--reduce-device-size", fmt.Sprint(shift), img}, c.reencrypt...)...).ok(t)
					w.checkEncrypted(img, key, want)
					shapes = append(shapes, w.metadataShape(img))
				}
				if !reflect.DeepEqual(shapes[0], shapes[1]) {
					t.Errorf("metadata differs:\ncryptsetup %v\nluksd      %v", shapes[0], shapes[1])
				}
			})
		}
	}
}

// midShift copies base (marked for a reencryption with a data shift) to
// name and resumes it with tool, stopped by sig after longer and longer
// delays until it stops part-way; it says whether a hotzone was left.
func midShift(w *workspace, base, name, tool string, sig syscall.Signal, flags []string) (string, bool) {
	w.t.Helper()
	img := w.path(name)
	// SIGKILL: bisect the delay between one that stopped it before it
	// began (lo) and one that let it finish (hi, 0 until one did).
	var lo, hi time.Duration
	delay := 5 * time.Millisecond
	for range 60 {
		copyFile(w.t, base, img)
		interrupt(w.t, delay, sig, tool, append([]string{"reencrypt", "--resume-only", img}, flags...)...)
		old, new, hot := w.shiftState(img)
		if old && new || hot {
			return img, hot
		}
		switch {
		case sig == syscall.SIGINT:
			// cryptsetup finishes a run interrupted before its first
			// hotzone: later is the only way to part-way.
			delay = delay * 3 / 2
			continue
		case old:
			lo = delay
		default:
			hi = delay
		}
		if hi == 0 {
			delay *= 2
		} else {
			delay = (lo + hi) / 2
		}
	}
	w.t.Fatal("no stop left the reencryption part-way")
	return "", false
}

// Marked and killed -9 (or stopped by SIGINT between hotzones) part-way
// by one tool, resumed by the other (or itself), each on its own copy:
// the data reads back whole.
func TestReencryptShiftResumesAcrossTools(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	tools := map[string]string{"luksd": testtool.Luksd(t), "cryptsetup": w.cryptsetup}
	const shift = 256 << 10 // many small hotzones to be stopped in
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt"}
	for _, c := range reencCases {
		for _, first := range []string{"luksd", "cryptsetup"} {
			t.Run(c.name+"-"+first, func(t *testing.T) {
				w := &workspace{t: t, dir: w.dir, cryptsetup: w.cryptsetup}
				base, plain := reencImage(w, first+"-base.img", c, key, 64<<20)
				want := plain[:len(plain)-shift]
				runTool(t, nil, tools[first], append(append([]string{"reencrypt", "--init-only", "--reduce-device-size",
					fmt.Sprint(shift), base}, flags...), c.reencrypt...)...).ok(t)
				hots := 0
				for trial, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGKILL, syscall.SIGINT} {
					mid, hot := midShift(w, base, first+"-mid.img", tools[first], sig, flags)
					if hot {
						hots++
					}
					for _, second := range []string{"luksd", "cryptsetup"} {
						img := w.path(fmt.Sprintf("%s-%d-%s.img", first, trial, second))
						copyFile(t, mid, img)
						resume := append([]string{"reencrypt", "--resume-only", img}, flags...)
						var r result
						if second == "cryptsetup" {
							r = w.csResume(key, "", img, resume...)
						} else {
							r = runTool(t, nil, tools[second], resume...)
						}
						if r.code != 0 {
							t.Fatalf("%s after %s (%v, hotzone %v): exit %d: %s", second, first, sig, hot, r.code, r.stderr)
						}
						w.checkEncrypted(img, key, want)
						os.Remove(img)
					}
				}
				t.Logf("%d of 3 stops left a hotzone", hots)
			})
		}
	}
}

// What cryptsetup refuses, luksd refuses with its words and exit code,
// each on its own copy; a shift that leaves no data is refused by both
// once the volume is marked, with the same metadata.
func TestReencryptShiftRefusalsLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	img, key := w.formatted("pbkdf2") // sector size 4096
	for _, c := range []struct {
		args   []string
		writes bool // both tools mark the volume
	}{
		{[]string{"--reduce-device-size", "2560"}, false},
		{[]string{"--reduce-device-size", "8M", "--resume-only"}, false},
		{[]string{"--reduce-device-size", "8M", "--decrypt"}, false},
		{[]string{"--reduce-device-size", fmt.Sprint(w.dataSize(img))}, true},
		{[]string{"--reduce-device-size", fmt.Sprint(w.dataSize(img) + 4096)}, true},
	} {
		var res [2]result
		var shapes [2]any
		for i, tool := range []string{w.cryptsetup, testtool.Luksd(t)} {
			cp := w.path(fmt.Sprintf("copy%d.img", i))
			copyFile(t, img, cp)
			res[i] = runTool(t, nil, tool, append([]string{"reencrypt", "--force-offline-reencrypt", "-q", "-d", key, cp}, c.args...)...)
			shapes[i] = w.metadataShape(cp)
			if i == 1 && !c.writes && fileSum(t, cp) != fileSum(t, img) {
				t.Errorf("%v: luksd changed the image", c.args)
			}
		}
		if res[0].code != 1 || res[0].code != res[1].code || res[0].stderr != res[1].stderr {
			t.Errorf("%v: cryptsetup exit %d %q, luksd exit %d %q", c.args, res[0].code, res[0].stderr, res[1].code, res[1].stderr)
		}
		if c.writes && !reflect.DeepEqual(shapes[0], shapes[1]) {
			t.Errorf("%v: metadata differs:\ncryptsetup %v\nluksd      %v", c.args, shapes[0], shapes[1])
		}
	}
}

// dataSize is the bytes of img after its data offset.
func (w *workspace) dataSize(img string) int64 {
	w.t.Helper()
	fi, err := os.Stat(img)
	if err != nil {
		w.t.Fatal(err)
	}
	return fi.Size() - reencDataOffset
}

// A volume a daemon serves is not shifted under it: the refusal is one
// line, and the volume is neither marked nor changed.
func TestReencryptShiftRefusedOnline(t *testing.T) {
	w := newWorkspace(t)
	keyFile := w.key("key", "pw")
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	fe := fakeFrontend()
	c := reencCases[0]
	img, model := reencImage(w, "vol.img", c, keyFile, 24<<20)
	spec, key := openSpec(t, img, []byte("pw"), "shift", fe.Name())
	done := startDaemon(t, spec, key)
	before := fileSum(t, img)
	luksd(t, nil, "reencrypt", "-q", "-d", keyFile, "--reduce-device-size", "8M", "shift").
		expect(t, exitParams, "Option --reduce-device-size with an online reencryption is not supported by luksd.")
	stopVolume(t, "shift", done)
	if fileSum(t, img) != before {
		t.Error("a refused online reencryption changed the volume")
	}
	w.checkData(img, keyFile, reencCase{newCipher: c.oldCipher, newSec: c.oldSec}, model)
}

// A volume stopped part-way through a data-shift reencryption (kill -9,
// by either tool) is served as cryptsetup's activation maps it: the data
// still old at the old offset, the rest at the new one; every byte read
// is the plaintext, and data written through it is there after
// cryptsetup finishes the reencryption. A daemon serving it refuses to
// resume it online.
func TestOpenMidReencryptShift(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	key := w.key("key", "pw")
	tools := map[string]string{"luksd": testtool.Luksd(t), "cryptsetup": w.cryptsetup}
	const shift = 256 << 10
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt"}
	c := reencCases[1]
	for _, first := range []string{"luksd", "cryptsetup"} {
		t.Run(first, func(t *testing.T) {
			w := &workspace{t: t, dir: w.dir, cryptsetup: w.cryptsetup}
			base, plain := reencImage(w, "base.img", c, key, 64<<20)
			plain = plain[:len(plain)-shift]
			runTool(t, nil, tools[first], append(append([]string{"reencrypt", "--init-only", "--reduce-device-size",
				fmt.Sprint(shift), base}, flags...), c.reencrypt...)...).ok(t)
			mid, hot := midShift(w, base, "mid.img", tools[first], syscall.SIGKILL, flags)
			t.Logf("killed with a hotzone: %v", hot)
			got := serveRead(t, w, mid, key)
			if len(got) != len(plain) {
				t.Fatalf("luksd serves %d bytes, want %d", len(got), len(plain))
			}
			if i := firstDiff(got, plain); i >= 0 {
				t.Fatalf("luksd reads the volume in reencryption wrong from byte %d of %d", i, len(got))
			}
			want := serveWrite(t, w, mid, key, plain)
			// The daemon does not take the data shift over.
			spec, vk := openSpec(t, mid, []byte("pw"), "mid", fakeFrontend().Name())
			done := startDaemon(t, spec, vk)
			before := fileSum(t, mid)
			luksd(t, nil, "reencrypt", "-q", "--resume-only", "-d", key, "mid").
				expect(t, exitParams, "moves its data (--reduce-device-size): close it and resume it offline.")
			stopVolume(t, "mid", done)
			if fileSum(t, mid) != before {
				t.Error("a refused online resume changed the volume")
			}
			w.finishWithCryptsetup(mid, key)
			w.checkEncrypted(mid, key, want)
		})
	}
}

// detachedPlain is the plaintext of img whose detached header is hdr:
// its first n data bytes, or all of them for n < 0.
func (w *workspace) detachedPlain(img, hdr, key string, n int64) []byte {
	w.t.Helper()
	b, _ := w.segmentData(img, hdr, key, n)
	return b
}

// A data shift with a detached header (reencrypt --header HDR
// --reduce-device-size SIZE): luksd leaves the header cryptsetup leaves
// (the data offset grown by SIZE, the keyslots area and the header file
// with it) and the same plaintext; either tool resumes the other's. A
// SIZE that puts the data inside the keyslots area, which cryptsetup runs
// and then fails at its last hotzone, luksd refuses before it writes.
func TestReencryptShiftDetachedLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	w.onTmpfs()
	key := w.key("key", "pw")
	tools := map[string]string{"luksd": testtool.Luksd(t), "cryptsetup": w.cryptsetup}
	const size = 48 << 20
	img := testtool.ImageAt(t, w.dir, "data.img", size)
	hdr := w.path("base.hdr")
	w.cs(nil, append([]string{"luksFormat", "-q", "-d", key, "--header", hdr, "--sector-size", "4096", img}, cheapPBKDF("pbkdf2")...)...).ok(t)
	plain := w.detachedPlain(img, hdr, key, size)
	flags := []string{"-q", "-d", key, "--force-offline-reencrypt", "--hotzone-size", "4M"}
	for _, shift := range []int64{16 << 20, 24 << 20} {
		var shapes []any
		var hdrSizes []int64
		for _, first := range []string{"cryptsetup", "luksd"} {
			for _, second := range []string{"", "cryptsetup", "luksd"} {
				name := fmt.Sprintf("%d-%s-%s", shift, first, second)
				d, h := w.path(name+".img"), w.path(name+".hdr")
				copyFile(t, img, d)
				copyFile(t, hdr, h)
				run := append([]string{"reencrypt", "--header", h, "--reduce-device-size", fmt.Sprint(shift), d}, flags...)
				if second != "" {
					run = append(run, "--init-only")
				}
				runTool(t, nil, tools[first], run...).ok(t)
				if second != "" {
					runTool(t, nil, tools[second], append([]string{"reencrypt", "--resume-only", "--header", h, d}, flags...)...).ok(t)
				}
				if i := firstDiff(w.detachedPlain(d, h, key, size-2*shift), plain[:size-2*shift]); i >= 0 {
					t.Fatalf("%s: data differs from byte %d", name, i)
				}
				fi, err := os.Stat(h)
				if err != nil {
					t.Fatal(err)
				}
				shapes, hdrSizes = append(shapes, w.metadataShape(h)), append(hdrSizes, fi.Size())
				os.Remove(d)
			}
		}
		for i := range shapes {
			if !reflect.DeepEqual(shapes[i], shapes[0]) || hdrSizes[i] != hdrSizes[0] {
				t.Errorf("shift %d, run %d: header differs from cryptsetup's (%d bytes, %d):\n%v\n%v", shift, i, hdrSizes[i], hdrSizes[0], shapes[i], shapes[0])
			}
		}
	}
	d, h := w.path("short.img"), w.path("short.hdr")
	copyFile(t, img, d)
	copyFile(t, hdr, h)
	r := runTool(t, nil, tools["luksd"], append([]string{"reencrypt", "--header", h, "--reduce-device-size", "8M", d}, flags...)...)
	if r.code != exitParams || !strings.Contains(r.stderr, "Use --reduce-device-size of at least 16777216.") {
		t.Errorf("a shift into the keyslots area: exit %d: %s", r.code, r.stderr)
	}
	if fileSum(t, d) != fileSum(t, img) || fileSum(t, h) != fileSum(t, hdr) {
		t.Error("a refused shift into the keyslots area changed the volume")
	}
}
