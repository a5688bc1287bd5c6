package nbd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// rawClient speaks just enough NBD to test the server byte by byte.
type rawClient struct {
	c      net.Conn
	r      *bufio.Reader
	size   uint64
	flags  uint16
	cookie uint64
}

func dialRaw(t testing.TB, sock string) *rawClient {
	t.Helper()
	return dialRawNet(t, "unix", sock)
}

// dialRawNet connects a rawClient over network ("unix" or "tcp").
func dialRawNet(t testing.TB, network, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawClient{c: c, r: bufio.NewReader(c)}
}

// greet reads the server's greeting and sends the client flags.
func (rc *rawClient) greet(t testing.TB, clientFlags uint32) {
	t.Helper()
	var g [18]byte
	if _, err := io.ReadFull(rc.r, g[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint64(g[0:]) != magicInit || binary.BigEndian.Uint64(g[8:]) != magicIHaveOpt ||
		binary.BigEndian.Uint16(g[16:]) != flagFixedNew|flagNoZeroes {
		t.Fatalf("bad greeting % x", g)
	}
	rc.send(t, binary.BigEndian.AppendUint32(nil, clientFlags))
}

func (rc *rawClient) send(t testing.TB, b []byte) {
	t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// option sends an option and returns the replies up to and including the
// first that is not NBD_REP_INFO / NBD_REP_SERVER.
func (rc *rawClient) option(t testing.TB, opt uint32, data []byte) (types []uint32, payloads [][]byte) {
	t.Helper()
	rc.send(t, optionBytes(opt, data))
	for {
		typ, p := rc.optionReply(t, opt)
		types = append(types, typ)
		payloads = append(payloads, p)
		if typ != repInfo && typ != repServer {
			return types, payloads
		}
	}
}

// optionReply reads one reply to option opt: its type and payload.
func (rc *rawClient) optionReply(t testing.TB, opt uint32) (uint32, []byte) {
	t.Helper()
	var h [optReplyHeaderLen]byte
	if _, err := io.ReadFull(rc.r, h[:]); err != nil {
		t.Fatalf("reading reply to option %d: %v", opt, err)
	}
	if binary.BigEndian.Uint64(h[0:]) != magicOptReply || binary.BigEndian.Uint32(h[8:]) != opt {
		t.Fatalf("bad option reply header % x", h)
	}
	p := make([]byte, binary.BigEndian.Uint32(h[16:]))
	if _, err := io.ReadFull(rc.r, p); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(h[12:]), p
}

func goData(name string, infos ...uint16) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(infos)))
	for _, i := range infos {
		b = binary.BigEndian.AppendUint16(b, i)
	}
	return b
}

// dialGo connects and enters the transmission phase with NBD_OPT_GO.
func dialGo(t testing.TB, sock, name string) *rawClient {
	t.Helper()
	rc := dialRaw(t, sock)
	rc.greet(t, flagCFixedNew|flagCNoZeroes)
	types, payloads := rc.option(t, optGo, goData(name))
	if types[len(types)-1] != repAck {
		t.Fatalf("NBD_OPT_GO refused: %#x", types)
	}
	for i, p := range payloads {
		if types[i] == repInfo && binary.BigEndian.Uint16(p) == infoExport {
			rc.size = binary.BigEndian.Uint64(p[2:])
			rc.flags = binary.BigEndian.Uint16(p[10:])
		}
	}
	return rc
}

func requestBytes(typ, flags uint16, cookie, off uint64, length uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, magicRequest)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint64(b, off)
	return binary.BigEndian.AppendUint32(b, length)
}

// simpleReply reads a simple reply and returns its error and cookie.
func (rc *rawClient) simpleReply(t testing.TB) (uint32, uint64) {
	t.Helper()
	var h [simpleReplyLen]byte
	if _, err := io.ReadFull(rc.r, h[:]); err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	if binary.BigEndian.Uint32(h[0:]) != magicSimpleReply {
		t.Fatalf("bad reply magic % x", h)
	}
	return binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint64(h[8:])
}

// cmd sends a request without payload and returns the reply's error.
func (rc *rawClient) cmd(t testing.TB, typ, flags uint16, off uint64, length uint32) uint32 {
	t.Helper()
	rc.cookie++
	rc.send(t, requestBytes(typ, flags, rc.cookie, off, length))
	code, cookie := rc.simpleReply(t)
	if cookie != rc.cookie {
		t.Fatalf("reply cookie %d, want %d", cookie, rc.cookie)
	}
	return code
}

func (rc *rawClient) write(t testing.TB, off uint64, data []byte, flags uint16) uint32 {
	t.Helper()
	rc.cookie++
	rc.send(t, append(requestBytes(cmdWrite, flags, rc.cookie, off, uint32(len(data))), data...))
	code, cookie := rc.simpleReply(t)
	if cookie != rc.cookie {
		t.Fatalf("reply cookie %d, want %d", cookie, rc.cookie)
	}
	return code
}

// read reads with simple replies (no structured replies negotiated).
func (rc *rawClient) read(t testing.TB, off uint64, n uint32) ([]byte, uint32) {
	t.Helper()
	rc.cookie++
	rc.send(t, requestBytes(cmdRead, 0, rc.cookie, off, n))
	code, cookie := rc.simpleReply(t)
	if cookie != rc.cookie {
		t.Fatalf("reply cookie %d, want %d", cookie, rc.cookie)
	}
	if code != 0 {
		return nil, code
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rc.r, b); err != nil {
		t.Fatal(err)
	}
	return b, 0
}

// closed reports whether the server hung up (reading hits EOF or reset).
func (rc *rawClient) closed(t testing.TB) bool {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadAll(rc.r)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
	}
	return true
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
