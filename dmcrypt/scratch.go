package dmcrypt

import "github.com/luksd/luksd/blockdev"

var _ blockdev.ScratchWriter = (*Device)(nil)

// WriteAtScratch is WriteAt that encrypts p in place and writes it from
// there: p holds ciphertext afterwards (part of it, after an error). The
// NBD server hands over its payload buffers this way, which saves copying
// every write into a buffer of the crypt layer's own. A write that does
// not cover whole sectors needs a read-modify-write and takes WriteAt's
// path, leaving p as it was.
func (d *Device) WriteAtScratch(p []byte, off int64) (int, error) {
	return d.writeAt(p, off, false, true)
}

// inPlace reports whether a scratch write of p at off is encrypted in
// place: whole sectors, and the Device's own cipher. A segmented Device
// (a reencryption in progress) has none: its segments' writes copy. It
// is asked inside the gate, where the sector size and the segments stay
// put: a reencryption that begins or ends changes both.
func (d *Device) inPlace(p []byte, off int64) bool {
	ss := d.sectorSize
	return d.parts == nil && off%ss == 0 && int64(len(p))%ss == 0
}

// writeInPlace encrypts p, whole sectors at off, in place and writes it,
// one backend call per span.
func (d *Device) writeInPlace(p []byte, off int64) error {
	ss := d.sectorSize
	// Whole sectors only: taken shared, as in write.
	unlock := d.locks.lock(off/ss, (off+int64(len(p))-1)/ss, false)
	defer unlock()
	return d.spans(off, int64(len(p)), func(sOff, sLen int64) error {
		b := p[sOff-off : sOff-off+sLen]
		d.crypt(b, sOff, true, nil)
		return d.writeBackend(b, sOff, false)
	})
}
