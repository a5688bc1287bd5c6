// Package devtest holds test doubles for blockdev.Device: an in-memory
// device and layers that stack on any Device (write recording for crash-point
// tests; fault and stall injection). Tests of every package use these
// instead of writing their own.
package devtest

import (
	"io"
	"os"
	"sync"

	"github.com/luksd/luksd/blockdev"
)

// Mem is an in-memory blockdev.Device of a fixed size (or one that grows,
// NewGrowing). It is safe for
// concurrent use and counts flushes.
type Mem struct {
	mu      sync.Mutex
	data    []byte
	grow    bool // writes past the end extend it, as on a regular file
	flushes int
	closed  bool
}

var _ blockdev.Device = (*Mem)(nil)

// NewMem returns a zeroed device of size bytes.
func NewMem(size int) *Mem { return &Mem{data: make([]byte, size)} }

// MemOf returns a device holding a copy of b.
func MemOf(b []byte) *Mem { return &Mem{data: append([]byte(nil), b...)} }

// NewGrowing returns an empty device that grows on write, as a fresh
// regular file does: a write past the end extends it with zeroes in
// between. Its Size is what was written so far.
func NewGrowing() *Mem { return &Mem{grow: true} }

// ReadAt reads as a file does: io.EOF past the end.
func (m *Mem) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, os.ErrClosed
	}
	if off < 0 || off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt refuses writes that reach past the end (blockdev.ErrOutOfRange),
// unless the device grows.
func (m *Mem) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, os.ErrClosed
	}
	if end := off + int64(len(p)); m.grow && off >= 0 && end > int64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-int64(len(m.data)))...)
	}
	if off < 0 || off > int64(len(m.data)) || int64(len(p)) > int64(len(m.data))-off {
		return 0, blockdev.ErrOutOfRange
	}
	return copy(m.data[off:], p), nil
}

// Size is the fixed size (what was written so far, if it grows).
func (m *Mem) Size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.data))
}

// Flush counts the call.
func (m *Mem) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes++
	return nil
}

// Close makes every later call fail with os.ErrClosed.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Flushes returns how many times Flush was called.
func (m *Mem) Flushes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushes
}

// Closed reports whether Close was called.
func (m *Mem) Closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Bytes returns a copy of the contents.
func (m *Mem) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data...)
}
