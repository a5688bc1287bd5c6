package daemon

import (
	"bytes"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
	"github.com/luksd/luksd/keyring"
)

// A daemon logs what its remote volume logs besides the errors it
// returns: an NBD server that breaks the protocol is in the daemon's log
// (a one-shot CLI verb only prints its error).
func TestRemoteViolationLogged(t *testing.T) {
	log := captureLog(t)
	uri := testtool.FakeNBDExport(t, testtool.NBDExport{}, func(testtool.NBDRequest) []byte {
		return []byte(strings.Repeat("\xfe", 64)) // no reply
	})
	key, err := keyring.FromBytes(bytes.Repeat([]byte{7}, 64))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Location: uri, Type: "PLAIN",
		Segment: Segment{Cipher: "aes-xts-plain64", Size: 1 << 20, SectorSize: 512, KeySize: 64}}
	d, _, _, err := openCrypt(spec, key)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ReadAt(make([]byte, 4096), 0); err == nil || !strings.Contains(err.Error(), "bad reply magic") {
		t.Fatalf("read from a server that broke the protocol: %v, want an error naming the bad reply magic", err)
	}
	if s := log.String(); !strings.Contains(s, "nbd: server ") || !strings.Contains(s, "broke the protocol: bad reply magic 0xfefefefe") {
		t.Fatalf("the daemon's log %q does not name the violation", s)
	}
}
