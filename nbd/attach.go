package nbd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// AttachConfig describes a kernel NBD device (/dev/nbdN) whose requests this
// process serves over socket pairs handed to nbd.ko through generic netlink.
type AttachConfig struct {
	// Index is the N of /dev/nbdN; -1 lets the kernel pick a free device
	// (or create one).
	Index int
	// Size of the device in bytes.
	Size int64
	// BlockSize is the logical block size (512..4096); 0 means 512.
	BlockSize int
	// ReadOnly marks the device read-only; Trim lets the kernel send discards.
	ReadOnly, Trim bool
	// ServerFlags, when not zero, are the transmission flags the kernel is
	// told (normally the serving Server's Flags()); zero derives them from
	// ReadOnly and Trim.
	ServerFlags uint16
	// Connections is the number of socket pairs; 0 means one per CPU.
	Connections int
	// Timeout is how long the kernel waits for the reply to a request
	// before it gives the connection up as dead (shuts it down) and sends
	// the request again on another connection, or on the one the server
	// reconnects (see Attachment). 0 means never, which nbd.ko can do only
	// with a single connection: it then sends a request again only once
	// the connection it went out on was replaced (checking every 30 s).
	// With more connections it takes 0 for 30 s and drops them all the
	// same, so 0 is sent as the longest timeout it can hold (24 days);
	// but a request in flight on a connection that dies is sent again
	// only when its timeout expires, so a lost connection then loses its
	// requests for as long.
	Timeout time.Duration
	// DeadConnTimeout is how long the kernel queues requests once every
	// connection is dead, waiting for a reconfigure (0: fail at once).
	DeadConnTimeout time.Duration
	// Logf receives a line per lost and reconnected connection; nil logs
	// nothing.
	Logf func(format string, args ...any)
	// Backend names the device's backend in /sys/block/nbdN/backend.
	Backend string
	// Reconfigure hands new sockets to the existing device Index (whose
	// server died) instead of creating a device: NBD_CMD_RECONFIGURE.
	Reconfigure bool
	// Serve runs the NBD transmission phase on one kernel socket with the
	// transmission flags Flags returns, until the kernel disconnects.
	Serve func(conn net.Conn) error
	// Netlink opens the generic netlink connection on which Attach, the
	// reconnects and Detach speak to nbd.ko; nil opens the kernel's
	// (genetlink.Dial). Tests hand in a genltest connection.
	Netlink func() (*genetlink.Conn, error)

	// waitNode waits for the device node to appear; nil waits up to 5 s
	// (devtmpfs or udev). Tests without a kernel replace it.
	waitNode func(path string) error
}

// kernelNetlink opens generic netlink in the kernel.
func kernelNetlink() (*genetlink.Conn, error) { return genetlink.Dial(nil) }

// netlink returns the Netlink opener, or the kernel's.
func (c AttachConfig) netlink() func() (*genetlink.Conn, error) {
	if c.Netlink != nil {
		return c.Netlink
	}
	return kernelNetlink
}

// Flags returns the transmission flags the kernel is told the server has.
func (c AttachConfig) Flags() uint16 {
	if c.ServerFlags != 0 {
		return c.ServerFlags | kernelFlagHasFlags
	}
	f := uint16(kernelFlagHasFlags | kernelFlagSendFlush | kernelFlagSendFUA | kernelFlagCanMultiConn)
	if c.ReadOnly {
		f |= kernelFlagReadOnly
	}
	if c.Trim && !c.ReadOnly {
		f |= kernelFlagSendTrim
	}
	return f
}

func (c AttachConfig) request(fds []uint32) connectRequest {
	bs := c.BlockSize
	if bs == 0 {
		bs = 512
	}
	return connectRequest{
		Index:           c.Index,
		SizeBytes:       uint64(c.Size),
		BlockSizeBytes:  uint64(bs),
		TimeoutSec:      kernelTimeout(c.Timeout, len(fds)),
		DeadConnSec:     uint64((c.DeadConnTimeout + time.Second - 1) / time.Second),
		ServerFlags:     uint64(c.Flags()),
		Sockets:         fds,
		BackendID:       c.Backend,
		reconfigureOnly: c.Reconfigure,
	}
}

