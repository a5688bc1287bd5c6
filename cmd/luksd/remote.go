package main

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/s3"
	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/internal/cmdline"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// remoteFile is a remote volume (blockdev.Open of a URL) as the
// luks2.File the header verbs read and write: Sync flushes it; it is no
// file, and never grows.
type remoteFile struct {
	blockdev.Device
	// created is the location of a volume luksFormat --device-size
	// created in this process: closed without a LUKS header (the format
	// failed or was not confirmed), it is removed again.
	created string
}

// created is the location createRemote made a volume at, or "".
var created string

// Close closes the volume, and removes one this process created and
// did not format.
func (f remoteFile) Close() error {
	if f.created == "" || luks2.IsLUKS(f.Device) {
		return f.Device.Close()
	}
	err := f.Device.Close()
	return errors.Join(err, removeRemote(f.created))
}

// removeRemote removes the volume at location (an s3:// one: the only
// scheme createRemote makes volumes for).
func removeRemote(location string) error {
	st, err := s3.Connect(location)
	if err != nil {
		return err
	}
	return s3.Remove(st)
}

func (f remoteFile) Sync() error                { return f.Flush() }
func (f remoteFile) Stat() (os.FileInfo, error) { return nil, errors.ErrUnsupported }
func (f remoteFile) Truncate(int64) error       { return errors.ErrUnsupported }

// Refresh forgets what the volume's cache read (blockdev.Refresher): the
// header verbs call it under the metadata lock.
func (f remoteFile) Refresh() error {
	if r, ok := f.Device.(blockdev.Refresher); ok {
		return r.Refresh()
	}
	return nil
}

// remoteLogf receives what a remote volume logs besides the errors it
// returns (blockdev.OpenOptions.Logf: an NBD server that broke the
// protocol). A one-shot verb leaves it nil and prints its error, one
// message as cryptsetup's; a process that becomes a volume's daemon sets
// it to the daemon's log (logInDaemon), where the header of a volume
// reencrypted online is opened too.
var remoteLogf func(format string, args ...any)

// logInDaemon sends what remote volumes log to the daemon's log, from
// now on: this process serves a volume.
func logInDaemon() { remoteLogf = daemon.Log.Printf }

// openRemote opens the volume at a URL location for the header verbs.
func openRemote(location string, write bool) (luks2.File, int64, error) {
	d, err := blockdev.Open(location, blockdev.OpenOptions{ReadOnly: !write, Logf: remoteLogf})
	if err != nil {
		return nil, 0, locationError(location, err)
	}
	f := remoteFile{Device: d}
	if write && location == created {
		f.created = location
	}
	return f, d.Size(), nil
}

// createRemote makes the volume luksFormat --device-size asks for: a
// store volume records its size, so it is created before its header is
// written. cryptsetup refuses --device-size with luksFormat, and luksd
// does too for a local device.
// --chunk-size picks the size of its chunk objects, recorded in the
// store: an existing volume keeps its own. A size too small for the
// header is refused before anything is created; a volume created and
// then not formatted (no confirmation, no passphrase, a failed format) is
// removed when luksFormat closes it (remoteFile.Close).
func createRemote(c *cli.Context, location string) error {
	if !c.IsSet("device-size") {
		if c.IsSet("chunk-size") {
			return exitf(exitParams, "Option --chunk-size is allowed only with --device-size (a volume keeps the chunk size it was created with).")
		}
		return nil
	}
	if blockdev.Scheme(location) == "" {
		return exitf(exitParams, "Option --device-size is not allowed with luksFormat action.")
	}
	chunk, err := chunkSize(c)
	if err != nil {
		return err
	}
	if err := checkFormatSize(c); err != nil {
		return err
	}
	err = blockdev.Create(location, blockdev.CreateOptions{Size: c.Int64("device-size"), ChunkSize: chunk})
	switch {
	case errors.Is(err, os.ErrExist):
		return exitf(exitBusy, "luksd: %v (format it again without --device-size)", err)
	case errors.Is(err, blockdev.ErrNotSupported):
		return exitf(exitParams, "luksd: --device-size cannot create a volume at %s.", location)
	case errors.Is(err, s3.ErrLayout):
		return exitf(exitParams, "luksd: %v", err)
	case err != nil:
		return locationError(location, err)
	}
	created = location
	return nil
}

