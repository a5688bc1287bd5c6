package nbd

import (
	"os"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// A request's payload is plaintext: it must sit in blockdev's locked
// buffers, not on the Go heap, where it could be written to swap. A
// 16 MiB read is larger than any buffer kept for reuse, so while it is
// held its buffer is one newly mapped by blockdev.
func TestPayloadInLockedBuffers(t *testing.T) {
	const n = 16 << 20
	dev := devtest.NewHold(devtest.NewMem(n))
	dev.StallIf(func(op devtest.ErringOp, off int64) bool { return op == devtest.OpRead })
	sock, _ := serveMem(t, dev, Config{})
	c := dialGo(t, sock, "")
	before := blockdev.BufferBytesMapped()
	c.send(t, requestBytes(cmdRead, 0, 1, 0, n))
	select {
	case <-dev.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the read never reached the device")
	}
	mapped := blockdev.BufferBytesMapped() - before
	dev.Release()
	if mapped < n {
		t.Errorf("a %d-byte read in flight mapped %d bytes of blockdev buffers", n, mapped)
	}
	if os.Geteuid() == 0 && !blockdev.BuffersLocked() {
		t.Error("as root, a buffer was left unlocked")
	}
	if code, _ := c.simpleReply(t); code != 0 {
		t.Fatalf("read failed: %d", code)
	}
}
