package nbd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// serveHeld serves a 1 MiB device whose reads at offset 0 wait until the
// returned Hold is released, while the others pass.
func serveHeld(t *testing.T) (*devtest.Hold, string, *Server) {
	t.Helper()
	dev := devtest.NewHold(devtest.NewMem(1 << 20))
	dev.StallIf(func(op devtest.ErringOp, off int64) bool { return op == devtest.OpRead && off == 0 })
	sock, srv := serveMem(t, dev, Config{})
	return dev, sock, srv
}

// serveMem serves dev on a fresh unix socket and returns the socket path.
func serveMem(t *testing.T, dev blockdev.Device, cfg Config) (string, *Server) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	l, err := ListenUnix(sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(dev, cfg)
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return sock, srv
}

// stillServes checks that a well-behaved client gets its data.
func stillServes(t *testing.T, sock string) {
	t.Helper()
	c := dialGo(t, sock, "")
	if code := c.write(t, 4096, []byte("alive"), 0); code != 0 {
		t.Fatalf("a good client's write failed: %d", code)
	}
	if b, code := c.read(t, 4096, 5); code != 0 || string(b) != "alive" {
		t.Fatalf("a good client's read: %q, %d", b, code)
	}
}

func TestProtocolErrorCodes(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	errs := devtest.NewErring(mem)
	dev := devtest.NewDiscard(errs, blockdev.Caps{WriteZeroes: true})
	sock, _ := serveMem(t, dev, Config{Name: "x", MaxRequest: 1 << 20})
	c := dialGo(t, sock, "x")
	if c.size != 1<<20 || c.flags&FlagSendTrim != 0 || c.flags&FlagCanMultiConn == 0 {
		t.Fatalf("size %d flags %#x", c.size, c.flags)
	}
	const huge = ^uint64(0) - 511
	for _, tc := range []struct {
		name string
		got  uint32
		want uint32
	}{
		{"read at the end", func() uint32 { _, c := c.read(t, 1<<20, 1); return c }(), errInval},
		{"read crossing the end", func() uint32 { _, c := c.read(t, 1<<20-1, 2); return c }(), errInval},
		{"read at a wrapping offset", func() uint32 { _, c := c.read(t, huge, 1024); return c }(), errInval},
		{"read over the maximum", func() uint32 { _, c := c.read(t, 0, 1<<20+1); return c }(), errInval},
		{"write past the end", c.write(t, 1<<20-2, []byte("abc"), 0), errNoSpc},
		{"write at a wrapping offset", c.write(t, huge, make([]byte, 1024), 0), errNoSpc},
		{"zeroes past the end", c.cmd(t, cmdWriteZeroes, 0, 1<<20, 1), errNoSpc},
		{"zeroes with fast-zero", c.cmd(t, cmdWriteZeroes, cmdFlagFastZero, 0, 1), errInval},
		{"trim not offered", c.cmd(t, cmdTrim, 0, 0, 4096), errInval},
		{"unknown command", c.cmd(t, 99, 0, 0, 0), errInval},
		{"cache (not offered)", c.cmd(t, 5, 0, 0, 512), errInval},
		{"write with FUA", c.write(t, 100, []byte("fua"), cmdFlagFUA), 0},
		{"write zeroes no-hole", c.cmd(t, cmdWriteZeroes, cmdFlagNoHole, 0, 50), 0},
		{"flush", c.cmd(t, cmdFlush, 0, 0, 0), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	flushes, zeroCalls := mem.Flushes(), len(dev.Zeroed())
	if flushes != 2 || zeroCalls != 1 {
		t.Errorf("flushes %d (want 2: FUA and FLUSH), zero calls %d (want 1)", flushes, zeroCalls)
	}
	if b, code := c.read(t, 0, 103); code != 0 || !bytes.Equal(b, append(make([]byte, 100), "fua"...)) {
		t.Fatalf("data after zeroes and FUA write: %q %d", b, code)
	}
	errs.Fail(devtest.OpRead, errors.New("injected read failure"))
	errs.Fail(devtest.OpWrite, errors.New("injected write failure"))
	if _, code := c.read(t, 0, 10); code != errIO {
		t.Errorf("failing read: error %d, want EIO", code)
	}
	if code := c.write(t, 0, []byte("x"), 0); code != errIO {
		t.Errorf("failing write: error %d, want EIO", code)
	}
	c.send(t, requestBytes(cmdDisc, 0, 1, 0, 0))
	if !c.closed(t) {
		t.Fatal("server kept the connection after NBD_CMD_DISC")
	}
}

func TestStructuredReadReplies(t *testing.T) {
	dev := devtest.MemOf(bytes.Repeat([]byte("0123456789abcdef"), 1<<12))
	sock, _ := serveMem(t, dev, Config{})
	c := dialRaw(t, sock)
	c.greet(t, flagCFixedNew|flagCNoZeroes)
	if types, _ := c.option(t, optStructuredReply, nil); types[0] != repAck {
		t.Fatalf("structured replies refused: %#x", types)
	}
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("GO refused: %#x", types)
	}
	c.send(t, requestBytes(cmdRead, 0, 7, 16, 32))
	var h [structuredHeaderLen + 8]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(h[0:]) != magicStructuredReply || binary.BigEndian.Uint16(h[4:]) != replyFlagDone ||
		binary.BigEndian.Uint16(h[6:]) != replyTypeOffsetData || binary.BigEndian.Uint64(h[8:]) != 7 ||
		binary.BigEndian.Uint32(h[16:]) != 40 || binary.BigEndian.Uint64(h[20:]) != 16 {
		t.Fatalf("bad OFFSET_DATA chunk header % x", h)
	}
	data := make([]byte, 32)
	io.ReadFull(c.r, data)
	if string(data) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("data %q", data)
	}
	c.send(t, requestBytes(cmdRead, 0, 8, 1<<20, 32))
	var e [structuredHeaderLen + structuredErrorLength]byte
	if _, err := io.ReadFull(c.r, e[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint16(e[6:]) != replyTypeError || binary.BigEndian.Uint64(e[8:]) != 8 ||
		binary.BigEndian.Uint32(e[20:]) != errInval || binary.BigEndian.Uint16(e[4:]) != replyFlagDone {
		t.Fatalf("bad error chunk % x", e)
	}
	// Commands without payload keep simple replies.
	if code := c.cmd(t, cmdFlush, 0, 0, 0); code != 0 {
		t.Fatalf("flush: %d", code)
	}
}

func TestRepliesOutOfOrder(t *testing.T) {
	dev, sock, _ := serveHeld(t)
	c := dialGo(t, sock, "")
	// The read at offset 0 blocks in the device; the one after it must be
	// answered first.
	c.send(t, requestBytes(cmdRead, 0, 1, 0, 512))
	c.send(t, requestBytes(cmdRead, 0, 2, 4096, 512))
	code, cookie := c.simpleReply(t)
	if code != 0 || cookie != 2 {
		t.Fatalf("first reply: cookie %d error %d, want the second request's", cookie, code)
	}
	io.ReadFull(c.r, make([]byte, 512))
	dev.Release()
	if code, cookie := c.simpleReply(t); code != 0 || cookie != 1 {
		t.Fatalf("second reply: cookie %d error %d", cookie, code)
	}
}

// recoverableOptions are option errors the client can recover from: the
// server answers each with an error reply and goes on.
var recoverableOptions = []struct {
	name string
	opt  uint32
	data []byte
	want uint32
}{
	{"info with a name longer than the option", optInfo, []byte{0, 0, 1, 0, 'v', 0, 0}, repErrInvalid},
	{"info with a wrong request count", optInfo, append(goData("vol"), 0, 1), repErrInvalid},
	{"info too short", optInfo, []byte{0, 0}, repErrInvalid},
	{"info for an unknown export", optInfo, goData("other"), repErrUnknown},
	{"list with data", optList, []byte("x"), repErrInvalid},
	{"structured reply with data", optStructuredReply, []byte("x"), repErrInvalid},
	{"starttls", optStartTLS, nil, repErrUnsup},
	{"meta context without structured replies", optSetMetaContext, metaData("vol", baseAllocation), repErrInvalid},
	{"meta context garbage", optListMetaContext, []byte("0000base:allocation"), repErrInvalid},
	{"extended headers", optExtendedHeaders, nil, repErrUnsup},
	{"unknown option", 0x7777, bytes.Repeat([]byte("z"), 1000), repErrUnsup},
}

func TestHostileHandshakes(t *testing.T) {
	dev := devtest.NewMem(1 << 20)
	sock, _ := serveMem(t, dev, Config{Name: "vol"})
	closedAfter := func(name string, fn func(c *rawClient)) {
		t.Helper()
		c := dialRaw(t, sock)
		fn(c)
		if !c.closed(t) {
			t.Errorf("%s: the server kept the connection", name)
		}
		stillServes(t, sock)
	}
	closedAfter("garbage instead of client flags", func(c *rawClient) {
		io.ReadFull(c.r, make([]byte, 18))
		c.send(t, []byte("GET / HTTP/1.1\r\n\r\n"))
	})
	closedAfter("unknown client flags", func(c *rawClient) { c.greet(t, 0x80) })
	closedAfter("bad option magic", func(c *rawClient) {
		c.greet(t, flagCFixedNew)
		c.send(t, bytes.Repeat([]byte{0xff}, 16))
	})
	closedAfter("4 GiB option", func(c *rawClient) {
		c.greet(t, flagCFixedNew)
		b := binary.BigEndian.AppendUint64(nil, magicIHaveOpt)
		b = binary.BigEndian.AppendUint32(b, optGo)
		c.send(t, binary.BigEndian.AppendUint32(b, 0xffffffff))
	})
	closedAfter("truncated option", func(c *rawClient) {
		c.greet(t, flagCFixedNew)
		c.send(t, optionBytes(optGo, goData("vol"))[:20])
		c.c.(*net.UnixConn).CloseWrite()
	})
	closedAfter("unknown export by name", func(c *rawClient) {
		c.greet(t, flagCFixedNew)
		c.send(t, optionBytes(optExportName, []byte("nope")))
	})
	closedAfter("abort", func(c *rawClient) {
		c.greet(t, flagCFixedNew)
		if types, _ := c.option(t, optAbort, nil); types[0] != repAck {
			t.Errorf("abort: reply %#x", types)
		}
	})
	closedAfter("endless options", func(c *rawClient) {
		c.greet(t, flagCFixedNew)
		var b []byte
		for range maxOptions + 1 {
			b = append(b, optionBytes(optStructuredReply, nil)...)
		}
		go c.c.Write(b)
	})

	// Errors the client can recover from: the server answers and goes on.
	c := dialRaw(t, sock)
	c.greet(t, flagCFixedNew)
	for _, tc := range recoverableOptions {
		types, _ := c.option(t, tc.opt, tc.data)
		if len(types) != 1 || types[0] != tc.want {
			t.Errorf("%s: replies %#x, want %#x", tc.name, types, tc.want)
		}
	}
	types, payloads := c.option(t, optList, nil)
	if len(types) != 2 || types[0] != repServer || string(payloads[0][4:]) != "vol" || types[1] != repAck {
		t.Errorf("list: %#x %q", types, payloads)
	}
	types, payloads = c.option(t, optInfo, goData("vol", infoName, infoBlockSize))
	var gotName, gotBlock bool
	for i, p := range payloads {
		if types[i] == repInfo && binary.BigEndian.Uint16(p) == infoName {
			gotName = string(p[2:]) == "vol"
		}
		if types[i] == repInfo && binary.BigEndian.Uint16(p) == infoBlockSize {
			gotBlock = binary.BigEndian.Uint32(p[2:]) == 1 && binary.BigEndian.Uint32(p[10:]) == 32<<20
		}
	}
	if !gotName || !gotBlock || types[len(types)-1] != repAck {
		t.Errorf("info: %#x %q", types, payloads)
	}
	// NBD_OPT_EXPORT_NAME without NO_ZEROES: size, flags and 124 zeroes.
	c.send(t, optionBytes(optExportName, []byte("vol")))
	reply := make([]byte, 10+exportNamePad)
	if _, err := io.ReadFull(c.r, reply); err != nil || binary.BigEndian.Uint64(reply) != 1<<20 || !bytes.Equal(reply[10:], make([]byte, exportNamePad)) {
		t.Fatalf("export name reply % x: %v", reply[:10], err)
	}
	if b, code := c.read(t, 0, 4); code != 0 || len(b) != 4 {
		t.Fatalf("read after EXPORT_NAME: %d", code)
	}
}

func TestHostileTransmission(t *testing.T) {
	dev := devtest.NewMem(1 << 20)
	sock, _ := serveMem(t, dev, Config{MaxRequest: 64 << 10})
	c := dialGo(t, sock, "")
	c.send(t, requestBytes(cmdWrite, 0, 1, 0, 64<<10+1))
	if code, cookie := c.simpleReply(t); code != errInval || cookie != 1 {
		t.Fatalf("write over the maximum: error %d for cookie %d, want EINVAL", code, cookie)
	}
	if !c.closed(t) {
		t.Fatal("write over the maximum: the server kept the connection")
	}
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"write of 4 GiB", requestBytes(cmdWrite, 0, 1, 0, 0xffffffff)},
		{"bad request magic", bytes.Repeat([]byte{0x42}, 28)},
		{"truncated write payload", append(requestBytes(cmdWrite, 0, 1, 0, 4096), make([]byte, 100)...)},
		{"truncated header", requestBytes(cmdRead, 0, 1, 0, 512)[:10]},
	} {
		c := dialGo(t, sock, "")
		c.send(t, tc.send)
		c.c.(*net.UnixConn).CloseWrite()
		if !c.closed(t) {
			t.Errorf("%s: the server kept the connection", tc.name)
		}
		stillServes(t, sock)
	}
	// Many pipelined requests whose replies the client never reads: the
	// server stops reading when its budget is used up instead of
	// buffering without bound, and the client can still hang up.
	c = dialGo(t, sock, "")
	go func() {
		for i := range 4000 {
			if _, err := c.c.Write(requestBytes(cmdRead, 0, uint64(i), 0, 64<<10)); err != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	c.c.Close()
	stillServes(t, sock)
}

func TestIdleConnectionsTimeOut(t *testing.T) {
	dev := devtest.NewMem(1 << 20)
	sock, _ := serveMem(t, dev, Config{HandshakeTimeout: 3 * time.Second, MaxConns: 400})
	var idle []net.Conn
	for range 300 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	stillServes(t, sock)
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("idle connection %d not closed by the handshake timeout: %v", i, err)
		}
	}
	stillServes(t, sock)
}

