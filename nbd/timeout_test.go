package nbd

import (
	"bytes"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
)

// TestRequestTimeout: with RequestTimeout, a request the stalled backend
// has not carried out is answered once, with EIO; the connection and the
// device stay, and when the backend comes back the late result is dropped
// and later requests are served.
func TestRequestTimeout(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	hold := devtest.NewHold(mem)
	sock, _ := serveMem(t, hold, Config{RequestTimeout: 200 * time.Millisecond})
	c := dialGo(t, sock, "")
	if code := c.write(t, 0, []byte("before"), 0); code != 0 {
		t.Fatalf("write: %d", code)
	}
	hold.Stall()
	if _, code := c.read(t, 0, 6); code != errIO {
		t.Fatalf("read of a stalled backend: error %d, want EIO", code)
	}
	if code := c.write(t, 4096, []byte("lost?"), 0); code != errIO {
		t.Fatalf("write to a stalled backend: error %d, want EIO", code)
	}
	if code := c.cmd(t, cmdFlush, 0, 0, 0); code != errIO {
		t.Fatalf("flush of a stalled backend: error %d, want EIO", code)
	}
	hold.Release()
	// The next replies are for the next requests only: none of the
	// timed-out ones is answered twice.
	b, code := c.read(t, 0, 6)
	if code != 0 || !bytes.Equal(b, []byte("before")) {
		t.Fatalf("read after the stall: %q, error %d", b, code)
	}
	if code := c.cmd(t, cmdFlush, 0, 0, 0); code != 0 {
		t.Fatalf("flush after the stall: %d", code)
	}
}

// TestNoRequestTimeoutByDefault: without RequestTimeout, a request waits
// for the backend however long it takes.
func TestNoRequestTimeoutByDefault(t *testing.T) {
	hold := devtest.NewHold(devtest.NewMem(1 << 20))
	sock, _ := serveMem(t, hold, Config{})
	c := dialGo(t, sock, "")
	hold.Stall()
	c.send(t, requestBytes(cmdRead, 0, 42, 0, 512))
	<-hold.Entered()
	time.AfterFunc(300*time.Millisecond, hold.Release)
	code, cookie := c.simpleReply(t)
	if code != 0 || cookie != 42 {
		t.Fatalf("reply: error %d cookie %d", code, cookie)
	}
}
