package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/testtool"
)

// claimFixture is a cryptsetup-made image and its passphrase file.
func claimFixture(t *testing.T) (cs, img, pass string) {
	t.Helper()
	cs = testtool.Need(t, "cryptsetup")
	img = testtool.Image(t, 20<<20)
	pass = testtool.KeyFile(t, []byte("passphrase"))
	testtool.CryptsetupFormat(t, img, pass, "--type", "luks2")
	return cs, img, pass
}

// runFakeVolume runs the daemon's open path on image with the fake
// frontend, the volume key taken from the image with cryptsetup.
func runFakeVolume(t *testing.T, cs, image, header, pass, name string) chan error {
	t.Helper()
	dump := runTool(t, nil, cs, "luksDump", "--dump-volume-key", "-q", "--key-file", pass, header)
	fe := fakeFrontend()
	v := imageVolume(t, image, header, testtool.VolumeKey(t, dump.stdout))
	return startDaemon(t, v.spec(name, daemon.Options{Frontend: fe.Name()}), v.Key)
}

// An open volume holds its image: another luksd cannot open or format it
// through another name or a loop device over it, while cryptsetup's
// header edits (a flock on the header) still work. status names the holder.
func TestOpenImageIsClaimed(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	cs, img, pass := claimFixture(t)
	captureLog(t)
	done := runFakeVolume(t, cs, img, img, pass, "held")

	st, err := daemon.Active("held")
	if err != nil || st == nil || st.Claim != "OFD lock" {
		t.Fatalf("state %+v, %v: want claim \"OFD lock\"", st, err)
	}
	r := luksd(t, nil, "status", "held")
	if !strings.Contains(r.stdout, "  holder:  luksd pid ") || !strings.Contains(r.stdout, "exclusive (OFD lock)") {
		t.Fatalf("status does not name the holder:\n%s", r.stdout)
	}
	link := img + ".link"
	if err := os.Link(img, link); err != nil {
		t.Fatal(err)
	}
	inUse := func(p string) string {
		return "Cannot use device " + p + " which is in use (already mapped or mounted)."
	}
	luksd(t, nil, "open", "--key-file", pass, link, "other").expect(t, exitBusy, inUse(link))
	luksd(t, nil, "luksFormat", "-q", "--key-file", pass, link).expect(t, exitBusy, inUse(link))
	if os.Geteuid() == 0 {
		if lo, err := exec.LookPath("losetup"); err == nil {
			out, err := exec.Command(lo, "-f", "--show", img).CombinedOutput()
			if err == nil {
				loop := strings.TrimSpace(string(out))
				r := luksd(t, nil, "open", "--key-file", pass, loop, "other")
				exec.Command(lo, "-d", loop).Run()
				r.expect(t, exitBusy, inUse(loop))
			} else {
				t.Logf("no loop device, that case is not tested: %s", out)
			}
		}
	}
	// cryptsetup's metadata lock is a flock: a key can still be added.
	newPass := testtool.KeyFile(t, []byte("second passphrase"))
	runTool(t, nil, cs, "luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--key-file", pass, img, newPass).expect(t, 0, "")

	stopVolume(t, "held", done)
	// Released with the daemon.
	done = runFakeVolume(t, cs, link, link, newPass, "again")
	closeVolume("again")
	waitDaemon(t, done)
}

// A data device held by someone else is refused by the daemon with
// cryptsetup's message, and what holds it goes to the log.
func TestDaemonRefusesClaimedImage(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	cs, img, pass := claimFixture(t)
	logged := captureLog(t)
	done := runFakeVolume(t, cs, img, img, pass, "first")
	defer func() { closeVolume("first"); waitDaemon(t, done) }()

	dump := runTool(t, nil, cs, "luksDump", "--dump-volume-key", "-q", "--key-file", pass, img)
	v := imageVolume(t, img, img, testtool.VolumeKey(t, dump.stdout))
	err := daemon.Run(v.spec("second", daemon.Options{Frontend: "fake"}), v.Key, daemon.RunOptions{})
	if exitCodeOf(err) != exitBusy || err.Error() != "Cannot use device "+img+" which is in use (already mapped or mounted)." {
		t.Fatalf("second daemon on the image: %v (exit %d)", err, exitCodeOf(err))
	}
	if !bytes.Contains([]byte(logged.String()), []byte("second: stopped: Cannot use device")) {
		t.Fatalf("log: %s", logged)
	}
}