func TestServeTransmissionSocketpair(t *testing.T) {
	dev := devtest.NewMem(1 << 20)
	srv := NewServer(dev, Config{})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTransmission(conns[0], srv.Flags()) }()
	c := &rawClient{c: conns[1], r: bufioReader(conns[1])}
	defer c.c.Close()
	if code := c.write(t, 512, []byte("kernel"), 0); code != 0 {
		t.Fatalf("write: %d", code)
	}
	if b, code := c.read(t, 512, 6); code != 0 || string(b) != "kernel" {
		t.Fatalf("read: %q %d", b, code)
	}
	c.send(t, requestBytes(cmdDisc, 0, 9, 0, 0))
	if err := <-done; err != nil {
		t.Fatalf("ServeTransmission: %v", err)
	}
	if srv.Flags()&(FlagSendFlush|FlagSendFUA|FlagCanMultiConn) != FlagSendFlush|FlagSendFUA|FlagCanMultiConn {
		t.Fatalf("flags %#x", srv.Flags())
	}
}

// TestServeTransmissionTellsLostFromDisconnect: a peer that closes without
// NBD_CMD_DISC (the kernel dropping a connection it timed out) is
// ErrConnectionLost, which an Attachment replaces; NBD_CMD_DISC is nil.
func TestServeTransmissionTellsLostFromDisconnect(t *testing.T) {
	srv := NewServer(devtest.NewMem(1<<20), Config{})
	defer srv.Close()
	for _, disc := range []bool{false, true} {
		server, client := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- srv.ServeTransmission(server, srv.Flags()) }()
		if disc {
			client.Write(requestBytes(cmdDisc, 0, 1, 0, 0))
		}
		client.Close()
		err := <-done
		if disc && err != nil {
			t.Errorf("after NBD_CMD_DISC: %v, want nil", err)
		}
		if !disc && !errors.Is(err, ErrConnectionLost) {
			t.Errorf("after a close without NBD_CMD_DISC: %v, want ErrConnectionLost", err)
		}
	}
}

