package testtool

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// SWTPM starts a software TPM 2.0 (Debian's swtpm 0.7.1) with fresh
// state on loopback ports and returns the device string systemd's tools
// and luksd take for it ("swtpm:host=127.0.0.1,port=P"). It stops with
// the test.
func SWTPM(t testing.TB) string {
	t.Helper()
	swtpm := Need(t, "swtpm")
	// The swtpm TCTI finds the control port at the data port + 1.
	port := freePortPair(t)
	data := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(swtpm, "socket", "--tpm2", "--tpmstate", "dir="+t.TempDir(),
		"--server", fmt.Sprintf("type=tcp,bindaddr=127.0.0.1,port=%d", port),
		"--ctrl", fmt.Sprintf("type=tcp,bindaddr=127.0.0.1,port=%d", port+1),
		"--flags", "not-need-init,startup-clear")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting swtpm: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", data)
		if err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatalf("swtpm did not listen on %s: %v", data, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("swtpm:host=127.0.0.1,port=%d", port)
}

// freePortPair returns a loopback port P such that nothing listens on P
// or P+1 now.
func freePortPair(t testing.TB) int {
	t.Helper()
	for range 100 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no two free loopback ports in a row")
	return 0
}

// CryptenrollTPM2 has the real systemd-cryptenroll (systemd 252) seal a
// new keyslot of img to the software TPM dev, with its extra args (such
// as --tpm2-pcrs=7). env gives it what it reads from the environment
// when unattended: PASSWORD= (the existing passphrase) and, with
// --tpm2-with-pin=yes, NEWPIN= (the peer tool's ways, not luksd's).
func CryptenrollTPM2(t testing.TB, dev, img string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(Need(t, "systemd-cryptenroll"), append([]string{"--tpm2-device=" + dev}, append(args, img)...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-cryptenroll: %v\n%s", err, out)
	}
}
