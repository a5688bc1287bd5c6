package dmcrypt

// largeIVCipher is dm-crypt's iv_large_sectors: IVs count sectors of the
// segment's own size, not 512-byte units (cryptsetup open --type plain
// --iv-large-sectors). The IV sector the crypt layer hands over, in
// 512-byte units with the IV offset (--skip) added, is shifted down as the
// kernel shifts it.
type largeIVCipher struct {
	c SectorCipher
}

// LargeIVSectors returns c with dm-crypt's iv_large_sectors numbering.
func LargeIVSectors(c SectorCipher) SectorCipher { return largeIVCipher{c} }

func (l largeIVCipher) Encrypt(buf []byte, sector uint64, sectorSize int) {
	l.each(buf, sector, sectorSize, l.c.Encrypt)
}

func (l largeIVCipher) Decrypt(buf []byte, sector uint64, sectorSize int) {
	l.each(buf, sector, sectorSize, l.c.Decrypt)
}

// each runs fn on one sector at a time, each with its own IV number.
func (l largeIVCipher) each(buf []byte, sector uint64, sectorSize int, fn func([]byte, uint64, int)) {
	iv := sector / uint64(sectorSize/512)
	for off := 0; off < len(buf); off += sectorSize {
		fn(buf[off:off+sectorSize], iv, sectorSize)
		iv++
	}
}

func (l largeIVCipher) Wipe() { l.c.Wipe() }
