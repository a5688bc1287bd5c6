package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

const sampleLuksdtab = `# NAS array
md1p1  /dev/md1p1            /root/keyfile   discard
net    UUID=ABCD-12EF        /etc/net.key    _netdev,keyfile-offset=4,keyfile-size=32,frontend=ublk
ask    LABEL=photos          none            tries=2,timeout=30,readonly,nofail
img    /srv/my%disk.img      -               noauto
`

// TestLuksdtab: what each option sets, and one-line errors for what
// luksd cannot honour.
func TestLuksdtab(t *testing.T) {
	es, err := parseLuksdtab(strings.NewReader(sampleLuksdtab))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 {
		t.Fatalf("%d entries, want 4", len(es))
	}
	md, net, ask, img := es[0], es[1], es[2], es[3]
	if md.Name != "md1p1" || md.Device != "/dev/md1p1" || md.KeyFile != "/root/keyfile" || !md.Discard || md.Line != 2 {
		t.Errorf("md1p1: %+v", md)
	}
	if !net.NetDev || net.KeyFileOffset != 4 || net.KeyFileSize != 32 || net.Frontend != "ublk" {
		t.Errorf("net: %+v", net)
	}
	if ask.KeyFile != "" || ask.Tries != 2 || ask.Timeout != 30 || !ask.ReadOnly || !ask.NoFail {
		t.Errorf("ask: %+v", ask)
	}
	if img.KeyFile != "" || !img.NoAuto || img.Frontend != "auto" {
		t.Errorf("img: %+v", img)
	}
	for line, want := range map[string]string{
		"x":                           "line 1: want NAME DEVICE",
		"a/b /dev/sda":                "Invalid device name",
		"x /dev/sda none tries=z":     "option tries needs a number",
		"x /dev/sda none header=/h":   `option "header=/h" is not supported by luksd`,
		"x /dev/sda none frontend=dm": "frontend=dm: want nbd, ublk or auto",
	} {
		if _, err := parseLuksdtab(strings.NewReader(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", line, err, want)
		}
	}
}

// TestGenerator runs the built luksd as luksd-generator (a link by that
// name, as installed) on a sample table, checks the units and the links
// that pull them in, and has systemd-analyze verify every unit.
func TestGenerator(t *testing.T) {
	dir := t.TempDir()
	tab := filepath.Join(dir, "luksdtab")
	if err := os.WriteFile(tab, []byte(sampleLuksdtab), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, generatorName)
	if err := os.Symlink(testtool.Luksd(t), gen); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "normal")
	for _, d := range []string{out, dir + "/early", dir + "/late"} {
		os.Mkdir(d, 0o755)
	}
	cmd := exec.Command(gen, out, dir+"/early", dir+"/late")
	cmd.Env = append(os.Environ(), "LUKSDTAB="+tab)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v: %s", err, b)
	}
	unit := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, "luksd@"+name+".service"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	exe := testtool.Luksd(t)
	want := map[string][]string{
		"md1p1": {"Type=notify", "BindsTo=dev-md1p1.device", "After=dev-md1p1.device", "Before=cryptsetup.target",
			"RequiresMountsFor=/root/keyfile", "ExecStop=" + exe + " close md1p1",
			"ExecStart=" + exe + " open --foreground --frontend auto --allow-discards --key-file /root/keyfile /dev/md1p1 md1p1"},
		"net": {"Before=remote-cryptsetup.target", "After=remote-fs-pre.target network-online.target",
			`BindsTo=dev-disk-by\x2duuid-abcd\x2d12ef.device`,
			"ExecStart=" + exe + " open --foreground --frontend ublk --key-file /etc/net.key --keyfile-offset 4 --keyfile-size 32 /dev/disk/by-uuid/abcd-12ef net"},
		"ask": {`BindsTo=dev-disk-by\x2dlabel-photos.device`, "systemd-ask-password", "--readonly", "luksd-ask ask /dev/disk/by-label/photos 2 30"},
		"img": {"RequiresMountsFor=/srv/my%%disk.img", "luksd-ask img /srv/my%%disk.img 3 0"},
	}
	for name, lines := range want {
		u := unit(name)
		for _, l := range lines {
			if !strings.Contains(u, l) {
				t.Errorf("luksd@%s.service lacks %q:\n%s", name, l, u)
			}
		}
	}
	if strings.Contains(unit("net"), "Before=cryptsetup.target") {
		t.Error("the _netdev volume is ordered before cryptsetup.target")
	}
	for _, link := range []string{"cryptsetup.target.requires/luksd@md1p1.service", "remote-cryptsetup.target.requires/luksd@net.service",
		"cryptsetup.target.wants/luksd@ask.service", "dev-mapper-img.device.requires/luksd@img.service"} {
		if _, err := os.Stat(filepath.Join(out, link)); err != nil {
			t.Errorf("link %s: %v", link, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "cryptsetup.target.requires/luksd@img.service")); err == nil {
		t.Error("noauto volume pulled in by cryptsetup.target")
	}

	analyze := testtool.Need(t, "systemd-analyze")
	units, _ := filepath.Glob(filepath.Join(out, "*.service"))
	args := append([]string{"verify", "--man=no", "--generators=no"}, units...)
	vc := exec.Command(analyze, args...)
	vc.Dir = out
	if b, err := vc.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, b)
	}

	// A missing table is no error and makes nothing.
	empty := t.TempDir()
	cmd = exec.Command(gen, empty, empty, empty)
	cmd.Env = append(os.Environ(), "LUKSDTAB="+filepath.Join(dir, "none"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator without a table: %v: %s", err, b)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("generator without a table made %d files", len(ents))
	}
}
