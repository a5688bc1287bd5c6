package dmcrypt

// SectorCipher encrypts or decrypts a run of whole sectors in place, the way
// dm-crypt does for one cipher spec and volume key.
//
// buf holds len(buf)/sectorSize consecutive sectors; its length must be a
// non-zero multiple of sectorSize, and sectorSize a power of two from 512 to
// 4096. sector is the IV sector of the first one, counted in 512-byte units as
// dm-crypt counts them (consecutive 4096-byte sectors have IV sectors 0, 8,
// 16, ...). Implementations are safe for concurrent use and do not allocate.
type SectorCipher interface {
	Encrypt(buf []byte, sector uint64, sectorSize int)
	Decrypt(buf []byte, sector uint64, sectorSize int)
	// Wipe clears the key material held by the cipher.
	Wipe()
}