// noTimeoutSec is sent for "no timeout" to a device of several
// connections: nbd.ko keeps the request timeout in an unsigned int of
// jiffies, so 2^31/1000 s (24.8 days) is as long as it can hold at any HZ
// up to 1000.
const noTimeoutSec = (1 << 31) / 1000

// kernelTimeout is NBD_ATTR_TIMEOUT for d on a device of conns
// connections, in whole seconds (rounded up); see AttachConfig.Timeout.
func kernelTimeout(d time.Duration, conns int) uint64 {
	switch {
	case d <= 0 && conns == 1:
		return 0
	case d <= 0:
		return noTimeoutSec
	}
	return min(uint64((d+time.Second-1)/time.Second), noTimeoutSec)
}

func (c AttachConfig) validate() error {
	switch {
	case c.Serve == nil:
		return errors.New("nbd: AttachConfig.Serve is nil")
	case c.Size <= 0:
		return fmt.Errorf("nbd: device size %d is not positive", c.Size)
	case c.BlockSize != 0 && (c.BlockSize < 512 || c.BlockSize > 4096 || c.BlockSize&(c.BlockSize-1) != 0):
		return fmt.Errorf("nbd: block size %d is not a power of two in 512..4096", c.BlockSize)
	case c.BlockSize != 0 && c.Size%int64(c.BlockSize) != 0:
		return fmt.Errorf("nbd: device size %d is not a multiple of the block size %d", c.Size, c.BlockSize)
	case c.Reconfigure && c.Index < 0:
		return errors.New("nbd: reconfigure needs the device index")
	}
	return nil
}

// Attachment is a kernel NBD device served by this process. A connection
// the kernel drops — it timed one out, or the server's end failed — is
// replaced with a fresh socket (NBD_CMD_RECONFIGURE) as long as the device
// is attached: only a disconnect (NBD_CMD_DISC from the kernel, Detach)
// or a device that can no longer be reconfigured ends the attachment.
type Attachment struct {
	index int
	cfg   AttachConfig
	done  chan struct{}
	wg    sync.WaitGroup // one per connection slot

	mu         sync.Mutex
	conns      []net.Conn // the current server end of each slot
	dropped    []bool     // slots the kernel did not take (reconfigure)
	live       bool       // attached: lost connections are replaced
	closed     bool       // Detach was called
	err        error      // why a slot ended, if not by a disconnect
	reconnects int

	detach sync.Once
	derr   error
}

// Attach creates (or reconfigures) /dev/nbdN and serves it with cfg.Serve,
// one goroutine per connection. It loads nbd.ko when the kernel lacks it.
func Attach(cfg AttachConfig) (*Attachment, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.Connections
	if n <= 0 {
		n = runtime.NumCPU()
	}
	if err := available(cfg.netlink()); err != nil {
		return nil, err
	}

	a := &Attachment{index: cfg.Index, cfg: cfg, done: make(chan struct{}), dropped: make([]bool, n)}
	var kernelFDs []uint32
	closeKernelFDs := func() {
		for _, fd := range kernelFDs {
			unix.Close(int(fd))
		}
		kernelFDs = nil
	}
	defer closeKernelFDs()
	for range n {
		kfd, conn, err := socketPair()
		if err != nil {
			a.closeConns()
			return nil, err
		}
		kernelFDs = append(kernelFDs, uint32(kfd))
		a.conns = append(a.conns, conn)
	}

	cmd := uint8(genlCmdConnect)
	op := "connect"
	if cfg.Reconfigure {
		cmd, op = genlCmdReconfigure, "reconfigure"
	}
	body, err := cfg.request(kernelFDs).encode()
	if err != nil {
		a.closeConns()
		return nil, err
	}
	// Serve before the kernel can send anything.
	for slot, conn := range a.conns {
		a.wg.Add(1)
		go a.serveSlot(slot, conn)
	}
	go func() {
		a.wg.Wait()
		close(a.done)
	}()
	fail := func(err error) (*Attachment, error) {
		a.closeConns()
		<-a.done
		return nil, err
	}

	msgs, err := execute(cfg.netlink(), op, cfg.Index, cmd, body)
	if err != nil {
		return fail(err)
	}
	if !cfg.Reconfigure {
		if len(msgs) == 0 {
			return fail(errors.New("nbd: the kernel sent no connect reply"))
		}
		idx, err := decodeIndex(msgs[0].Data)
		if err != nil {
			return fail(err)
		}
		a.index = idx
	}
	// The kernel holds its own references to its ends now.
	closeKernelFDs()
	if cfg.Reconfigure && !a.keepTaken() {
		return fail(fmt.Errorf("nbd: %s had no dead connection to take over (is it still served?)", a.DevicePath()))
	}
	waitNode := cfg.waitNode
	if waitNode == nil {
		waitNode = func(path string) error { return waitForNode(path, 5*time.Second) }
	}
	if err := waitNode(a.DevicePath()); err != nil {
		a.Detach()
		return nil, err
	}
	a.mu.Lock()
	a.live = true
	a.mu.Unlock()
	return a, nil
}

