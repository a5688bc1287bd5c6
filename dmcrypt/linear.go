package dmcrypt

// Linear is the "cipher" of a segment kept in plaintext, as dm's linear
// target maps it: the data of an encryption in place not yet encrypted
// (a LUKS2 linear segment). It has no key.
func Linear() SectorCipher { return linear{} }

type linear struct{}

func (linear) Encrypt([]byte, uint64, int) {}
func (linear) Decrypt([]byte, uint64, int) {}
func (linear) Wipe()                       {}
