package testtool

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"testing"
)

// A fake NBD server for tests of NBD clients (package nbd's client, and
// the CLI and the daemon over an nbd:// location): it speaks the protocol
// from the wire format here, independent of the code under test, and a
// test decides what each connection does (FakeNBD), or only what each
// request is answered with (FakeNBDExport).

// The NBD protocol numbers the fake server uses
// (https://github.com/NetworkBlockDevice/nbd/blob/master/doc/proto.md).
const (
	nbdMagic          = 0x4e42444d41474943 // "NBDMAGIC"
	nbdOptMagic       = 0x49484156454F5054 // "IHAVEOPT"
	nbdOptReplyMagic  = 0x3e889045565a9
	nbdRequestMagic   = 0x25609513
	nbdFixedNewstyle  = 1 << 0
	nbdNoZeroes       = 1 << 1
	nbdOptGo          = 7
	nbdOptStructured  = 8
	nbdRepAck         = 1
	nbdRepInfo        = 3
	nbdRepErrUnsup    = 1<<31 + 1
	nbdInfoExport     = 0
	nbdFlagHasFlags   = 1 << 0
	nbdCmdWrite       = 1
	nbdRequestLen     = 28
	nbdMaxFakeOption  = 4096 // longer options end the connection
	nbdDefaultFakeLen = 1 << 20
)

// FakeNBD listens on a unix socket for the test's duration and runs serve
// on each connection (closing it when serve returns). It returns the
// nbd+unix:// URI of the default export.
func FakeNBD(t testing.TB, serve func(c net.Conn, r *bufio.Reader)) (uri string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return "nbd+unix:///?socket=" + sock
}

// FakeNBDExport is a FakeNBD that negotiates e on each connection
// (NBDNegotiate) and then answers each request with answer's bytes
// (NBDTransmit).
func FakeNBDExport(t testing.TB, e NBDExport, answer func(NBDRequest) []byte) (uri string) {
	t.Helper()
	return FakeNBD(t, func(c net.Conn, r *bufio.Reader) {
		if NBDNegotiate(c, r, e) {
			NBDTransmit(c, r, answer)
		}
	})
}

// NBDExport is the export NBDNegotiate offers.
type NBDExport struct {
	Size       uint64 // in bytes; 0 is 1 MiB
	Flags      uint16 // transmission flags; NBD_FLAG_HAS_FLAGS is always set
	Structured bool   // accept NBD_OPT_STRUCTURED_REPLY (else simple replies only)
}

// NBDNegotiate runs the fixed newstyle handshake (NO_ZEROES) on the
// server's side: it greets the client, reads its flags, answers NBD_OPT_GO
// with e (NBD_REP_INFO, then NBD_REP_ACK), NBD_OPT_STRUCTURED_REPLY with
// NBD_REP_ACK when e.Structured, and every other option with
// NBD_REP_ERR_UNSUP. It reports whether the transmission phase began
// (false: the client went away or sent no option).
func NBDNegotiate(c net.Conn, r *bufio.Reader, e NBDExport) bool {
	greet := binary.BigEndian.AppendUint64(nil, nbdMagic)
	greet = binary.BigEndian.AppendUint64(greet, nbdOptMagic)
	c.Write(binary.BigEndian.AppendUint16(greet, nbdFixedNewstyle|nbdNoZeroes))
	var clientFlags [4]byte
	if _, err := io.ReadFull(r, clientFlags[:]); err != nil {
		return false
	}
	size := e.Size
	if size == 0 {
		size = nbdDefaultFakeLen
	}
	for {
		var h [16]byte
		if _, err := io.ReadFull(r, h[:]); err != nil || binary.BigEndian.Uint64(h[:]) != nbdOptMagic {
			return false
		}
		opt, n := binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:])
		if n > nbdMaxFakeOption {
			return false
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return false
		}
		switch {
		case opt == nbdOptStructured && e.Structured:
			nbdOptReply(c, opt, nbdRepAck, nil)
		case opt == nbdOptGo:
			info := binary.BigEndian.AppendUint16(nil, nbdInfoExport)
			info = binary.BigEndian.AppendUint64(info, size)
			info = binary.BigEndian.AppendUint16(info, nbdFlagHasFlags|e.Flags)
			nbdOptReply(c, opt, nbdRepInfo, info)
			nbdOptReply(c, opt, nbdRepAck, nil)
			return true
		default:
			nbdOptReply(c, opt, nbdRepErrUnsup, nil)
		}
	}
}

func nbdOptReply(w io.Writer, opt, typ uint32, data []byte) {
	h := binary.BigEndian.AppendUint64(nil, nbdOptReplyMagic)
	h = binary.BigEndian.AppendUint32(h, opt)
	h = binary.BigEndian.AppendUint32(h, typ)
	h = binary.BigEndian.AppendUint32(h, uint32(len(data)))
	w.Write(append(h, data...))
}

// NBDRequest is one request of the transmission phase.
type NBDRequest struct {
	Flags, Type    uint16
	Cookie, Offset uint64
	Length         uint32
	Data           []byte // a write's payload
}

// NBDTransmit reads the client's requests (a write's payload with it)
// and writes, for each, what answer returns, until the client goes away,
// sends what is no request, or answer returns nil (hang up).
func NBDTransmit(c net.Conn, r *bufio.Reader, answer func(NBDRequest) []byte) {
	var h [nbdRequestLen]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil || binary.BigEndian.Uint32(h[:]) != nbdRequestMagic {
			return
		}
		req := NBDRequest{
			Flags:  binary.BigEndian.Uint16(h[4:]),
			Type:   binary.BigEndian.Uint16(h[6:]),
			Cookie: binary.BigEndian.Uint64(h[8:]),
			Offset: binary.BigEndian.Uint64(h[16:]),
			Length: binary.BigEndian.Uint32(h[24:]),
		}
		if req.Type == nbdCmdWrite {
			req.Data = make([]byte, req.Length)
			if _, err := io.ReadFull(r, req.Data); err != nil {
				return
			}
		}
		reply := answer(req)
		if reply == nil {
			return
		}
		c.Write(reply)
	}
}