// keepTaken closes the sockets a reconfigure offered that the kernel
// dropped (it takes one per dead connection) and reports whether it took
// any. Their slots end without being replaced.
func (a *Attachment) keepTaken() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	taken := false
	for slot, c := range a.conns {
		if peerClosed(c) {
			a.dropped[slot] = true
			c.Close()
			continue
		}
		taken = true
	}
	return taken
}

// socketPair returns the kernel's end (a file descriptor) and the server's
// end of a new connection.
func socketPair() (int, net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("nbd: socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[1]), "nbd-server")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		return -1, nil, fmt.Errorf("nbd: socket: %w", err)
	}
	return fds[0], conn, nil
}

// Index returns the N of /dev/nbdN.
func (a *Attachment) Index() int { return a.index }

// DevicePath returns /dev/nbdN.
func (a *Attachment) DevicePath() string { return DevicePath(a.index) }

// DevicePath returns the device node of NBD device index.
func DevicePath(index int) string { return fmt.Sprintf("/dev/nbd%d", index) }

// ParseDevicePath returns N for "/dev/nbdN" or "nbdN".
func ParseDevicePath(path string) (int, error) {
	s := strings.TrimPrefix(strings.TrimPrefix(path, "/dev/"), "nbd")
	var n int
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return -1, fmt.Errorf("%q is not an NBD device (/dev/nbdN)", path)
	}
	if _, err := fmt.Sscan(s, &n); err != nil || n < 0 {
		return -1, fmt.Errorf("%q is not an NBD device (/dev/nbdN)", path)
	}
	return n, nil
}

// Wait blocks until every connection has ended for good: the kernel
// disconnected the device (NBD_CMD_DISCONNECT, nbd-client -d), Detach was
// called, or a lost connection could not be replaced. It returns why a
// connection could not be replaced, or nil.
func (a *Attachment) Wait() error {
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	return a.err
}

// Reconnects returns how many lost connections were replaced.
func (a *Attachment) Reconnects() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reconnects
}

// Done is closed when every connection has ended.
func (a *Attachment) Done() <-chan struct{} { return a.done }

// Detach flushes the kernel's dirty pages of the device to this server,
// asks the kernel to disconnect, and waits for the connections to end.
func (a *Attachment) Detach() error {
	a.detach.Do(func() {
		a.mu.Lock()
		a.closed = true
		a.mu.Unlock()
		select {
		case <-a.done:
			return // the kernel side is already gone
		default:
		}
		var errs []error
		if err := syncDevice(a.DevicePath()); err != nil {
			errs = append(errs, err)
		}
		if err := disconnect(a.cfg.netlink(), a.index); err != nil {
			errs = append(errs, err)
		}
		select {
		case <-a.done:
		case <-time.After(30 * time.Second):
			errs = append(errs, fmt.Errorf("nbd: %s did not disconnect, closing its sockets", a.DevicePath()))
		}
		a.closeConns()
		<-a.done
		a.derr = errors.Join(errs...)
	})
	return a.derr
}

func (a *Attachment) closeConns() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
}

// syncDevice writes the page cache of a block device back (to this server).
func syncDevice(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("nbd: flush %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("nbd: flush %s: %w", path, err)
	}
	return nil
}

// Disconnect asks the kernel to disconnect /dev/nbd<index>: it sends
// NBD_CMD_DISC to the server and shuts the sockets down.
func Disconnect(index int) error { return disconnect(kernelNetlink, index) }