func TestCloseAnswersInFlight(t *testing.T) {
	dev, sock, srv := serveHeld(t)
	c := dialGo(t, sock, "")
	c.send(t, requestBytes(cmdRead, 0, 1, 0, 512))
	<-dev.Entered()
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with a request in flight")
	case <-time.After(100 * time.Millisecond):
	}
	dev.Release()
	if code, cookie := c.simpleReply(t); code != 0 || cookie != 1 {
		t.Fatalf("in-flight request: cookie %d error %d", cookie, code)
	}
	<-closed
	if !c.closed(t) {
		t.Fatal("connection open after Close")
	}
}

func TestStalledClientsLoseTheirBuffers(t *testing.T) {
	// One connection's budget is the whole server's: a client that stalls
	// mid-payload, or never reads its replies, must not keep it for ever.
	dev := devtest.NewMem(4 << 20)
	cfg := Config{MaxRequest: 1 << 20, MaxInFlightBytes: 2 << 20, MaxTotalInFlightBytes: 2 << 20, IOTimeout: 300 * time.Millisecond}
	sock, _ := serveMem(t, dev, cfg)

	stall := dialGo(t, sock, "")
	stall.send(t, append(requestBytes(cmdWrite, 0, 1, 0, 1<<20), make([]byte, 10)...))
	if !stall.closed(t) {
		t.Fatal("a client stalled in a write payload kept its connection")
	}

	deaf := dialGo(t, sock, "")
	deaf.c.(*net.UnixConn).SetReadBuffer(4096)
	go func() {
		for i := range 64 {
			if _, err := deaf.c.Write(requestBytes(cmdRead, 0, uint64(i), 0, 1<<20)); err != nil {
				return
			}
		}
	}()
	stillServes(t, sock) // waits until the deaf client's buffers are released
}

