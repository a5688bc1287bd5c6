package devtest

import "github.com/luksd/luksd/blockdev"

// Hollow is a device of any size that holds nothing: reads leave the
// buffer as it is, writes are dropped. Tests that keep hundreds of MiB of
// requests in flight use it to spare the memory traffic.
type Hollow int64

var _ blockdev.Device = Hollow(0)

// ReadAt reports p read without touching it.
func (h Hollow) ReadAt(p []byte, off int64) (int, error) { return len(p), nil }

// WriteAt drops p.
func (h Hollow) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }

// Size is the size h was given.
func (h Hollow) Size() int64 { return int64(h) }

// Flush does nothing.
func (h Hollow) Flush() error { return nil }

// Close does nothing.
func (h Hollow) Close() error { return nil }
