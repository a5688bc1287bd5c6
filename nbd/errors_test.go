package nbd

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/devtest"
)

// TestBackendErrorsMapped: every backend error reaches the client as the
// NBD error the specification names for it, for every command that can
// meet it.
func TestBackendErrorsMapped(t *testing.T) {
	for _, tc := range []struct {
		err error
		// want per command: read, write, flush, trim, write zeroes
		read, write, flush, trim, zeroes uint32
	}{
		{syscall.EIO, errIO, errIO, errIO, errIO, errIO},
		{devtest.AsOpError(syscall.EIO), errIO, errIO, errIO, errIO, errIO},
		{errors.New("the disk caught fire"), errIO, errIO, errIO, errIO, errIO},
		{fmt.Errorf("reading: %w", syscall.ETIMEDOUT), errIO, errIO, errIO, errIO, errIO},
		{syscall.EAGAIN, errIO, errIO, errIO, errIO, errIO},
		{syscall.EINVAL, errIO, errIO, errIO, errIO, errIO}, // the server's own trouble (O_DIRECT alignment), not the client's
		{devtest.AsOpError(syscall.ENOSPC), errNoSpc, errNoSpc, errNoSpc, errNoSpc, errNoSpc},
		{syscall.EDQUOT, errNoSpc, errNoSpc, errNoSpc, errNoSpc, errNoSpc},
		{syscall.EFBIG, errNoSpc, errNoSpc, errNoSpc, errNoSpc, errNoSpc},
		{blockdev.ErrOutOfRange, errInval, errNoSpc, errInval, errInval, errNoSpc},
		{devtest.AsOpError(blockdev.ErrReadOnly), errPerm, errPerm, errPerm, errPerm, errPerm},
		{syscall.EROFS, errPerm, errPerm, errPerm, errPerm, errPerm},
		{syscall.EPERM, errPerm, errPerm, errPerm, errPerm, errPerm},
		{syscall.ENOMEM, errNoMem, errNoMem, errNoMem, errNoMem, errNoMem},
		// A discard the device cannot do is a hint ignored; write zeroes
		// are then written out.
		{blockdev.ErrNotSupported, errInval, errInval, errInval, 0, 0},
		{devtest.AsOpError(syscall.EOPNOTSUPP), errInval, errInval, errInval, 0, 0},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			dev := devtest.NewErring(devtest.NewMem(1 << 20))
			sock, _ := serveMem(t, dev, Config{})
			c := dialGo(t, sock, "")
			dev.FailAll(tc.err)
			if _, got := c.read(t, 0, 512); got != tc.read {
				t.Errorf("read: error %d, want %d", got, tc.read)
			}
			if got := c.write(t, 0, make([]byte, 512), 0); got != tc.write {
				t.Errorf("write: error %d, want %d", got, tc.write)
			}
			if got := c.cmd(t, cmdFlush, 0, 0, 0); got != tc.flush {
				t.Errorf("flush: error %d, want %d", got, tc.flush)
			}
			if got := c.cmd(t, cmdTrim, 0, 0, 4096); got != tc.trim {
				t.Errorf("trim: error %d, want %d", got, tc.trim)
			}
			dev.Fail(devtest.OpWrite, nil) // emulated write zeroes must be able to write
			if got := c.cmd(t, cmdWriteZeroes, 0, 0, 4096); got != tc.zeroes {
				t.Errorf("write zeroes: error %d, want %d", got, tc.zeroes)
			}
		})
	}
}

// TestOutOfRangeRequests: the server's own range checks, per command.
func TestOutOfRangeRequests(t *testing.T) {
	sock, _ := serveMem(t, devtest.NewErring(devtest.NewMem(1<<20)), Config{})
	c := dialGo(t, sock, "")
	if got := c.cmd(t, cmdTrim, 0, 1<<20-512, 1024); got != errInval {
		t.Errorf("trim past the end: %d, want EINVAL", got)
	}
	if got := c.cmd(t, cmdWriteZeroes, 0, 1<<20-512, 1024); got != errNoSpc {
		t.Errorf("write zeroes past the end: %d, want ENOSPC", got)
	}
	if got := c.write(t, 1<<20-512, make([]byte, 1024), 0); got != errNoSpc {
		t.Errorf("write past the end: %d, want ENOSPC", got)
	}
	if _, got := c.read(t, 1<<20-512, 1024); got != errInval {
		t.Errorf("read past the end: %d, want EINVAL", got)
	}
}

// TestFlushFailsEveryTime: a failing flush is reported as failed for as
// long as the backend says so, not once; FUA writes too.
func TestFlushFailsEveryTime(t *testing.T) {
	dev := devtest.NewErring(devtest.NewMem(1 << 20))
	sock, _ := serveMem(t, dev, Config{})
	c := dialGo(t, sock, "")
	dev.Fail(devtest.OpFlush, &blockdev.OpError{Op: "flush", Path: "/dev/sdz", Err: syscall.EIO})
	for i := range 3 {
		if got := c.cmd(t, cmdFlush, 0, 0, 0); got != errIO {
			t.Fatalf("flush %d: error %d, want EIO", i+1, got)
		}
		if got := c.write(t, 0, make([]byte, 512), cmdFlagFUA); got != errIO {
			t.Fatalf("FUA write %d: error %d, want EIO", i+1, got)
		}
	}
	dev.Fail(devtest.OpFlush, nil)
	if got := c.cmd(t, cmdFlush, 0, 0, 0); got != 0 {
		t.Fatalf("flush after healing: error %d", got)
	}
}

// TestFUAWrite: a write flagged FUA goes to the device's own durable write,
// not to a whole-device flush (which would also fail for writes to other
// ranges that a failed flush lost).
func TestFUAWrite(t *testing.T) {
	mem := devtest.NewMem(1 << 20)
	dev := devtest.NewFUA(mem)
	sock, _ := serveMem(t, dev, Config{})
	c := dialGo(t, sock, "")
	if got := c.write(t, 0, make([]byte, 512), cmdFlagFUA); got != 0 {
		t.Fatalf("FUA write: error %d", got)
	}
	if dev.FUAWrites() != 1 || mem.Flushes() != 1 {
		t.Fatalf("FUA write: %d durable writes, %d flushes below; want 1 and 1", dev.FUAWrites(), mem.Flushes())
	}
	if got := c.write(t, 0, make([]byte, 512), 0); got != 0 || dev.FUAWrites() != 1 || mem.Flushes() != 1 {
		t.Fatalf("plain write: error %d, %d durable writes, %d flushes", got, dev.FUAWrites(), mem.Flushes())
	}
}
