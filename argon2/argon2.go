// Package argon2 implements the Argon2 memory-hard password hash, version
// 0x13, as RFC 9106 specifies it: Argon2d, Argon2i and Argon2id. LUKS2
// keyslots use Argon2i and Argon2id; the results are those of libargon2,
// which cryptsetup uses, and of golang.org/x/crypto/argon2.
//
// The work is the compression function G over 1 KiB blocks, the BLAKE2b
// round on 64-bit words with multiplications (BlaMka). It has SIMD paths
// chosen from the CPU's features for each derivation: AVX2 and AVX-512 on
// amd64, NEON on arm64 and on 32-bit ARM (ARMv7 cores that have it). Every
// other platform, and the purego build tag, use the portable code.
//
// At the sizes LUKS uses, a block's time is mostly the wait for its
// reference block, read from anywhere in the memory. The lanes are filled
// in parallel between the four synchronisation points of a pass, by up to
// GOMAXPROCS goroutines; a goroutine with more than one lane fills them
// block by block in turn, each reference block prefetched as soon as its
// place is known, so that one lane's wait overlaps another's work.
//
// A derivation makes a few small allocations and one large one, its
// memory: on Linux an anonymous mapping outside the Go heap, which goes
// back to the kernel when the derivation ends, so the process never holds
// two. A Memory keeps it between derivations instead.
//
// The amd64 assembly, argon2_amd64.s, is generated with avo by _asm/argon2
// at the top of the repository (the _asm module, so luksd never depends on
// avo); the arm64 and ARMv7 assembly is written by hand, as avo only
// targets amd64.
package argon2

import (
	"errors"
	"fmt"
	"math"
)

// Mode is the Argon2 variant: how the reference blocks are chosen.
type Mode int

const (
	// Argon2d picks reference blocks from the memory's contents.
	Argon2d Mode = 0
	// Argon2i picks them from a pseudo-random sequence independent of
	// the password.
	Argon2i Mode = 1
	// Argon2id is Argon2i for the first half of the first pass, then
	// Argon2d.
	Argon2id Mode = 2
)

func (m Mode) String() string {
	switch m {
	case Argon2d:
		return "argon2d"
	case Argon2i:
		return "argon2i"
	case Argon2id:
		return "argon2id"
	}
	return fmt.Sprintf("argon2 mode %d", int(m))
}

// ErrMemory reports that the derivation's memory could not be allocated.
var ErrMemory = errors.New("argon2: cannot allocate memory")

// Key derives a keyLen-byte key from password and salt with mode, time
// passes over memoryKiB KiB of memory, in threads lanes.
//
// memoryKiB must be at least 8*threads; it is rounded down to a multiple of
// 4*threads, as RFC 9106 rounds it. time, threads and keyLen must be at
// least 1. The memory is allocated for this call and returned before it
// ends. The errors are a parameter out of range and ErrMemory.
func Key(mode Mode, password, salt []byte, time, memoryKiB uint32, threads uint8, keyLen uint32) ([]byte, error) {
	var m Memory
	defer m.Free()
	return m.Key(mode, password, salt, time, memoryKiB, threads, keyLen)
}

// Memory is the working memory of derivations, kept between them: a
// caller that derives many times (calibration, tests) allocates it once.
// The zero Memory is empty and grows to the largest derivation it runs.
// A Memory runs one derivation at a time.
type Memory struct {
	blocks []block
}

// Key is the package's Key run in m: it grows m when m is smaller than
// memoryKiB, and keeps the memory after it returns. A Memory that already
// holds the blocks skips the page faults of a first touch, so a derivation
// in it runs faster than one in fresh memory (as Key does).
func (m *Memory) Key(mode Mode, password, salt []byte, time, memoryKiB uint32, threads uint8, keyLen uint32) ([]byte, error) {
	p := params{mode: mode, time: time, memoryKiB: memoryKiB, threads: uint32(threads), keyLen: keyLen}
	return m.derive(defaultImpl, p, password, salt, nil, nil)
}

// Free returns m's memory to the system; m is empty again and can be
// reused.
func (m *Memory) Free() {
	if m.blocks != nil {
		freeBlocks(m.blocks)
		m.blocks = nil
	}
}

// params are a derivation's costs, as the caller gives them.
type params struct {
	mode      Mode
	time      uint32 // passes
	memoryKiB uint32 // m, before rounding
	threads   uint32 // p, the lanes
	keyLen    uint32 // T, the tag length
}

// check returns the error for parameters out of RFC 9106's ranges.
func (p params) check() error {
	switch {
	case p.mode < Argon2d || p.mode > Argon2id:
		return fmt.Errorf("argon2: unknown mode %d", int(p.mode))
	case p.time < 1:
		return errors.New("argon2: time cost must be at least 1")
	case p.threads < 1:
		return errors.New("argon2: threads must be at least 1")
	case uint64(p.memoryKiB) < 8*uint64(p.threads):
		return fmt.Errorf("argon2: memory %d KiB is less than 8 KiB per thread (%d threads)", p.memoryKiB, p.threads)
	case p.keyLen < 1:
		return errors.New("argon2: key length must be at least 1")
	case uint64(p.memoryKiB)*blockSize > math.MaxInt:
		return fmt.Errorf("argon2: memory %d KiB is more than this machine addresses", p.memoryKiB)
	}
	return nil
}

// blockCount is m', the memory in blocks: rounded down to a multiple of
// 4*threads, so each lane has four equal segments.
func (p params) blockCount() uint32 {
	return p.memoryKiB / (syncPoints * p.threads) * (syncPoints * p.threads)
}

// derive runs one derivation with im's block function in m, with the
// optional secret and associated data of RFC 9106 (LUKS uses neither).
func (m *Memory) derive(im impl, p params, password, salt, secret, data []byte) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	n := int(p.blockCount())
	if len(m.blocks) < n {
		m.Free()
		b, err := allocBlocks(n)
		if err != nil {
			return nil, err
		}
		m.blocks = b
	}
	h0 := initialHash(p, password, salt, secret, data)
	f := filler{
		impl:     im,
		mode:     p.mode,
		mem:      m.blocks[:n],
		passes:   p.time,
		lanes:    p.threads,
		laneLen:  uint32(n) / p.threads,
		segLen:   uint32(n) / p.threads / syncPoints,
		totalLen: uint32(n),
		cursors:  make([]cursor, p.threads),
	}
	f.firstBlocks(&h0)
	clear(h0[:])
	f.fill()
	return f.finalize(p.keyLen), nil
}
