// Package ublk serves a blockdev.Device as a Linux ublk block device,
// /dev/ublkbN, over io_uring. It speaks the kernel's ublk ABI
// (include/uapi/linux/ublk_cmd.h) with raw system calls: control commands
// on /dev/ublk-control, and per queue an io_uring on /dev/ublkcN through
// which the kernel hands out requests (FETCH_REQ) and the daemon returns
// results (COMMIT_AND_FETCH_REQ).
//
// Data moves by pread/pwrite on /dev/ublkcN where the kernel offers
// UBLK_F_USER_COPY (Linux 6.5+), else through per-tag buffers the kernel
// copies into. Devices are created with UBLK_F_USER_RECOVERY and
// UBLK_F_USER_RECOVERY_REISSUE: when the daemon dies the kernel holds the
// block device and its requests, and a new daemon takes them over with
// Recover.
package ublk

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
)

// Options configure a device. The zero value asks for device number 0;
// set ID to -1 to let the kernel pick.
type Options struct {
	ID            int // device number to ask for (/dev/ublkbID), or -1 for any
	Queues        int // hardware queues; 0 = one per CPU
	Depth         int // requests in flight per queue; 0 = 128
	MaxIOBytes    int // largest request; 0 = 1 MiB
	BlockSize     int // logical block size; 0 = the device's BlockSize, else 512
	ReadOnly      bool
	AllowDiscards bool // serve DISCARD (and WRITE_ZEROES) when the device can Trim
	CopyMode      bool // use per-tag buffers even where user copy is offered
	NoRecovery    bool // create the device without user recovery
	// Workers serves every request on a goroutine of its own. Without it,
	// a queue's thread serves requests of up to 64 KiB itself, which is
	// fastest when the device answers from memory or the page cache (about
	// three times the IOPS under emulation), and hands larger ones to
	// workers; all on workers keeps many requests in flight on a device
	// that blocks, such as a remote store.
	Workers bool
	// RecoverTimeout bounds how long Recover waits for the kernel to
	// quiesce the device of a daemon that died; 0 = 30 s.
	RecoverTimeout time.Duration
	// RequestTimeout completes a request the device has not carried out
	// in this time with EIO (0: wait as long as it takes). Requests are
	// then all served on workers. See timeout.go.
	RequestTimeout time.Duration
	// Logf receives a line per failed request (rate-limited); nil logs
	// nothing.
	Logf func(format string, args ...any)
	// Control is the control node ("" = ControlPath).
	Control string
}

// defaultMaxIOBytes is the largest request by default. 1 MiB requests
// (against 512 KiB) took a 1 MiB sequential read 5-9% and a write 2%
// closer to dm-crypt's speed in the VM (issue 17), at the same speed for
// 4 KiB requests: every request costs a fetch, a commit and, on a worker,
// a hand-off, and the crypt layer spreads a large one over the cores
// itself.
const (
	defaultDepth      = 128
	defaultMaxIOBytes = 1 << 20
)

// Device is one ublk device served from a blockdev.Device.
type Device struct {
	ctrl     *control
	info     devInfo
	h        *handler
	userCopy bool
	inline   bool
	timeout  time.Duration // Options.RequestTimeout
	charFD   int
	queues   []*queue
	running  bool // queue goroutines were launched
	started  bool // the kernel device is live (START_DEV or END_USER_RECOVERY)
	// recovering: the device belongs to a dead daemon being taken over
	recovering bool

	done chan struct{}
	err  error

	stopOnce sync.Once
	stopErr  error
}

