package nbd

import (
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/genetlink/genltest"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// fakeNBD plays nbd.ko behind genltest: it records every nbd command,
// keeps a duplicate of each socket a connect or reconfigure hands it (the
// kernel keeps a reference), answers connect with its device index, and
// on disconnect closes the sockets it holds.
type fakeNBD struct {
	index   int
	refuse  error // the answer to connect and reconfigure, if set
	noReply bool  // connect succeeds without the index reply
	drop    bool  // reconfigure takes no socket (no dead connection)

	mu    sync.Mutex
	cmds  []genetlink.Message
	flags []netlink.HeaderFlags
	held  []int
}

const fakeFamilyID = 0x1d

func (k *fakeNBD) dial() (*genetlink.Conn, error) {
	family := genetlink.Family{ID: fakeFamilyID, Name: genlFamily, Version: genlVersion}
	return genltest.Dial(genltest.ServeFamily(family, k.serve)), nil
}

func (k *fakeNBD) serve(greq genetlink.Message, nreq netlink.Message) ([]genetlink.Message, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if nreq.Header.Type != fakeFamilyID {
		return nil, errors.New("not sent to the nbd family")
	}
	k.cmds = append(k.cmds, greq)
	k.flags = append(k.flags, nreq.Header.Flags)
	switch greq.Header.Command {
	case genlCmdConnect, genlCmdReconfigure:
		if k.refuse != nil {
			return nil, k.refuse
		}
		r, err := decodeConnectRequest(greq.Data)
		if err != nil {
			return nil, err
		}
		if greq.Header.Command == genlCmdReconfigure && k.drop {
			return nil, io.EOF // success, no reply
		}
		for _, fd := range r.Sockets {
			d, err := unix.Dup(int(fd))
			if err != nil {
				return nil, err
			}
			k.held = append(k.held, d)
		}
		if greq.Header.Command == genlCmdConnect && !k.noReply {
			body, err := encodeIndex(k.index)
			return []genetlink.Message{{Data: body}}, err
		}
	case genlCmdDisconnect:
		k.closeHeld()
	}
	return nil, io.EOF // success, no reply
}

func (k *fakeNBD) closeHeld() {
	for _, fd := range k.held {
		unix.Close(fd)
	}
	k.held = nil
}

// sent returns the commands received and their netlink flags.
func (k *fakeNBD) sent() ([]genetlink.Message, []netlink.HeaderFlags) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]genetlink.Message(nil), k.cmds...), append([]netlink.HeaderFlags(nil), k.flags...)
}

// echoServe stands for the NBD server on each socket: it echoes what
// the kernel's end sends, and counts the connections still served.
func echoServe(running *atomic.Int32) func(net.Conn) error {
	return func(c net.Conn) error {
		running.Add(1)
		defer running.Add(-1)
		_, err := io.Copy(c, c)
		return err
	}
}

func fakeAttachConfig(k *fakeNBD, running *atomic.Int32) AttachConfig {
	return AttachConfig{
		Index: -1, Size: 64 << 20, BlockSize: 4096, Trim: true, Connections: 3,
		Timeout: 90 * time.Second, DeadConnTimeout: 1500 * time.Millisecond, Backend: "luksd:vol",
		Serve: echoServe(running), Netlink: k.dial, waitNode: func(string) error { return nil },
	}
}