func TestListeners(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	l, err := ListenUnix(sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(sock); fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := ListenUnix(sock, 0); err == nil {
		t.Fatal("a second server took over a live socket")
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // leaves a stale socket, as a killed server does
	l, err = ListenUnix(sock, 0o660)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	if fi, _ := os.Stat(sock); fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want 0660", fi.Mode().Perm())
	}
	l.Close()
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("keep me"), 0o600)
	if _, err := ListenUnix(regular, 0); err == nil {
		t.Fatal("ListenUnix replaced a regular file")
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Fatal("regular file clobbered")
	}

	tl, err := ListenTCP(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	if a := tl.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("ListenTCP(\":0\") listens on %v, want 127.0.0.1", a)
	}
	bare, err := ListenTCP("0") // a bare port (0: any free one)
	if err != nil {
		t.Fatal(err)
	}
	if a := bare.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("ListenTCP(\"0\") listens on %v, want 127.0.0.1", a)
	}
	bare.Close()
	if _, err := ListenTCP("not an address:x:y"); err == nil {
		t.Fatal("bad address accepted")
	}
}

// TestRequestFlags: a request with a flag the server does not know, or
// with one that does not go with its command (DF without structured
// replies, NO_HOLE on a READ, ...), fails with EINVAL, as nbdkit fails it;
// FUA goes with any command. A refused WRITE's payload is consumed, so the
// stream stays in step, and the write does not land.
func TestRequestFlags(t *testing.T) {
	dev := devtest.MemOf(make([]byte, 1<<20))
	sock, _ := serveMem(t, dev, Config{})
	c := dialGo(t, sock, "")
	for _, tc := range []struct {
		name   string
		typ    uint16
		flags  uint16
		length uint32
		want   uint32
	}{
		{"READ 0x8000", cmdRead, 0x8000, 512, errInval},
		{"READ 0x20", cmdRead, 0x20, 512, errInval},
		{"READ DF without structured replies", cmdRead, cmdFlagDF, 512, errInval},
		{"READ NO_HOLE", cmdRead, cmdFlagNoHole, 512, errInval},
		{"READ REQ_ONE", cmdRead, cmdFlagReqOne, 512, errInval},
		{"READ FAST_ZERO", cmdRead, cmdFlagFastZero, 512, errInval},
		{"FLUSH 0x8000", cmdFlush, 0x8000, 0, errInval},
		{"FLUSH DF", cmdFlush, cmdFlagDF, 0, errInval},
		{"TRIM NO_HOLE", cmdTrim, cmdFlagNoHole, 512, errInval},
		{"WRITE_ZEROES 0x8000", cmdWriteZeroes, 0x8000, 512, errInval},
		{"WRITE_ZEROES DF", cmdWriteZeroes, cmdFlagDF, 512, errInval},
		{"READ", cmdRead, 0, 512, 0},
		{"READ FUA", cmdRead, cmdFlagFUA, 512, 0},
		{"FLUSH FUA", cmdFlush, cmdFlagFUA, 0, 0},
	} {
		c.cookie++
		c.send(t, requestBytes(tc.typ, tc.flags, c.cookie, 0, tc.length))
		code, cookie := c.simpleReply(t)
		if cookie != c.cookie {
			t.Fatalf("%s: reply cookie %d, want %d", tc.name, cookie, c.cookie)
		}
		if code == 0 && tc.typ == cmdRead {
			io.ReadFull(c.r, make([]byte, tc.length))
		}
		if code != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, code, tc.want)
		}
	}
	if c.flags&FlagSendWriteZeroes != 0 {
		if code := c.cmd(t, cmdWriteZeroes, cmdFlagNoHole, 0, 512); code != 0 {
			t.Errorf("WRITE_ZEROES NO_HOLE: error %d", code)
		}
	}
	data := bytes.Repeat([]byte{0xa5}, 512)
	for _, flags := range []uint16{0x8000, cmdFlagDF, cmdFlagNoHole} {
		if code := c.write(t, 0, data, flags); code != errInval {
			t.Errorf("WRITE with flags %#x: error %d, want EINVAL", flags, code)
		}
	}
	if b, code := c.read(t, 0, 512); code != 0 || !bytes.Equal(b, make([]byte, 512)) {
		t.Errorf("after refused writes: read error %d, data changed %v", code, !bytes.Equal(b, make([]byte, 512)))
	}
	if code := c.write(t, 0, data, cmdFlagFUA); code != 0 {
		t.Errorf("WRITE FUA: error %d", code)
	}

	// With structured replies, DF goes with a READ (the reply is one
	// chunk); an unknown flag gets an error chunk.
	c = dialRaw(t, sock)
	c.greet(t, flagCFixedNew|flagCNoZeroes)
	if types, _ := c.option(t, optStructuredReply, nil); types[0] != repAck {
		t.Fatalf("structured replies refused: %#x", types)
	}
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("GO refused: %#x", types)
	}
	c.send(t, requestBytes(cmdRead, cmdFlagDF, 1, 0, 512))
	var h [structuredHeaderLen + 8]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint16(h[6:]) != replyTypeOffsetData || binary.BigEndian.Uint16(h[4:]) != replyFlagDone {
		t.Fatalf("READ DF with structured replies: chunk % x, want one OFFSET_DATA", h)
	}
	got := make([]byte, 512)
	io.ReadFull(c.r, got)
	if !bytes.Equal(got, data) {
		t.Error("READ DF returned other data than written")
	}
	c.send(t, requestBytes(cmdRead, 0x8000, 2, 0, 512))
	var e [structuredHeaderLen + structuredErrorLength]byte
	if _, err := io.ReadFull(c.r, e[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint16(e[6:]) != replyTypeError || binary.BigEndian.Uint32(e[20:]) != errInval {
		t.Fatalf("READ 0x8000 with structured replies: % x, want an EINVAL error chunk", e)
	}
}
