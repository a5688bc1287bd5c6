package nbd

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
)

// Seed corpora live in testdata/fuzz/<target>; `make fuzz` runs each
// target for a while, `go test` runs the seeds.

// FuzzHandshake feeds arbitrary client bytes to the option haggling.
func FuzzHandshake(f *testing.F) {
	f.Add(append([]byte{0, 0, 0, 3}, optionBytes(optGo, goData("", infoBlockSize))...))
	srv := NewServer(devtest.NewMem(1<<16), Config{Name: "vol", Description: "fuzz"})
	f.Fuzz(func(t *testing.T, in []byte) {
		res, err := srv.handshake(&handshakeConn{r: bufio.NewReader(bytes.NewReader(in)), w: io.Discard})
		if err == nil && !srv.knows(res.export) {
			t.Fatalf("handshake chose unknown export %q", res.export)
		}
	})
}

// FuzzInfoRequest checks the NBD_OPT_INFO/GO parser against its layout.
func FuzzInfoRequest(f *testing.F) {
	f.Add(goData("vol", infoName, infoBlockSize))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		name, infos, err := parseInfoRequest(in)
		if err != nil {
			return
		}
		if !bytes.Equal(goData(name, infos...), in) {
			t.Fatalf("parsed %q %v does not re-encode to the input", name, infos)
		}
	})
}

// FuzzTransmission feeds arbitrary requests to a session over a small
// in-memory device, with and without structured replies (with them,
// base:allocation is selected too).
func FuzzTransmission(f *testing.F) {
	f.Add(append(requestBytes(cmdWrite, cmdFlagFUA, 1, 512, 4), "abcd"...), false)
	f.Add(requestBytes(cmdRead, 0, 2, 0, 4096), true)
	f.Add(requestBytes(cmdBlockStatus, 0, 3, 512, 4096), true)
	f.Fuzz(func(t *testing.T, in []byte, structured bool) {
		dev := devtest.NewMem(1 << 16)
		srv := NewServer(dev, Config{MaxRequest: 1 << 16, MaxInFlightBytes: 1 << 17})
		ss := srv.newSession(bufio.NewReader(bytes.NewReader(in)), io.Discard, srv.Flags(), structured)
		ss.allocation = structured
		ss.serve()
	})
}
