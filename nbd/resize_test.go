package nbd

import (
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestAttachmentResizeMessage: Resize sends nbd.ko one reconfigure naming
// the device, its backend and the new size with the block size unchanged,
// and no sockets.
func TestAttachmentResizeMessage(t *testing.T) {
	k := &fakeNBD{index: 7}
	var running atomic.Int32
	a, err := Attach(fakeAttachConfig(k, &running))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Detach()
	if err := a.Resize(96 << 20); err != nil {
		t.Fatal(err)
	}
	cmds, _ := k.sent()
	if len(cmds) != 2 || cmds[1].Header.Command != genlCmdReconfigure {
		t.Fatalf("commands %+v, want connect then reconfigure", cmds)
	}
	r, err := decodeConnectRequest(cmds[1].Data)
	if err != nil {
		t.Fatal(err)
	}
	want := connectRequest{Index: 7, SizeBytes: 96 << 20, BlockSizeBytes: 4096, BackendID: "luksd:vol"}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("resize sent %+v, want %+v", r, want)
	}
	k.refuse = os.ErrInvalid
	if err := a.Resize(128 << 20); err == nil || !strings.Contains(err.Error(), "refused resize of /dev/nbd7") {
		t.Fatalf("a refused resize: %v", err)
	}
}

// TestServerSetSize: after SetSize, a new client (nbdinfo) is told the new
// size, and requests past the old end are served.
func TestServerSetSize(t *testing.T) {
	testtool.Need(t, "nbdinfo")
	testtool.Need(t, "qemu-io")
	e := startExport(t, 8<<20, 4096, Config{}, false)
	if err := os.Truncate(e.image, testSegOffset+12<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dev.Backend().(interface{ Remeasure() (int64, error) }).Remeasure(); err != nil {
		t.Fatal(err)
	}
	if err := e.dev.Resize(12 << 20); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(testtool.Run(t, "nbdinfo", "--size", e.uri())); out != "8388608" {
		t.Fatalf("before SetSize nbdinfo says %s bytes", out)
	}
	e.srv.SetSize(12 << 20)
	if out := strings.TrimSpace(testtool.Run(t, "nbdinfo", "--size", e.uri())); out != "12582912" {
		t.Fatalf("after SetSize nbdinfo says %s bytes, want 12582912", out)
	}
	opts := "driver=nbd,path=" + e.sock
	testtool.Run(t, "qemu-io", "--image-opts", "-c", "write -P 0x5a 11M 1M", opts)
	if out := testtool.Run(t, "qemu-io", "--image-opts", "-c", "read -P 0x5a 11M 1M", opts); !strings.Contains(out, "read 1048576/1048576") {
		t.Fatalf("qemu-io reads past the old end:\n%s", out)
	}
}
