package devtest

import (
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// Range is a byte range a Discard layer was asked to trim or zero.
type Range struct{ Off, Len int64 }

// Discard gives the device below Trim and WriteZeroes, as far as the Caps
// it was made with offer them, and records the ranges asked for. Both
// zero the range below (a trimmed range reads back as zeroes, as on a
// file with a hole punched). Frontend and crypt-layer tests use it to see
// which ranges reached the backend.
type Discard struct {
	blockdev.Device
	trim, zero bool
	mu         sync.Mutex
	trims      []Range
	zeroes     []Range
}

// NewDiscard wraps dev, offering Trim where offer.Trim and WriteZeroes
// where offer.WriteZeroes; the rest of offer is ignored.
func NewDiscard(dev blockdev.Device, offer blockdev.Caps) *Discard {
	return &Discard{Device: dev, trim: offer.Trim, zero: offer.WriteZeroes}
}

// Caps are the device's below, with Trim and WriteZeroes as offered.
func (d *Discard) Caps() blockdev.Caps {
	c := blockdev.CapsOf(d.Device)
	c.Trim, c.WriteZeroes = d.trim, d.zero
	return c
}

// Trim records the range and zeroes it below, or reports
// blockdev.ErrNotSupported when trim is not offered.
func (d *Discard) Trim(off, length int64) error {
	if !d.trim {
		return blockdev.ErrNotSupported
	}
	return d.zeroBelow(&d.trims, off, length)
}

// WriteZeroes records the range and zeroes it below, or reports
// blockdev.ErrNotSupported when write zeroes is not offered.
func (d *Discard) WriteZeroes(off, length int64) error {
	if !d.zero {
		return blockdev.ErrNotSupported
	}
	return d.zeroBelow(&d.zeroes, off, length)
}

func (d *Discard) zeroBelow(log *[]Range, off, length int64) error {
	d.mu.Lock()
	*log = append(*log, Range{off, length})
	d.mu.Unlock()
	if z, ok := d.Device.(blockdev.ZeroWriter); ok {
		return z.WriteZeroes(off, length)
	}
	_, err := d.Device.WriteAt(make([]byte, length), off)
	return err
}

// Trims returns the ranges trimmed, in order.
func (d *Discard) Trims() []Range {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Range(nil), d.trims...)
}

// Zeroed returns the ranges given to WriteZeroes, in order.
func (d *Discard) Zeroed() []Range {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Range(nil), d.zeroes...)
}
