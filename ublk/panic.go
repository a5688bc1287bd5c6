package ublk

import (
	"runtime/debug"
	"syscall"
)

// A panic while one request is handled (a bug in a layer below, most
// likely the crypt layer) must neither kill the daemon nor a queue's
// thread: either leaves /dev/ublkbN with requests that are never
// completed. The handler recovers it: the request completes with EIO, one
// line names the request and the panic, the first panic's stack goes to
// the log, and the device is marked failed. A failed device completes
// every later write, write zeroes and discard with EIO, since whatever the
// panic interrupted may have left the layers below in a state nobody
// checked; reads and flushes go on, so the data written before can still
// be read off and made durable. Closing and opening the volume again
// clears it.

// recoverRequest, deferred by serve, turns a panic in d's handling into
// an EIO result in *res and fails the device.
func (h *handler) recoverRequest(d ioDesc, res *int32) {
	v := recover()
	if v == nil {
		return
	}
	h.broken.Store(true)
	*res = -int32(syscall.EIO)
	if h.logf == nil {
		return
	}
	if n := h.panics.Add(1); n <= 10 || n%1000 == 0 {
		h.logf("ublk: %s of %d bytes at %d panicked (%d so far): %v; the device has failed: writes fail with EIO until the volume is opened again",
			opNames[d.opFlags&0xff], int64(d.nrSectors)<<9, int64(d.startSector)<<9, n, v)
	}
	if h.stackLogged.CompareAndSwap(false, true) {
		h.logf("ublk: stack of the first panic:\n%s", debug.Stack())
	}
}

// Failed reports whether a request's handling panicked: the device then
// fails writes.
func (d *Device) Failed() bool { return d.h.broken.Load() }