// checkFormatSize refuses a LUKS2 --device-size that luks2.Format would
// refuse, with its words: no larger than the header area its options
// lay out. (LUKS1's is left to Format, and the volume removed after.)
func checkFormatSize(c *cli.Context) error {
	version, err := formatVersion(c)
	if err != nil || version != 2 {
		return err
	}
	opts, err := formatOptions(c, version)
	if err != nil {
		return err
	}
	l, err := luks2.FormatLayout(opts)
	end := max(l.DataOffset, 2*l.MetadataSize+l.KeyslotsSize)
	if size := c.Int64("device-size"); err == nil && !opts.DetachedData && size <= end {
		return formatError(fmt.Errorf("device is too small: %d bytes, the LUKS2 header needs more than %d", size, end))
	}
	return nil
}

// chunkSize reads --chunk-size (0 when not given) in cryptsetup's size
// units: a multiple of 4096 bytes and of the sector size, so that no
// encryption sector straddles two objects. The store refuses sizes it
// does not keep (s3: a power of two from 64 KiB to 64 MiB).
func chunkSize(c *cli.Context) (int64, error) {
	if !c.IsSet("chunk-size") {
		return 0, nil
	}
	n, ok := cmdline.ParseSize(c.String("chunk-size"))
	if !ok || n == 0 || n > math.MaxInt32 {
		return 0, exitf(exitParams, "Invalid size specification in parameter --chunk-size.")
	}
	if n%4096 != 0 { // the largest LUKS sector
		return 0, exitf(exitParams, "Chunk size must be a multiple of 4096 bytes and of the sector size.")
	}
	return int64(n), nil
}

// alignToChunks aligns the data offset of a volume in an S3 store to its
// chunk objects, as cryptsetup aligns it to a disk's optimal I/O size,
// unless the layout was asked for (--offset, --align-payload, --header,
// --luks2-*-size). No chunk then holds both header and data, so a header
// edit beside a running serve (luksAddKey, an online reencryption) and the
// daemon's data writes never upload the same object from two caches.
// Chunks up to 16 MiB leave LUKS2's default offset as it is; LUKS1's
// moves from 2 to 4 MiB with the default 4 MiB chunks.
func alignToChunks(location string, opts *luks2.FormatOptions) {
	if blockdev.Scheme(location) != "s3" || opts.PayloadAlign != 0 || opts.DataOffset != 0 ||
		opts.DetachedData || opts.MetadataSize != 0 || opts.KeyslotsSize != 0 {
		return
	}
	// A store that cannot be read here is reported when the volume is
	// opened for the header, next.
	store, err := s3.Connect(location)
	if err != nil {
		return
	}
	if m, err := s3.ReadManifest(store); err == nil && m.ChunkSize > 1<<20 {
		opts.PayloadAlign = m.ChunkSize
	}
}

// refuseServedSharedChunk refuses to edit the header of an S3 volume
// that a daemon serves (someone holds its lease) when one chunk object
// holds header and data together, as a LUKS1 volume copied to S3 does
// (2 MiB of header, 4 MiB chunks). The daemon and the editor each upload
// that chunk whole from their own cache: the daemon would put the old
// header back, or the edit the chunk's old data. Volumes luksd formats
// keep the two apart (alignToChunks), and their headers are edited while
// served as a disk's are.
func refuseServedSharedChunk(d *headerDevice) error {
	if blockdev.Scheme(d.Path) != "s3" {
		return nil
	}
	store, err := s3.Connect(d.Path)
	if err != nil {
		return locationError(d.Path, err)
	}
	holder, err := s3.LeaseHolder(store)
	if err != nil {
		return locationError(d.Path, err)
	}
	if holder == "" {
		return nil
	}
	m, err := s3.ReadManifest(store)
	if err != nil {
		return locationError(d.Path, err)
	}
	h, err := d.read()
	if err != nil {
		return err
	}
	offset, ok := dataOffset(h, d.Size)
	if !ok || offset%m.ChunkSize != 0 {
		return exitf(exitBusy, "Device %s is in use by %s, and its %d-byte chunks hold header and data together: close it to change its header.",
			d.Path, holder, m.ChunkSize)
	}
	return nil
}

// dataOffset is where h's data starts on a device of size bytes, also
// for a volume in reencryption (its old segment's offset).
func dataOffset(h *luks2.Header, size int64) (int64, bool) {
	if seg, err := h.Segment(); err == nil {
		return seg.Offset, true
	}
	if l, err := h.ReencryptLayout(size); err == nil {
		return l.Old.Offset, true
	}
	return 0, false
}
