package nbd

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestAccessRealClients: per-export access with openssl certificates for
// three subjects, used by libnbd's and qemu's clients: alice may write,
// bob may only read (writes fail with EPERM), carol is refused.
func TestAccessRealClients(t *testing.T) {
	testtool.Need(t, "openssl")
	serverDir, clients := testtool.OpenSSLClients(t, "alice", "bob", "carol")
	alice, bob, carol := clients[0], clients[1], clients[2]
	access, err := ParseAccess(strings.NewReader(
		"vol rw subject=CN=alice,O=luksd tests\nvol ro cn=bob\nother rw cn=carol\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := serveTLS(t, TLSRequire, serverDir, true, Config{Name: "vol", Access: access})
	uri := func(dir string) string { return "nbds://" + e.addr + "/vol?tls-certificates=" + dir }

	dir := t.TempDir()
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	data := make([]byte, 4<<20)
	rand.Read(data)
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", src, uri(alice))

	// bob: read-only, reads what alice wrote, cannot write.
	var info struct {
		Exports []struct {
			ReadOnly bool `json:"is_read_only"`
		} `json:"exports"`
	}
	out := testtool.Run(t, "nbdinfo", "--json", uri(bob))
	if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.Exports) != 1 || !info.Exports[0].ReadOnly {
		t.Errorf("nbdinfo as bob does not show a read-only export: %v\n%s", err, out)
	}
	testtool.Run(t, "nbdcopy", uri(bob), back)
	if b, _ := os.ReadFile(back); !bytes.Equal(b, data) {
		t.Error("bob reads other data than alice wrote")
	}
	if out, err := testtool.Output(t, "nbdcopy", src, uri(bob)); err == nil {
		t.Errorf("nbdcopy as bob wrote to a read-only grant: %s", out)
	}
	host, port, _ := strings.Cut(e.addr, ":")
	qemu := func(dir string, cmds ...string) (string, error) {
		args := []string{"--object", "tls-creds-x509,id=tls0,endpoint=client,dir=" + dir, "--image-opts"}
		for _, c := range cmds {
			args = append(args, "-c", c)
		}
		args = append(args, "driver=nbd,export=vol,server.type=inet,server.host="+host+",server.port="+port+",tls-creds=tls0")
		return testtool.Output(t, "qemu-io", args...)
	}
	// qemu refuses to open a read-only export for writing (EACCES), so
	// its write never reaches the wire; TestAccessRefusal sends one.
	if out, err := qemu(bob, "write -P 7 0 4096"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("qemu-io write as bob: %v\n%s", err, out)
	}
	got := make([]byte, 4096)
	e.dev.ReadAt(got, 0)
	if !bytes.Equal(got, data[:4096]) {
		t.Error("bob's write reached the device")
	}
	out, err = qemu(alice, "write -P 9 0 4096", "read -P 9 0 4096")
	if err != nil || strings.Contains(out, "fail") || !strings.Contains(out, "read 4096/4096") {
		t.Errorf("qemu-io as alice: %v\n%s", err, out)
	}

	// carol: refused on this export, with the spec's reply and a log line.
	out, err = testtool.Output(t, "nbdinfo", "--size", uri(carol))
	if err == nil {
		t.Fatalf("nbdinfo as carol got in: %s", out)
	}
	t.Logf("nbdinfo as carol: %s", strings.TrimSpace(out))
	e.logged(t, "CN=carol,O=luksd tests", `may not use export "vol"`, "NBD_REP_ERR_POLICY")
	if out, err := qemu(carol, "read 0 512"); err == nil || strings.Contains(out, "read 512/512") {
		t.Errorf("qemu-io as carol got in: %s", out)
	}
}
