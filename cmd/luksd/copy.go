package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func init() {
	register(&cli.Command{
		Name:      "copy",
		Usage:     "copy a volume's raw bytes (header and ciphertext) between locations",
		ArgsUsage: "SRC DST",
		Description: "SRC and DST are image files, block devices, s3://BUCKET/PREFIX volumes " +
			"or NBD exports (nbd://HOST:PORT/EXPORT, nbd+unix:///EXPORT?socket=PATH). " +
			"A DST that does not exist is created with SRC's size, and then the all-zero " +
			"blocks of SRC are skipped (they read as zeros there already); an existing one " +
			"(an NBD export always is) gets every block. Neither may be " +
			"open elsewhere. Shows progress on a terminal.",
		Action: runCopy,
	})
}

// copyBlock is how much one request reads or writes; copyWorkers run at
// once (an object store wants parallel requests).
const (
	copyBlock   = 4 << 20
	copyWorkers = 8
)

func runCopy(c *cli.Context) error {
	if c.NArg() != 2 {
		return exitf(exitParams, "Command requires SRC and DST as arguments.")
	}
	srcPath, dstPath := c.Args().Get(0), c.Args().Get(1)
	src, err := openClaimed(srcPath, true)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, fresh, err := openCopyTarget(c, dstPath, src.Size())
	if err != nil {
		return err
	}
	if err := copyBlocks(src, dst, fresh); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Flush(); err != nil {
		dst.Close()
		return exitf(exitDevice, "Cannot write to device %s: %v", dstPath, err)
	}
	if err := dst.Close(); err != nil {
		return exitf(exitDevice, "Cannot write to device %s: %v", dstPath, err)
	}
	return nil
}

// openClaimed opens a location claimed, as an open volume claims it. A
// remote one that its backend cannot claim (an NBD export) is at least
// refused while a luksd volume on this host has it.
// The backend's own refusal comes first: it can name the holder (an S3
// lease). Read-only, an S3 volume is only checked for a writer, so that
// read-only credentials copy it out.
func openClaimed(path string, readOnly bool) (blockdev.Backend, error) {
	d, err := blockdev.Open(path, blockdev.OpenOptions{ReadOnly: readOnly, Exclusive: true})
	switch {
	case errors.Is(err, blockdev.ErrInUse):
		return nil, withCode(exitBusy, daemon.InUse(path, err))
	case err != nil:
		return nil, locationError(path, err)
	}
	if blockdev.Scheme(path) != "" && daemon.UserOf(path) != "" {
		d.Close()
		return nil, withCode(exitBusy, daemon.InUse(path, nil))
	}
	return d, nil
}

// openCopyTarget opens dst for writing, creating it with size bytes when
// it does not exist (fresh: it reads as zeros). An existing one must take
// writes and be at least size bytes, and its overwriting be confirmed.
func openCopyTarget(c *cli.Context, dst string, size int64) (d blockdev.Backend, fresh bool, err error) {
	if blockdev.Scheme(dst) != "" {
		err = blockdev.Create(dst, blockdev.CreateOptions{Size: size})
		fresh = err == nil
		// A backend with nothing to create (an NBD export is the
		// server's, and always there) has an existing destination.
		if err != nil && !errors.Is(err, os.ErrExist) && !errors.Is(err, blockdev.ErrNotSupported) {
			return nil, false, locationError(dst, err)
		}
	} else if f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		err = f.Truncate(size)
		f.Close()
		if err != nil {
			os.Remove(dst)
			return nil, false, exitf(exitDevice, "Cannot create %s: %v", dst, err)
		}
		fresh = true
	}
	if d, err = openClaimed(dst, false); err != nil {
		return nil, false, err
	}
	if blockdev.CapsOf(d).ReadOnly {
		d.Close()
		return nil, false, exitf(exitDevice, "Device %s is read-only.", dst)
	}
	if d.Size() < size {
		d.Close()
		return nil, false, exitf(exitDevice, "Device %s is too small (%d bytes, the source has %d).", dst, d.Size(), size)
	}
	if !fresh && !confirm(c, fmt.Sprintf("This will overwrite data on %s irrevocably.", dst)) {
		d.Close()
		return nil, false, errAborted(exitParams, "Operation aborted.")
	}
	return d, fresh, nil
}

// copyBlocks copies src to dst in blocks, several at once, skipping the
// all-zero blocks when dst is fresh.
func copyBlocks(src, dst blockdev.Device, fresh bool) error {
	size := src.Size()
	var next, done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	stop := showProgress(size, &done)
	defer stop()
	var wg sync.WaitGroup
	for range copyWorkers {
		wg.Go(func() {
			buf := blockdev.GetBuffer(copyBlock)
			defer blockdev.PutBuffer(buf)
			for {
				off := next.Add(copyBlock) - copyBlock
				if off >= size {
					return
				}
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed {
					return
				}
				if err := copyOne(src, dst, buf[:min(copyBlock, size-off)], off, fresh); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				done.Add(min(copyBlock, size-off))
			}
		})
	}
	wg.Wait()
	return firstErr
}

// copyOne copies the block p at off.
func copyOne(src, dst blockdev.Device, p []byte, off int64, fresh bool) error {
	if _, err := src.ReadAt(p, off); err != nil {
		return exitf(exitDevice, "Cannot read device: %v", err)
	}
	if fresh && blockdev.IsZero(p) {
		return nil
	}
	if _, err := dst.WriteAt(p, off); err != nil {
		return exitf(exitDevice, "Cannot write to device: %v", err)
	}
	return nil
}

// showProgress prints, on a terminal, how much of total is done and at
// what rate, twice a second, until the returned stop.
func showProgress(total int64, done *atomic.Int64) (stop func()) {
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err != nil {
		return func() {}
	}
	start := time.Now()
	print := func() {
		n := done.Load()
		rate := float64(n) / (1 << 20) / max(time.Since(start).Seconds(), 0.001)
		fmt.Fprintf(os.Stderr, "\rCopied %d of %d MiB (%d%%), %.1f MiB/s ", n>>20, total>>20, n*100/max(total, 1), rate)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				print()
				fmt.Fprintln(os.Stderr)
				return
			case <-t.C:
				print()
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}