// New creates a ublk device for dev (ADD_DEV, SET_PARAMS). It serves no
// requests until Start.
func New(dev blockdev.Device, opts Options) (*Device, error) {
	if opts.Depth == 0 {
		opts.Depth = defaultDepth
	}
	if opts.Queues == 0 {
		opts.Queues = runtime.NumCPU()
	}
	if opts.MaxIOBytes == 0 {
		opts.MaxIOBytes = defaultMaxIOBytes
	}
	if opts.Depth < 1 || opts.Depth > maxQueueDepth {
		return nil, fmt.Errorf("ublk: queue depth %d is not in 1..%d", opts.Depth, maxQueueDepth)
	}
	if opts.Queues < 1 || opts.Queues > maxQueues {
		return nil, fmt.Errorf("ublk: %d queues is not in 1..%d", opts.Queues, maxQueues)
	}
	bs := opts.BlockSize
	if bs == 0 {
		bs = max(blockdev.CapsOf(dev).BlockSize, 512)
	}
	h := newHandler(dev, opts.ReadOnly, opts.AllowDiscards, opts.Logf)
	// validate before asking the kernel for anything
	if _, err := buildParams(geometry{size: h.size, blockSize: bs, maxIOBytes: uint32(opts.MaxIOBytes)}); err != nil {
		return nil, err
	}
	c, err := openControl(opts.Control)
	if err != nil {
		return nil, err
	}
	info := devInfo{
		nrHWQueues:    uint16(opts.Queues),
		queueDepth:    uint16(opts.Depth),
		maxIOBufBytes: uint32(opts.MaxIOBytes),
		devID:         uint32(opts.ID),
	}
	if !opts.NoRecovery {
		info.flags |= FeatureUserRecovery | FeatureUserRecoveryReiss
	}
	if c.encoded {
		info.flags |= FeatureCmdIoctlEncode
	}
	if !opts.CopyMode && c.feats&FeatureUserCopy != 0 {
		info.flags |= FeatureUserCopy
	}
	if err := c.addDev(&info); err != nil {
		c.close()
		return nil, err
	}
	d := &Device{ctrl: c, info: info, h: h, userCopy: info.flags&FeatureUserCopy != 0, inline: !opts.Workers && opts.RequestTimeout <= 0,
		timeout: opts.RequestTimeout, charFD: -1, done: make(chan struct{})}
	p, err := buildParams(geometry{
		size:        h.size,
		blockSize:   bs,
		maxIOBytes:  info.maxIOBufBytes,
		readOnly:    h.readOnly,
		discard:     h.trim != nil,
		fua:         h.fua != nil,
		writeZeroes: true,
	})
	if err == nil {
		err = c.setParams(info.devID, &p)
	}
	if err != nil {
		c.simple(cmdDelDev, info.devID, 0)
		c.close()
		return nil, err
	}
	return d, nil
}

// Start opens /dev/ublkcN, starts the queues and brings up /dev/ublkbN
// (START_DEV). It returns once the block device exists.
func (d *Device) Start() error {
	if err := d.startQueues(); err != nil {
		d.abort()
		return err
	}
	if err := d.ctrl.simple(cmdStartDev, d.info.devID, daemonPID()); err != nil {
		d.abort()
		return err
	}
	d.started = true
	return nil
}

// Recover takes over device id, left behind by a daemon that died, and
// serves it from dev: START_USER_RECOVERY (waiting for the kernel to
// quiesce the device), new queues, END_USER_RECOVERY. Requests that were
// in flight are reissued to the new daemon. dev must have the device's size.
func Recover(id int, dev blockdev.Device, opts Options) (*Device, error) {
	if id < 0 {
		return nil, fmt.Errorf("ublk: recover needs a device id, got %d", id)
	}
	c, err := openControl(opts.Control)
	if err != nil {
		return nil, err
	}
	d, err := recoverDevice(c, uint32(id), dev, opts)
	if err != nil {
		c.close()
		return nil, err
	}
	return d, nil
}

