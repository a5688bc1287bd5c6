package nbd

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// FuzzHandshakeTLS feeds arbitrary client bytes to the option haggling of
// a server that requires TLS, before the upgrade and (upgraded) as if
// after it. Before the upgrade no input may reach the transmission phase;
// after it, no input may choose an unknown export; never a panic.
func FuzzHandshakeTLS(f *testing.F) {
	hello := []byte{0, 0, 0, 1}
	f.Add(append(hello, optionBytes(optGo, goData(""))...), false)
	f.Add(append(hello, optionBytes(optExportName, []byte("vol"))...), false)
	f.Add(append(append(hello, optionBytes(optStartTLS, []byte("x"))...), optionBytes(optAbort, nil)...), false)
	f.Add(append(append(hello, optionBytes(optStartTLS, nil)...), optionBytes(optGo, goData(""))...), true)
	f.Add(append(append(hello, optionBytes(optStructuredReply, nil)...), optionBytes(optGo, goData("vol"))...), true)
	ca := testtool.NewCA(f, "fuzz CA")
	cfg, err := LoadTLSDir(ca.ServerDir(f), true)
	if err != nil {
		f.Fatal(err)
	}
	srv := NewServer(devtest.NewMem(1<<16), Config{Name: "vol", TLS: cfg, TLSMode: TLSRequire})
	f.Fuzz(func(t *testing.T, in []byte, upgraded bool) {
		hc := &handshakeConn{r: bufio.NewReader(bytes.NewReader(in)), w: io.Discard}
		if upgraded {
			hc.tls = &tls.Conn{} // only ever compared with nil here
		}
		res, err := srv.handshake(hc)
		if err == nil && !upgraded {
			t.Fatalf("a plaintext client reached export %q of a server requiring TLS", res.export)
		}
		if err == nil && !srv.knows(res.export) {
			t.Fatalf("handshake chose unknown export %q", res.export)
		}
	})
}
