// Package blockdev defines the one interface every layer of luksd speaks — a
// backend produces a Device, the crypt layer wraps one and is one, a frontend
// serves one — and the local backends (regular files and block devices).
package blockdev

import "io"

// Device is a random-access block store. Implementations must be safe for
// concurrent use: frontends issue many requests at once and no layer holds a
// global lock on the data path.
type Device interface {
	io.ReaderAt
	io.WriterAt
	// Size is the size in bytes of the addressable area.
	Size() int64
	// Flush makes every write that completed before the call durable.
	Flush() error
	Close() error
}

// Trimmer is implemented by devices that can discard a range (punch a hole).
type Trimmer interface {
	Trim(off, length int64) error
}

// Refresher is implemented by devices that keep what they read (a remote
// store's cache): Refresh forgets it, so that the next reads see what
// other writers wrote since (writes not yet uploaded stay). The header
// editors call it under their metadata lock (luks2.HeaderFile).
type Refresher interface {
	Refresh() error
}

// ZeroWriter is implemented by devices that can write zeroes to a range
// faster than writing a buffer of zeroes.
type ZeroWriter interface {
	WriteZeroes(off, length int64) error
}

// FUAWriter is implemented by devices that can make one write durable by
// itself (Forced Unit Access) without flushing everything else. A
// frontend answers a write flagged FUA with WriteAtFUA where the device
// has it, instead of WriteAt and Flush.
type FUAWriter interface {
	WriteAtFUA(p []byte, off int64) (int, error)
}

// ScratchWriter is implemented by devices that transform what they write
// (the crypt layer encrypts it) and can do so in the caller's buffer:
// WriteAtScratch writes p at off as WriteAt does, but leaves p's contents
// undefined, which saves a copy of every write. A frontend that owns its
// payload buffers uses it.
type ScratchWriter interface {
	WriteAtScratch(p []byte, off int64) (int, error)
}

// Whether a device is read-only, has a block size, or takes discards, it
// declares in its Caps (caps.go).