// TestAttachNetlinkMessages: Attach sends one connect with the device's
// size, block size, flags, timeouts, backend and one socket per
// connection, each the peer of a served connection; Detach sends a
// disconnect for the index the kernel picked.
func TestAttachNetlinkMessages(t *testing.T) {
	k := &fakeNBD{index: 4242}
	var running atomic.Int32
	a, err := Attach(fakeAttachConfig(k, &running))
	if err != nil {
		t.Fatal(err)
	}
	if a.Index() != 4242 {
		t.Fatalf("index %d, want the kernel's 4242", a.Index())
	}
	cmds, flags := k.sent()
	if len(cmds) != 1 || cmds[0].Header.Command != genlCmdConnect || cmds[0].Header.Version != genlVersion {
		t.Fatalf("commands %+v, want one connect", cmds)
	}
	if flags[0] != netlink.Request|netlink.Acknowledge {
		t.Errorf("netlink flags %v, want request and acknowledge", flags[0])
	}
	r, err := decodeConnectRequest(cmds[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	want := connectRequest{
		Index: -1, SizeBytes: 64 << 20, BlockSizeBytes: 4096, TimeoutSec: 90, DeadConnSec: 2,
		ServerFlags: kernelFlagHasFlags | kernelFlagSendFlush | kernelFlagSendFUA | kernelFlagCanMultiConn | kernelFlagSendTrim,
		BackendID:   "luksd:vol",
	}
	sockets := r.Sockets
	r.Sockets = nil
	if !reflect.DeepEqual(r, want) || len(sockets) != 3 {
		t.Fatalf("connect sent %+v with %d sockets, want %+v with 3", r, len(sockets), want)
	}
	k.mu.Lock()
	held := append([]int(nil), k.held...)
	k.mu.Unlock()
	for i, fd := range held {
		f := os.NewFile(uintptr(fd), "kernel end")
		f.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := f.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(f, b); err != nil || b[0] != byte(i) {
			t.Fatalf("socket %d is not served: %v", i, err)
		}
	}

	// Without a kernel there is no /dev/nbd4242 to flush; nothing else
	// may fail.
	if err := a.Detach(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "nbd: flush /dev/nbd4242: ") {
				t.Fatalf("Detach: %v", err)
			}
		}
	}
	cmds, _ = k.sent()
	if len(cmds) != 2 || cmds[1].Header.Command != genlCmdDisconnect {
		t.Fatalf("commands %+v, want connect then disconnect", cmds)
	}
	if idx, err := decodeIndex(cmds[1].Data); err != nil || idx != 4242 {
		t.Fatalf("disconnect of %d (%v), want 4242", idx, err)
	}
	if n := running.Load(); n != 0 {
		t.Fatalf("%d connections still served after Detach", n)
	}
}

var attachErrorCases = []struct {
	name   string
	kernel *fakeNBD
	index  int
	reconf bool
	want   string
	errno  error
}{
	{"busy", &fakeNBD{refuse: genltest.Error(int(unix.EBUSY))}, 3, false,
		"nbd: the kernel refused connect of /dev/nbd3: /dev/nbd3 is already in use", unix.EBUSY},
	{"not root", &fakeNBD{refuse: genltest.Error(int(unix.EPERM))}, -1, false,
		"nbd: the kernel refused connect of an NBD device: permission denied (CAP_SYS_ADMIN is needed)", unix.EPERM},
	{"bad request", &fakeNBD{refuse: genltest.Error(int(unix.EINVAL))}, -1, false,
		"invalid request (size, block size, flags or socket rejected)", unix.EINVAL},
	{"reconfigure unknown", &fakeNBD{refuse: genltest.Error(int(unix.EINVAL))}, 2, true,
		"nbd: the kernel refused reconfigure of /dev/nbd2: /dev/nbd2 is not configured, or for another volume", unix.EINVAL},
	{"no reply", &fakeNBD{noReply: true}, -1, false, "nbd: the kernel sent no connect reply", nil},
	{"reconfigure not taken", &fakeNBD{drop: true}, 2, true, "/dev/nbd2 had no dead connection to take over", nil},
}

// TestAttachNetlinkErrors: what the kernel refuses comes back as one line
// that says why, with the errno, and every connection Attach served is
// closed again.
func TestAttachNetlinkErrors(t *testing.T) {
	for _, tc := range attachErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.kernel
			defer k.closeHeld()
			var running atomic.Int32
			cfg := fakeAttachConfig(k, &running)
			cfg.Index, cfg.Reconfigure = tc.index, tc.reconf
			_, err := Attach(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Attach: %v, want one line with %q", err, tc.want)
			}
			if tc.errno != nil && !errors.Is(err, tc.errno) {
				t.Errorf("Attach: %v is not %v", err, tc.errno)
			}
			if n := running.Load(); n != 0 {
				t.Errorf("%d connections still served after a failed Attach", n)
			}
		})
	}
	dialErr := errors.New("no netlink here")
	cfg := fakeAttachConfig(&fakeNBD{}, new(atomic.Int32))
	cfg.Netlink = func() (*genetlink.Conn, error) { return nil, dialErr }
	if _, err := Attach(cfg); !errors.Is(err, dialErr) || !strings.Contains(err.Error(), "nbd: cannot open generic netlink") {
		t.Fatalf("Attach with no netlink: %v", err)
	}
}
