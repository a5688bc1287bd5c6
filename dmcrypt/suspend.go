package dmcrypt

import (
	"errors"
	"sync"
	"sync/atomic"
)

// A Device can be suspended as dm-crypt suspends a device with its key
// wiped (cryptsetup luksSuspend): new requests wait, those under way
// finish, and the sector cipher is wiped; Resume installs a cipher made
// from the key again and lets the waiting requests go on.

// ErrSuspended is Suspend on a device already suspended, or Resume on one
// that is not.
var ErrSuspended = errors.New("suspended")

// errClosed is a request that waited through a suspension that ended in
// Close.
var errClosed = errors.New("device closed while suspended")

// gate lets requests in unless shut. A request counts itself in before it
// looks at the gate, so shut, which closes the gate before it counts,
// never misses one: both are sequentially consistent atomics. The mutex
// and condition are for the waiting only, off the data path.
type gate struct {
	inflight atomic.Int64
	shut     atomic.Bool
	mu       sync.Mutex
	cond     *sync.Cond
}

// enter waits while the gate is shut; every enter that returns nil is
// paired with a leave.
func (g *gate) enter(closed *atomic.Bool) error {
	for {
		g.inflight.Add(1)
		if !g.shut.Load() {
			return nil
		}
		g.leave()
		g.mu.Lock()
		for g.shut.Load() && !closed.Load() {
			g.wait()
		}
		g.mu.Unlock()
		if closed.Load() {
			return errClosed
		}
	}
}

func (g *gate) leave() {
	if g.inflight.Add(-1) == 0 && g.shut.Load() {
		g.mu.Lock()
		g.wait0().Broadcast()
		g.mu.Unlock()
	}
}

// wait0 returns the condition, made on first use (the zero gate is open).
func (g *gate) wait0() *sync.Cond {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	return g.cond
}

func (g *gate) wait() { g.wait0().Wait() }

// close shuts the gate and waits until no request is under way.
func (g *gate) close() {
	g.mu.Lock()
	g.shut.Store(true)
	for g.inflight.Load() != 0 {
		g.wait()
	}
	g.mu.Unlock()
}

// open lets requests in again, the waiting ones too.
func (g *gate) open() {
	g.mu.Lock()
	g.shut.Store(false)
	g.wait0().Broadcast()
	g.mu.Unlock()
}

// Suspend stops I/O: requests under way finish, later ones wait until
// Resume (or fail once the device is closed), and the sector cipher's
// keys are wiped from memory.
func (d *Device) Suspend() error {
	d.suspendMu.Lock()
	defer d.suspendMu.Unlock()
	if d.gate.shut.Load() {
		return ErrSuspended
	}
	if d.parts != nil {
		return ErrSegmented
	}
	d.gate.close()
	d.cipher.Wipe()
	d.cipher = nil
	return nil
}

// Resume makes c the device's sector cipher (built from the same key and
// spec as before) and lets the waiting requests go on. The Device owns c.
func (d *Device) Resume(c SectorCipher) error {
	d.suspendMu.Lock()
	defer d.suspendMu.Unlock()
	if !d.gate.shut.Load() {
		return ErrSuspended
	}
	d.cipher = c
	d.gate.open()
	return nil
}

// Suspended reports whether the device is suspended.
func (d *Device) Suspended() bool { return d.gate.shut.Load() }

// releaseWaiters wakes requests waiting at a shut gate once the device is
// closed: they fail.
func (d *Device) releaseWaiters() {
	d.gate.mu.Lock()
	d.gate.wait0().Broadcast()
	d.gate.mu.Unlock()
}
