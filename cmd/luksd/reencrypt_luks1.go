package main

import (
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// LUKS1 volumes are not reencrypted by luksd. cryptsetup 2.6.1 rewrites
// them with its legacy offline code, which needs device-mapper for every
// step and, where it cannot have it, fails after changing the header's
// magic (leaving the volume unopenable until repaired). luksd refuses
// before it writes anything, in one line that says the way forward:
// `luksd convert --type luks2` first (a conversion it tries in memory,
// so the line says whether it would work, and why not), then reencrypt.
// Exit 1, cryptsetup's code for a request it does not support.

// luks1DryRunMax bounds the header area the dry-run conversion copies
// into memory (a LUKS1 header with its keyslots is 1-2 MiB; the area
// up to the data is at most this in any layout cryptsetup makes).
const luks1DryRunMax = 64 << 20

// refuseLUKS1 returns the refusal when the header of dev (or --header)
// is LUKS1, and nil otherwise (anything else is for the LUKS2 path,
// which reports it).
func refuseLUKS1(c *cli.Context, dev string) error {
	// --header names the header, or (--decrypt) a file to export it to:
	// then the device holds it.
	for _, hp := range []string{headerPath(c, dev), dev} {
		if err := refuseLUKS1At(c, hp); err != nil {
			return err
		}
	}
	return nil
}

// refuseLUKS1At is refuseLUKS1 for the header at hp.
func refuseLUKS1At(c *cli.Context, hp string) error {
	d, err := openHeaderDevice(c, hp, false)
	if err != nil {
		return nil
	}
	defer d.Close()
	d.LUKS2Only = false
	h, err := d.read()
	if err != nil || h.Version() != 1 {
		return nil
	}
	switch why := luks1ConvertDryRun(h, d); {
	case why == "":
		return exitf(exitParams, "Device %s is a LUKS1 device: luksd reencrypts LUKS2 only. Convert it first (luksd convert --type luks2 %s), then reencrypt it.", hp, hp)
	case why == errInUseText:
		return exitf(exitParams, "Device %s is a LUKS1 device: luksd reencrypts LUKS2 only. Close it, convert it (luksd convert --type luks2 %s), then reencrypt it.", hp, hp)
	default:
		return exitf(exitParams, "Device %s is a LUKS1 device: luksd reencrypts LUKS2 only, and it cannot be converted to LUKS2 (%s). Copy its data to a new LUKS2 volume.", hp, strings.TrimSuffix(why, "."))
	}
}

const errInUseText = "in use"

// luks1ConvertDryRun converts a copy of h's header area in memory, as
// `luksd convert --type luks2` would convert it on the device, and
// returns why that fails ("" when it works, errInUseText when only the
// volume being open stops it).
func luks1ConvertDryRun(h *luks2.Header, d *headerDevice) string {
	area := d.Size
	if seg, err := h.Segment(); err == nil && seg.Offset > 0 {
		area = min(area, seg.Offset)
	}
	if area <= 0 || area > luks1DryRunMax {
		return "a header area of this size is not converted by luksd"
	}
	mem := &memHeaderArea{b: make([]byte, area), src: d}
	defer func() { clear(mem.b) }()
	if _, err := d.ReadAt(mem.b, 0); err != nil && !errors.Is(err, io.EOF) {
		return err.Error()
	}
	// An image file may grow (or be read further) where the conversion
	// needs room, as the real one does; a block device or remote volume
	// not.
	if fi, err := d.File.Stat(); err == nil && fi.Mode().IsRegular() {
		mem.regular = true
	}
	_, err := h.Convert(mem, area, 2, luks2.ConvertOptions{InUse: volumeActive})
	var refused *luks2.ConvertError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, luks2.ErrConvertInUse):
		return errInUseText
	case errors.As(err, &refused) && refused.Msg != "":
		return refused.Msg
	case errors.As(err, &refused):
		return "its header layout is not one cryptsetup converts"
	}
	return err.Error()
}

// memHeaderArea is a device's header area copied into memory, where a
// dry-run conversion writes. For an image file it is growable as the
// file is (luks2's fallocate): it reads on from the file.
type memHeaderArea struct {
	b       []byte
	src     io.ReaderAt
	regular bool
}

func (m *memHeaderArea) Stat() (os.FileInfo, error) {
	if !m.regular {
		return nil, errors.ErrUnsupported
	}
	return memFileInfo(len(m.b)), nil
}

func (m *memHeaderArea) Truncate(size int64) error {
	if !m.regular || size > luks1DryRunMax {
		return errors.ErrUnsupported
	}
	if n := int64(len(m.b)); size > n {
		more := make([]byte, size-n)
		if _, err := m.src.ReadAt(more, n); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		m.b = append(m.b, more...)
	}
	return nil
}

// memFileInfo is a memHeaderArea's size as a regular file's.
type memFileInfo int64

func (s memFileInfo) Name() string       { return "header area" }
func (s memFileInfo) Size() int64        { return int64(s) }
func (s memFileInfo) Mode() os.FileMode  { return 0o600 }
func (s memFileInfo) ModTime() time.Time { return time.Time{} }
func (s memFileInfo) IsDir() bool        { return false }
func (s memFileInfo) Sys() any           { return nil }

func (m *memHeaderArea) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memHeaderArea) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, errors.New("write past the header area")
	}
	return copy(m.b[off:], p), nil
}

func (m *memHeaderArea) Flush() error { return nil }
