package testtool

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tangd is where Debian's tang package puts the server.
const tangd = "/usr/libexec/tangd"

// A TangServer is a real tangd (Debian's tang 11), one process per
// connection under systemd-socket-activate --inetd, on a loopback port.
type TangServer struct {
	URL string
	cmd *exec.Cmd
}

// Tang starts a tang server with a fresh key pair on curve ("P-521",
// tangd-keygen's, or "P-256", "P-384", made with jose) and stops it when
// the test ends.
func Tang(t testing.TB, curve string) *TangServer {
	t.Helper()
	activate := Need(t, "systemd-socket-activate")
	if _, err := os.Stat(tangd); err != nil {
		Missing(t, tangd+" is not installed (Debian package tang; run `make deps`)")
	}
	db := t.TempDir()
	if curve == "P-521" {
		Run(t, "/usr/libexec/tangd-keygen", db)
	} else {
		sig := map[string]string{"P-256": "ES256", "P-384": "ES384"}[curve]
		if sig == "" {
			t.Fatalf("tang: no keys for curve %q", curve)
		}
		Run(t, "jose", "jwk", "gen", "-i", `{"alg":"`+sig+`"}`, "-o", filepath.Join(db, "sig.jwk"))
		Run(t, "jose", "jwk", "gen", "-i", `{"alg":"ECMR","crv":"`+curve+`"}`, "-o", filepath.Join(db, "exc.jwk"))
	}
	addr := FreeLoopbackPort(t)
	cmd := exec.Command(activate, "-a", "--inetd", "-l", addr, tangd, db)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting tangd: %v", err)
	}
	s := &TangServer{URL: "http://" + addr, cmd: cmd}
	t.Cleanup(s.Stop)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatalf("tangd did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Stop ends the server; its URL then refuses connections.
func (s *TangServer) Stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}
