package nbd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// A panic in one request's handling answers that request with EIO, logs
// the request, the panic and (once) a stack, and fails the export: later
// writes, trims and write zeroes get EIO and change nothing, while reads
// and flushes go on. The server keeps serving the connection.
func TestRequestPanicFailsExport(t *testing.T) {
	var logged testtool.LogLines
	mem := devtest.NewMem(1 << 20)
	dev := devtest.NewPanicking(mem)
	dev.PanicOn(devtest.FaultWrite, 65536, 4096)
	sock, srv := serveMem(t, dev, Config{Logf: logged.Logf})
	c := dialGo(t, sock, "")
	if code := c.write(t, 0, []byte("before"), 0); code != 0 {
		t.Fatalf("write before the panic: %d", code)
	}
	if code := c.write(t, 65536, []byte("boom"), 0); code != errIO {
		t.Fatalf("write that panics: error %d, want EIO", code)
	}
	if dev.Panicked() != 1 || !srv.Failed() {
		t.Fatalf("panicked %d times, export failed %v", dev.Panicked(), srv.Failed())
	}
	if code := c.write(t, 0, []byte("after!"), 0); code != errIO {
		t.Fatalf("write after the panic: error %d, want EIO", code)
	}
	if code := c.cmd(t, cmdWriteZeroes, 0, 0, 4096); code != errIO {
		t.Fatalf("write zeroes after the panic: error %d, want EIO", code)
	}
	if b, code := c.read(t, 0, 6); code != 0 || string(b) != "before" {
		t.Fatalf("read after the panic: %q, error %d", b, code)
	}
	if code := c.cmd(t, cmdFlush, 0, 0, 0); code != 0 {
		t.Fatalf("flush after the panic: error %d", code)
	}
	// A second connection finds the export failed too.
	if code := dialGo(t, sock, "").write(t, 8192, []byte("x"), 0); code != errIO {
		t.Fatalf("write on a new connection: error %d, want EIO", code)
	}
	log := logged.String()
	if want := "nbd: write of 4 bytes at 65536 panicked (1 so far): devtest: injected panic in write"; !strings.Contains(log, want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
	if strings.Count(log, "stack of the first panic") != 1 || !strings.Contains(log, "server_panic.go") {
		t.Errorf("want one stack in the log:\n%s", log)
	}
	if got := mem.Bytes()[65536 : 65536+4]; !bytes.Equal(got, make([]byte, 4)) {
		t.Errorf("the panicked write reached the device: %q", got)
	}
}

// A panicking read is answered with EIO (an error chunk under structured
// replies goes through the same reply) and the next read is served.
func TestRequestPanicOnRead(t *testing.T) {
	dev := devtest.NewPanicking(devtest.NewMem(1 << 20))
	dev.PanicOn(devtest.FaultRead, 0, 512)
	sock, _ := serveMem(t, dev, Config{})
	c := dialGo(t, sock, "")
	if _, code := c.read(t, 0, 512); code != errIO {
		t.Fatalf("read that panics: error %d, want EIO", code)
	}
	if _, code := c.read(t, 4096, 512); code != 0 {
		t.Fatalf("read after the panic: error %d", code)
	}
}
