package luks2

import (
	"bytes"
	"encoding/binary"
	"io"
)

// Signatures blkid finds at the start of a device: LUKS's own, which
// luksFormat reports and wipes, and others. Before cryptsetup rewrites a
// damaged header copy it asks blkid whether the device holds any other
// signature (a filesystem made over the LUKS
// header, say): then it refuses to load the header at all rather than
// overwrite that ("Device contains ambiguous signatures, cannot
// auto-recover LUKS2."). ForeignSignature probes the common signatures
// blkid would find at the start of a device; it does not know every
// format blkid does.

// LUKSSignatures returns the offsets of the LUKS magics blkid finds on dev
// and luksFormat wipes: a primary header at 0 and a LUKS2 secondary one at
// the first of the offsets a secondary may have.
func LUKSSignatures(dev io.ReaderAt) []int64 {
	magic := func(off int64, m []byte) bool {
		b := make([]byte, len(m))
		_, err := dev.ReadAt(b, off)
		return err == nil && bytes.Equal(b, m)
	}
	var found []int64
	if magic(0, magic1) {
		found = append(found, 0)
	}
	for _, off := range hdrSizes {
		if magic(off, magic2) {
			return append(found, off)
		}
	}
	return found
}

// signature is a magic at a fixed offset.
type signature struct {
	name  string
	off   int64
	magic string
}

var signatures = []signature{
	{"xfs", 0, "XFSB"},
	{"btrfs", 65536 + 64, "_BHRfS_M"},
	{"swap", 4096 - 10, "SWAPSPACE2"},
	{"swap", 4096 - 10, "SWAP-SPACE"},
	{"ntfs", 3, "NTFS    "},
	{"exfat", 3, "EXFAT   "},
	{"iso9660", 32769, "CD001"},
	{"LVM2_member", 512 + 24, "LVM2 001"},
	{"linux_raid_member", 4096, "\xfc\x4e\x2b\xa9"},
	{"linux_raid_member", 0, "\xfc\x4e\x2b\xa9"},
	{"gpt", 512, "EFI PART"},
	{"zfs_member", 0x2000 + 8, "\x0c\xb1\xba\x00\x00\x00\x00\x00"},
}

// ForeignSignature returns the type of a non-LUKS signature at the start
// of dev, or "".
func ForeignSignature(dev io.ReaderAt) string {
	for _, s := range signatures {
		b := make([]byte, len(s.magic))
		if _, err := dev.ReadAt(b, s.off); err == nil && string(b) == s.magic {
			return s.name
		}
	}
	if extSuperblock(dev) {
		return "ext4"
	}
	if bootSector(dev) {
		return "vfat"
	}
	return ""
}

// extSuperblock reports an ext2/3/4 superblock at 1024: its magic, a block
// size of 1 to 64 KiB, some inodes and blocks.
func extSuperblock(dev io.ReaderAt) bool {
	sb := make([]byte, 128)
	if _, err := dev.ReadAt(sb, 1024); err != nil || sb[56] != 0x53 || sb[57] != 0xef {
		return false
	}
	le := binary.LittleEndian
	return le.Uint32(sb[24:]) <= 6 && le.Uint32(sb[0:]) != 0 && le.Uint32(sb[4:]) != 0
}

// bootSector reports a FAT boot sector or an MBR: 0x55aa at 510 and either
// a FAT type string or four partition entries with sane boot flags, one
// of them used.
func bootSector(dev io.ReaderAt) bool {
	b := make([]byte, 512)
	if _, err := dev.ReadAt(b, 0); err != nil || b[510] != 0x55 || b[511] != 0xaa {
		return false
	}
	if bytes.HasPrefix(b[54:], []byte("FAT1")) || bytes.HasPrefix(b[82:], []byte("FAT32")) {
		return true
	}
	used := false
	for i := 0; i < 4; i++ {
		e := b[446+16*i:]
		if e[0] != 0 && e[0] != 0x80 {
			return false
		}
		used = used || e[4] != 0 && binary.LittleEndian.Uint32(e[12:]) != 0
	}
	return used
}