func disconnect(open func() (*genetlink.Conn, error), index int) error {
	body, err := encodeIndex(index)
	if err != nil {
		return err
	}
	_, err = execute(open, "disconnect", index, genlCmdDisconnect, body)
	return err
}

// Devices lists the kernel's NBD devices and whether each is connected.
func Devices() ([]DeviceStatus, error) {
	body, err := encodeIndex(-1)
	if err != nil {
		return nil, err
	}
	msgs, err := execute(kernelNetlink, "status", -1, genlCmdStatus, body)
	if err != nil {
		return nil, err
	}
	var all []DeviceStatus
	for _, m := range msgs {
		list, err := decodeStatus(m.Data)
		if err != nil {
			return nil, err
		}
		all = append(all, list...)
	}
	return all, nil
}

// Available reports whether the kernel's NBD driver can be used, loading
// nbd.ko when it is missing.
func Available() error { return available(kernelNetlink) }

func available(open func() (*genetlink.Conn, error)) error {
	c, _, err := dial(open)
	if err != nil {
		return err
	}
	return c.Close()
}

// execute sends one nbd netlink command, op on device index (for the
// error), on a connection open makes, and returns the kernel's replies.
func execute(open func() (*genetlink.Conn, error), op string, index int, cmd uint8, body []byte) ([]genetlink.Message, error) {
	c, family, err := dial(open)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	msgs, err := c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: genlVersion},
		Data:   body,
	}, family.ID, netlink.Request|netlink.Acknowledge)
	if err != nil {
		return nil, kernelError(op, index, err)
	}
	return msgs, nil
}

// ErrNoKernelNBD means the kernel has no NBD driver and none could be loaded.
var ErrNoKernelNBD = errors.New("the kernel has no NBD support (nbd.ko)")

// dial opens generic netlink with open and resolves the "nbd" family,
// running `modprobe nbd` once when the family is unknown.
func dial(open func() (*genetlink.Conn, error)) (*genetlink.Conn, genetlink.Family, error) {
	c, err := open()
	if err != nil {
		return nil, genetlink.Family{}, fmt.Errorf("nbd: cannot open generic netlink: %w", err)
	}
	family, err := c.GetFamily(genlFamily)
	if errors.Is(err, os.ErrNotExist) {
		out, merr := exec.Command("modprobe", "nbd").CombinedOutput()
		family, err = c.GetFamily(genlFamily)
		if errors.Is(err, os.ErrNotExist) {
			c.Close()
			why := "modprobe nbd succeeded but the nbd netlink family is still missing"
			if merr != nil {
				why = fmt.Sprintf("modprobe nbd: %v", merr)
				if s := strings.TrimSpace(string(out)); s != "" {
					why = "modprobe nbd: " + s
				}
			}
			return nil, genetlink.Family{}, fmt.Errorf("%w: %s", ErrNoKernelNBD, why)
		}
	}
	if err != nil {
		c.Close()
		return nil, genetlink.Family{}, fmt.Errorf("nbd: looking up the nbd netlink family: %w", err)
	}
	return c, family, nil
}

// kernelError says what nbd.ko refused, in terms of the device.
func kernelError(op string, index int, err error) error {
	dev := "an NBD device"
	if index >= 0 {
		dev = DevicePath(index)
	}
	var why string
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		why = "permission denied (CAP_SYS_ADMIN is needed)"
	case errors.Is(err, unix.EBUSY):
		why = dev + " is already in use"
	case errors.Is(err, unix.EINVAL) && op == "disconnect":
		why = dev + " does not exist"
	case errors.Is(err, unix.EINVAL) && op == "reconfigure":
		// (A device whose connections all live answers success and drops
		// the socket: see offerSocket.)
		why = dev + " is not configured, or for another volume"
	case errors.Is(err, unix.EINVAL):
		why = "invalid request (size, block size, flags or socket rejected)"
	case errors.Is(err, unix.ENOMEM):
		why = "out of memory"
	default:
		return fmt.Errorf("nbd: the kernel refused %s of %s: %w", op, dev, err)
	}
	return fmt.Errorf("nbd: the kernel refused %s of %s: %s (%w)", op, dev, why, err)
}

// waitForNode waits for a device node to appear (devtmpfs or udev).
func waitForNode(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		fi, err := os.Stat(path)
		if err == nil && fi.Mode()&os.ModeDevice != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nbd: %s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
