package devtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
)

// Hammer is one of n writers of a device under test: until ctx ends it
// writes random pieces (unaligned at times) of its own blocks of dev
// (every nth blockSize-byte block, from the kth), reads each block back
// at once and keeps model, the device's expected content, up to date.
// Writers with distinct k share model safely.
func Hammer(ctx context.Context, dev interface {
	io.ReaderAt
	io.WriterAt
}, model []byte, k, n, blockSize int, seed uint64) error {
	rng := mrand.New(mrand.NewPCG(seed, 1))
	blocks := len(model) / blockSize
	got := make([]byte, blockSize)
	for ctx.Err() == nil {
		b := k + n*rng.IntN((blocks-k+n-1)/n)
		if b >= blocks {
			continue
		}
		lo := rng.IntN(blockSize / 2)
		hi := blockSize/2 + rng.IntN(blockSize/2) + 1
		off := int64(b*blockSize + lo)
		data := make([]byte, hi-lo)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if _, err := dev.WriteAt(data, off); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
		copy(model[b*blockSize+lo:], data)
		if _, err := dev.ReadAt(got, int64(b*blockSize)); err != nil {
			return fmt.Errorf("read at %d: %w", b*blockSize, err)
		}
		if !bytes.Equal(got, model[b*blockSize:(b+1)*blockSize]) {
			return fmt.Errorf("block %d reads back wrong right after its write", b)
		}
	}
	return nil
}
