package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/luksd/luksd/internal/testtool"
)

// A remote NBD server that negotiates and then answers every request
// with garbage: luksDump fails at once, saying the server broke the
// protocol, instead of redialling it for a minute.
func TestNBDRemoteProtocolViolation(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "liar.sock")
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
			go lyingNBDServer(c)
		}
	}()
	uri := "nbd+unix:///?socket=" + sock
	bin := testtool.Luksd(t) // built before the clock starts
	start := time.Now()
	r := runTool(t, nil, bin, "luksDump", uri)
	took := time.Since(start)
	t.Logf("exit %d after %v: %s", r.code, took.Round(time.Millisecond), r.stderr)
	if r.code != exitParams || !strings.Contains(r.stderr, "broke the protocol: bad reply magic") {
		t.Errorf("exit %d, stderr %q; want exit %d naming the bad reply magic", r.code, r.stderr, exitParams)
	}
	if took > 5*time.Second {
		t.Errorf("luksDump failed after %v, want at once", took.Round(time.Millisecond))
	}
}

// lyingNBDServer negotiates fixed newstyle (no structured replies, a
// 1 MiB export) and answers every request with bytes that are no reply.
func lyingNBDServer(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	const optMagic = 0x49484156454F5054                             // IHAVEOPT
	greet := binary.BigEndian.AppendUint64(nil, 0x4e42444d41474943) // NBDMAGIC
	greet = binary.BigEndian.AppendUint64(greet, optMagic)
	c.Write(binary.BigEndian.AppendUint16(greet, 3)) // FIXED_NEWSTYLE|NO_ZEROES
	var b [16]byte
	if _, err := io.ReadFull(r, b[:4]); err != nil {
		return
	}
	optReply := func(opt, typ uint32, data []byte) {
		h := binary.BigEndian.AppendUint64(nil, 0x3e889045565a9)
		h = binary.BigEndian.AppendUint32(h, opt)
		h = binary.BigEndian.AppendUint32(h, typ)
		h = binary.BigEndian.AppendUint32(h, uint32(len(data)))
		c.Write(append(h, data...))
	}
	for {
		if _, err := io.ReadFull(r, b[:16]); err != nil {
			return
		}
		opt, n := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return
		}
		if opt != 7 { // not NBD_OPT_GO: NBD_REP_ERR_UNSUP
			optReply(opt, 1<<31+1, nil)
			continue
		}
		info := binary.BigEndian.AppendUint16(nil, 0) // NBD_INFO_EXPORT
		info = binary.BigEndian.AppendUint64(info, 1<<20)
		info = binary.BigEndian.AppendUint16(info, 1) // HAS_FLAGS
		optReply(opt, 3, info)                        // NBD_REP_INFO
		optReply(opt, 1, nil)                         // NBD_REP_ACK
		break
	}
	var req [28]byte
	for {
		if _, err := io.ReadFull(r, req[:]); err != nil {
			return
		}
		c.Write([]byte(strings.Repeat("\xfe", 64)))
	}
}
