package s3

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/luksd/luksd/blockdev"
)

// Volume is a chunked volume in a store, as a blockdev.Device. Every
// write is in the store when it returns (a chunk object written whole),
// so Flush has nothing left to do. It is safe for concurrent use: writes
// to one chunk take turns (a partial write reads the chunk, changes it
// and writes it back, and must not lose a write that ran beside it);
// writes to different chunks and all reads run at once.
type Volume struct {
	st       *Store
	m        Manifest
	readOnly bool
	locks    chunkLocks
	closed   atomic.Bool
}

var (
	_ blockdev.Device  = (*Volume)(nil)
	_ blockdev.Trimmer = (*Volume)(nil)
)

// OpenVolume opens the volume at st (ErrNoVolume when there is none).
func OpenVolume(st *Store, readOnly bool) (*Volume, error) {
	m, err := ReadManifest(st)
	if err != nil {
		return nil, err
	}
	return &Volume{st: st, m: m, readOnly: readOnly}, nil
}

// Manifest returns the volume's layout.
func (v *Volume) Manifest() Manifest { return v.m }

// Size is the volume's size, as its manifest records it.
func (v *Volume) Size() int64 { return v.m.Size }

// Caps: a volume takes discards (whole chunks are deleted).
func (v *Volume) Caps() blockdev.Caps {
	return blockdev.Caps{ReadOnly: v.readOnly, Trim: !v.readOnly}
}

// ReadAt reads as a file does, io.EOF past the end. Chunks not stored
// read as zeros.
func (v *Volume) ReadAt(p []byte, off int64) (int, error) {
	if v.closed.Load() {
		return 0, os.ErrClosed
	}
	if off < 0 {
		return 0, v.opError("read", off, len(p), blockdev.ErrOutOfRange)
	}
	if off >= v.m.Size {
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > v.m.Size-off {
		p, eof = p[:v.m.Size-off], io.EOF
	}
	err := v.eachChunk(p, off, v.readChunk)
	if err != nil {
		return 0, v.opError("read", off, len(p), err)
	}
	return len(p), eof
}

// WriteAt writes p at off; writes reaching past Size fail with
// blockdev.ErrOutOfRange.
func (v *Volume) WriteAt(p []byte, off int64) (int, error) {
	if err := v.checkWrite(off, int64(len(p))); err != nil {
		return 0, v.opError("write", off, len(p), err)
	}
	err := v.eachChunk(p, off, v.writeChunk)
	if err != nil {
		return 0, v.opError("write", off, len(p), err)
	}
	return len(p), nil
}

// Trim deletes the chunks that lie wholly inside [off, off+length); the
// parts of chunks it only overlaps keep their bytes (a discard is a hint).
// A deleted chunk reads as zeros.
func (v *Volume) Trim(off, length int64) error {
	if err := v.checkWrite(off, length); err != nil {
		return v.opError("trim", off, int(length), err)
	}
	cs := v.m.ChunkSize
	for idx := (off + cs - 1) / cs; idx*cs < v.m.Size && idx*cs+v.chunkLen(idx) <= off+length; idx++ {
		unlock := v.locks.lock(idx)
		err := v.st.delete(chunkName(idx))
		unlock()
		if err != nil {
			return v.opError("trim", off, int(length), err)
		}
	}
	return nil
}

// Flush has nothing to do: every write is in the store when it returns.
func (v *Volume) Flush() error {
	if v.closed.Load() {
		return os.ErrClosed
	}
	return nil
}

// Close makes every later call fail with os.ErrClosed.
func (v *Volume) Close() error {
	v.closed.Store(true)
	return nil
}

func (v *Volume) checkWrite(off, length int64) error {
	switch {
	case v.closed.Load():
		return os.ErrClosed
	case v.readOnly:
		return blockdev.ErrReadOnly
	case off < 0 || length < 0 || off > v.m.Size || length > v.m.Size-off:
		return blockdev.ErrOutOfRange
	}
	return nil
}

// eachChunk calls fn for each chunk p (at off in the volume) touches,
// with the chunk's index, the offset in the chunk and the part of p in
// it; the chunks of a request run at once.
func (v *Volume) eachChunk(p []byte, off int64, fn func(idx, at int64, part []byte) error) error {
	cs, n := v.m.ChunkSize, len(p)
	if n == 0 {
		return nil
	}
	first, last := off/cs, (off+int64(n)-1)/cs
	if first == last {
		return fn(first, off-first*cs, p)
	}
	errs := make([]error, last-first+1)
	var wg sync.WaitGroup
	for idx := first; idx <= last; idx++ {
		start := max(idx*cs, off)
		end := min((idx+1)*cs, off+int64(n))
		wg.Go(func() {
			errs[idx-first] = fn(idx, start-idx*cs, p[start-off:end-off])
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// chunkLen is the length of chunk idx: the chunk size but for a last
// chunk cut short by the volume's end.
func (v *Volume) chunkLen(idx int64) int64 {
	return min(v.m.ChunkSize, v.m.Size-idx*v.m.ChunkSize)
}

// readChunk reads part at offset at of chunk idx; a chunk not stored
// reads as zeros.
func (v *Volume) readChunk(idx, at int64, part []byte) error {
	b, err := v.st.get(chunkName(idx), at, int64(len(part)))
	if errors.Is(err, errNotFound) {
		clear(part)
		return nil
	}
	if err != nil {
		return err
	}
	clear(part[copy(part, b):])
	return nil
}

// writeChunk writes part at offset at of chunk idx: a whole chunk as it
// is, a part of one into a copy of what the store holds.
func (v *Volume) writeChunk(idx, at int64, part []byte) error {
	unlock := v.locks.lock(idx)
	defer unlock()
	n := v.chunkLen(idx)
	chunk := part
	if at != 0 || int64(len(part)) != n {
		old, err := v.st.get(chunkName(idx), 0, 0)
		if err != nil && !errors.Is(err, errNotFound) {
			return err
		}
		chunk = make([]byte, n)
		copy(chunk, old)
		copy(chunk[at:], part)
	}
	if allZero(chunk) {
		// It reads back the same, and costs nothing to keep.
		return v.st.delete(chunkName(idx))
	}
	return v.st.put(chunkName(idx), chunk, false)
}

func (v *Volume) opError(op string, off int64, n int, err error) error {
	return &blockdev.OpError{Op: op, Path: v.st.String(), Off: off, Len: int64(n), Err: err}
}

// chunkPrefix starts the name of every chunk object.
const chunkPrefix = "chunk-"

// chunkName is the object name of chunk idx: fixed-width hex, so that a
// listing comes in volume order.
func chunkName(idx int64) string { return fmt.Sprintf("%s%016x", chunkPrefix, idx) }

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// chunkLocks make writes to one chunk take turns. Chunks share a lock by
// index modulo its length: a few unrelated writes wait for each other,
// and the memory stays fixed however large the volume.
type chunkLocks [256]sync.Mutex

func (l *chunkLocks) lock(idx int64) (unlock func()) {
	m := &l[uint64(idx)%uint64(len(l))]
	m.Lock()
	return m.Unlock
}
