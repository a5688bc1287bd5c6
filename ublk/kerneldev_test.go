package ublk

import "sync"

// memDevice and trimDevice are the devices kernel_test.go and
// kernel_stall_test.go serve to the kernel. They stay until those files
// (changing under the ublk kernel-race fix) move to blockdev/devtest
// like the unit tests did: a devtest.Discard over a devtest.Mem.
type memDevice struct {
	mu      sync.Mutex
	data    []byte
	flushes int
}

func (m *memDevice) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(p, m.data[off:]), nil
}

func (m *memDevice) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.data[off:], p), nil
}

func (m *memDevice) Size() int64 { return int64(len(m.data)) }

func (m *memDevice) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes++
	return nil
}

func (m *memDevice) Close() error { return nil }

func (m *memDevice) flushCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushes
}

// trimDevice adds Trim and WriteZeroes, recording the trimmed ranges.
type trimDevice struct {
	memDevice
	trims [][2]int64
}

func (d *trimDevice) Trim(off, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.trims = append(d.trims, [2]int64{off, n})
	return nil
}

func (d *trimDevice) WriteZeroes(off, n int64) error { return nil }

func (d *trimDevice) trimmed() [][2]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][2]int64(nil), d.trims...)
}