func recoverDevice(c *control, id uint32, dev blockdev.Device, opts Options) (*Device, error) {
	info, err := c.devInfo(id)
	if err != nil {
		return nil, err
	}
	if info.flags&FeatureUserRecovery == 0 {
		return nil, fmt.Errorf("ublk: device %d was created without user recovery", id)
	}
	p, err := c.params(id)
	if err != nil {
		return nil, err
	}
	if want := uint64(dev.Size()) >> 9; p.basic.devSectors != want {
		return nil, fmt.Errorf("ublk: device %d has %d sectors, the volume %d", id, p.basic.devSectors, want)
	}
	readOnly := opts.ReadOnly || p.basic.attrs&attrReadOnly != 0
	discards := p.types&paramTypeDiscard != 0 && p.discard.maxDiscardSectors != 0
	d := &Device{
		ctrl:       c,
		info:       info,
		h:          newHandler(dev, readOnly, discards, opts.Logf),
		userCopy:   info.flags&FeatureUserCopy != 0,
		inline:     !opts.Workers && opts.RequestTimeout <= 0,
		timeout:    opts.RequestTimeout,
		charFD:     -1,
		done:       make(chan struct{}),
		recovering: true,
	}
	timeout := opts.RecoverTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		err = c.simple(cmdStartUserRecovery, id, 0)
		if err == nil {
			break
		}
		var ce *CommandError
		if !errors.As(err, &ce) || ce.Err != unix.EBUSY || time.Now().After(deadline) {
			if ce != nil && ce.Err == unix.EBUSY {
				return nil, fmt.Errorf("%w: the device is still served (ublk server pid %d) or not yet quiesced", err, info.ublksrvPID)
			}
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := d.startQueues(); err != nil {
		d.abort()
		return nil, err
	}
	if err := c.simple(cmdEndUserRecovery, id, daemonPID()); err != nil {
		d.abort()
		return nil, err
	}
	d.started = true
	return d, nil
}

// startQueues opens the character device and has every queue fetch all
// its tags; it returns when they have.
func (d *Device) startQueues() error {
	fd, err := openChar(d.CharPath())
	if err != nil {
		return err
	}
	d.charFD = fd
	n := int(d.info.nrHWQueues)
	ready := make(chan error, n)
	results := make(chan error, n)
	for i := 0; i < n; i++ {
		q := &queue{
			id:       i,
			depth:    int(d.info.queueDepth),
			charFD:   fd,
			encoded:  d.info.flags&FeatureCmdIoctlEncode != 0,
			userCopy: d.userCopy,
			inline:   d.inline,
			timeout:  d.timeout,
			h:        d.h,
			wakeFD:   -1,
		}
		d.queues = append(d.queues, q)
		if err := q.setup(int(d.info.maxIOBufBytes)); err != nil {
			return err
		}
	}
	d.running = true
	for _, q := range d.queues {
		goLockedThread(func() { results <- q.run(ready) })
	}
	if d.inline {
		go watchStalls(d.queues, d.done, d.h.logf)
	}
	var first error
	for range d.queues {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	go func() {
		var err error
		for range d.queues {
			e := <-results
			if e != nil && d.h.logf != nil {
				// Said at once: the kernel holds the queue's requests
				// from now on while the other queues serve on.
				d.h.logf("%v: the queue stopped serving", e)
			}
			if err == nil {
				err = e
			}
		}
		d.err = err
		close(d.done)
	}()
	return first
}

// openChar opens /dev/ublkcN, waiting briefly for the node to appear.
func openChar(path string) (int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.ENOENT) || time.Now().After(deadline) {
			return -1, fmt.Errorf("open %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// abort undoes a failed Start or Recover: the queues stop, and a device
// this daemon created and never started is deleted. A device being
// recovered is left as it was, for another attempt.
func (d *Device) abort() {
	d.stopQueues(0)
	if !d.started && !d.recovering {
		d.ctrl.simple(cmdDelDev, d.info.devID, 0)
	}
	d.ctrl.close()
}

// stopQueues makes the queues return, waiting up to grace for the kernel to
// abort their commands first, then releases them and the character device.
// A ring the kernel may still hold commands of closes only once its
// queue's thread has ended (see thread.go); should the thread not end, the
// queue is left to the kernel, which releases it when the process exits.
func (d *Device) stopQueues(grace time.Duration) {
	if len(d.queues) > 0 {
		if d.running {
			select {
			case <-d.done:
			case <-time.After(grace):
				for _, q := range d.queues {
					q.stop()
				}
				<-d.done
			}
		}
		for _, q := range d.queues {
			if q.holdsCommands() && !waitThreadGone(q.tid, 5*time.Second) {
				if d.h.logf != nil {
					d.h.logf("ublk queue %d: thread %d did not end; its ring stays open until the process exits", q.id, q.tid)
				}
				continue
			}
			q.release()
		}
		d.queues = nil
	}
	if d.charFD >= 0 {
		unix.Close(d.charFD)
		d.charFD = -1
	}
}

// Path returns the block device's path, /dev/ublkbN.
func (d *Device) Path() string { return fmt.Sprintf("/dev/ublkb%d", d.info.devID) }

// CharPath returns the character device's path, /dev/ublkcN.
func (d *Device) CharPath() string { return fmt.Sprintf("/dev/ublkc%d", d.info.devID) }

// ID returns the device number N of /dev/ublkbN.
func (d *Device) ID() int { return int(d.info.devID) }

// UserCopy reports whether data moves by pread/pwrite on /dev/ublkcN.
func (d *Device) UserCopy() bool { return d.userCopy }

// Flags returns the feature flags negotiated with the kernel.
func (d *Device) Flags() uint64 { return d.info.flags }

// Wait blocks until every queue has stopped: the device was stopped (by
// Stop or from outside, e.g. `ublk del`) or a queue failed.
func (d *Device) Wait() error {
	<-d.done
	return d.err
}

// Stop stops the block device (STOP_DEV: the kernel drains and flushes it),
// stops the queues, flushes dev and deletes the ublk device (DEL_DEV).
func (d *Device) Stop() error {
	d.stopOnce.Do(func() {
		var errs []error
		if err := d.ctrl.simple(cmdStopDev, d.info.devID, 0); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
		d.stopQueues(10 * time.Second)
		d.h.durability.Flush() // the flush failures not logged yet, counted
		if err := d.h.dev.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flush: %w", err))
		}
		if err := d.ctrl.deleteDev(d.info.devID); err != nil {
			errs = append(errs, err)
		}
		d.ctrl.close()
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

func isGone(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && ce.Err == unix.ENODEV
}

// ErrServed reports a device that a live daemon still serves.
var ErrServed = errors.New("ublk device is served by a running daemon")

// DeleteAbandoned removes device id when no live daemon serves it (its
// daemon died and nobody recovered it): STOP_DEV fails the requests the
// kernel was holding, so whatever waits on them (a mount, a sync) goes on
// with errors, and /dev/ublkbN goes away; the device number is freed once
// its last opener closes it. A device with a running server is left alone
// (ErrServed). It asks through ControlPath.
func DeleteAbandoned(id int) error {
	if id < 0 {
		return fmt.Errorf("ublk: no device %d", id)
	}
	c, err := openControl("")
	if err != nil {
		return err
	}
	defer c.close()
	info, err := c.devInfo(uint32(id))
	if err != nil {
		return err
	}
	if info.state == stateLive && pidAlive(int(info.ublksrvPID)) {
		return fmt.Errorf("%w: /dev/ublkb%d (pid %d)", ErrServed, id, info.ublksrvPID)
	}
	if err := c.simple(cmdStopDev, uint32(id), 0); err != nil && !isGone(err) {
		return err
	}
	return c.deleteDev(uint32(id))
}

// deleteDev removes a stopped device. DEL_DEV waits until every opener of
// /dev/ublkbN is gone (a filesystem still mounted on it, say); the async
// form, where the kernel has it, returns at once and the device number is
// freed when the last opener leaves.
func (c *control) deleteDev(id uint32) error {
	if c.encoded {
		err := c.simple(cmdDelDevAsync, id, 0)
		var ce *CommandError
		if err == nil || isGone(err) {
			return nil
		}
		if !errors.As(err, &ce) || (ce.Err != unix.EOPNOTSUPP && ce.Err != unix.EINVAL) {
			return err
		}
	}
	if err := c.simple(cmdDelDev, id, 0); err != nil && !isGone(err) {
		return err
	}
	return nil
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
