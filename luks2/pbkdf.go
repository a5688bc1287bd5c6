package luks2

import (
	"crypto/pbkdf2"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/luksd/luksd/argon2"
)

// cryptsetup 2.6's PBKDF defaults and limits.
const (
	defaultIterTime     = 2000 * time.Millisecond
	defaultArgonMemory  = 1 << 20 // KiB (1 GiB)
	minArgonTime        = 4
	minArgonMemory      = 32 // KiB
	minPBKDF2Iterations = 1000
	digestIterTime      = 125 * time.Millisecond
	maxArgonMemory      = 4 << 20 // KiB
	maxArgonThreads     = 4
)

// ErrPBKDF: PBKDF parameters out of the range cryptsetup takes, refused
// before anything is written. CLI exit 1.
var ErrPBKDF = errors.New("invalid PBKDF parameters")

// PBKDFLimit names the limit a PBKDFLimitError breaks.
type PBKDFLimit int

const (
	// LimitIterations: forced PBKDF2 iterations or argon2 time cost
	// below the minimum.
	LimitIterations PBKDFLimit = iota
	// LimitMemory: a forced argon2 memory cost below the minimum.
	LimitMemory
	// LimitMaxMemory: an argon2 memory cost above the maximum.
	LimitMaxMemory
)

// PBKDFLimitError: PBKDF parameters beyond one of cryptsetup's limits; it
// is ErrPBKDF too. Its text is cryptsetup's message without the capital
// and the full stop.
type PBKDFLimitError struct {
	Type  string     // "pbkdf2", "argon2i" or "argon2id"
	Limit PBKDFLimit // which limit
	Value int        // the limit: iterations, or KiB of memory
}

func (e *PBKDFLimitError) Error() string {
	switch e.Limit {
	case LimitMemory:
		return fmt.Sprintf("forced memory cost is too low for %s (minimum is %d kilobytes)", e.Type, e.Value)
	case LimitMaxMemory:
		return fmt.Sprintf("requested maximum PBKDF memory cost is too high (maximum is %d kilobytes)", e.Value)
	}
	return fmt.Sprintf("forced iteration count is too low for %s (minimum is %d)", e.Type, e.Value)
}

func (e *PBKDFLimitError) Unwrap() error { return ErrPBKDF }

// CheckPBKDF refuses PBKDF parameters a new keyslot of a header of LUKS
// version cannot take, as cryptsetup 2.6.1 does before it asks for a
// passphrase: ErrLUKS1PBKDF for argon2 on LUKS1, a *PBKDFLimitError for
// forced iterations (time cost) or memory below the minimum, or memory
// above the maximum. Argon2's memory and threads do not matter for PBKDF2.
func CheckPBKDF(p PBKDF, version int) error {
	typ := p.Type
	if version == 1 {
		if typ != "" && typ != "pbkdf2" {
			return ErrLUKS1PBKDF
		}
		typ = "pbkdf2"
	}
	low := minArgonTime
	switch typ {
	case "":
		typ = "argon2id"
	case "pbkdf2":
		low = minPBKDF2Iterations
	case "argon2i", "argon2id":
	default:
		return fmt.Errorf("%w: PBKDF %q", ErrUnsupported, typ)
	}
	if p.Iterations > 0 && p.Iterations < low {
		return &PBKDFLimitError{Type: typ, Limit: LimitIterations, Value: low}
	}
	if typ == "pbkdf2" {
		return nil
	}
	if p.Iterations > 0 && p.MemoryKiB > 0 && p.MemoryKiB < minArgonMemory {
		return &PBKDFLimitError{Type: typ, Limit: LimitMemory, Value: minArgonMemory}
	}
	if p.MemoryKiB > maxArgonMemory {
		return &PBKDFLimitError{Type: typ, Limit: LimitMaxMemory, Value: maxArgonMemory}
	}
	return nil
}

// ErrOutOfMemory: a keyslot's argon2 memory could not be had. CLI exit 3,
// cryptsetup's "Not enough available memory to open a keyslot."
var ErrOutOfMemory = errors.New("not enough available memory to open a keyslot")

// deriveKey runs the keyslot's KDF over passphrase. Parameters the KDF
// refuses (cryptsetup's crypt_pbkdf fails on them too) are ErrKeyslotOpen;
// argon2 lanes beyond the 255 the argon2 package takes are ErrUnsupported, never
// truncated.
func deriveKey(p kdfParams, passphrase []byte, keyLen int) ([]byte, error) {
	switch p.typ {
	case "pbkdf2":
		h, err := hashFunc(p.hash)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeyslotOpen, err)
		}
		if p.iterations < 1 || keyLen < 1 {
			return nil, fmt.Errorf("%w: pbkdf2 with %d iterations", ErrKeyslotOpen, p.iterations)
		}
		return pbkdf2.Key(h, string(passphrase), p.salt, p.iterations, keyLen)
	case "argon2i", "argon2id":
		if p.cpus > 255 {
			return nil, fmt.Errorf("%w: %s with %d threads", ErrUnsupported, p.typ, p.cpus)
		}
		if p.time < 1 || p.cpus < 1 || p.memory < 8*p.cpus || keyLen < 4 {
			return nil, fmt.Errorf("%w: invalid %s parameters (time %d, memory %d, threads %d)", ErrKeyslotOpen, p.typ, p.time, p.memory, p.cpus)
		}
		mode := argon2.Argon2id
		if p.typ == "argon2i" {
			mode = argon2.Argon2i
		}
		k, err := argon2.Key(mode, passphrase, p.salt, uint32(p.time), uint32(p.memory), uint8(p.cpus), uint32(keyLen))
		if errors.Is(err, argon2.ErrMemory) {
			return nil, fmt.Errorf("%w: %v", ErrOutOfMemory, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeyslotOpen, err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("%w: unknown PBKDF %q", ErrKeyslotOpen, p.typ)
}

// measureKDF times one derivation with p by CPU time: PBKDF2's thread's,
// as cryptsetup times it, and argon2's per lane (argon2CPUTime), where
// cryptsetup takes the wall clock. Tests replace it with a model.
var measureKDF = func(p kdfParams, keyLen int) time.Duration {
	var k []byte
	derive := func() { k, _ = deriveKey(p, []byte("benchmark passphrase"), keyLen) }
	var d time.Duration
	if p.typ == "pbkdf2" {
		d = pbkdf2CPUTime(derive)
	} else {
		d = argon2CPUTime(derive, p.cpus)
	}
	clear(k)
	return d
}

// totalMemoryKiB returns the machine's RAM in KiB, or 0 when unknown.
func totalMemoryKiB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// withDefaults fills p's zero fields as cryptsetup 2.6 does.
func (p PBKDF) withDefaults() PBKDF {
	if p.Type == "" {
		p.Type = "argon2id"
	}
	if p.Hash == "" {
		p.Hash = "sha256"
	}
	if p.IterTime <= 0 {
		p.IterTime = defaultIterTime
	}
	if p.Type != "pbkdf2" {
		if p.MemoryKiB <= 0 {
			p.MemoryKiB = defaultArgonMemory
			if ram := totalMemoryKiB(); ram > 0 && ram/2 < p.MemoryKiB {
				p.MemoryKiB = ram / 2
			}
		}
		if p.Parallel <= 0 {
			p.Parallel = min(maxArgonThreads, runtime.NumCPU())
		}
	}
	return p
}

// forKeyslot limits p as cryptsetup's init_pbkdf_type does before it
// makes a keyslot: argon2 at most 4 threads and one per CPU online, and at
// most half the RAM (benchmark measures without these limits).
func (p PBKDF) forKeyslot() PBKDF {
	p = p.withDefaults()
	if p.Type == "pbkdf2" {
		return p
	}
	p.Parallel = max(1, min(p.Parallel, maxArgonThreads, runtime.NumCPU()))
	if ram := totalMemoryKiB(); ram >= 128<<10 && p.MemoryKiB > ram/2 && p.MemoryKiB <= maxArgonMemory {
		p.MemoryKiB = max(minArgonMemory, ram/2)
	}
	return p
}

// params returns the KDF parameters for a new keyslot, calibrating unless
// iterations are forced.
func (p PBKDF) params(salt []byte, keyLen int) (kdfParams, error) {
	p = p.withDefaults()
	kp := kdfParams{typ: p.Type, salt: salt}
	switch p.Type {
	case "pbkdf2":
		h, err := hashFunc(p.Hash)
		if err != nil {
			return kp, err
		}
		_ = h
		kp.hash = strings.ToLower(p.Hash)
		if int64(p.Iterations) > math.MaxUint32 {
			return kp, fmt.Errorf("%w: %d pbkdf2 iterations (at most %d)", ErrPBKDF, p.Iterations, uint32(math.MaxUint32))
		}
		kp.iterations = p.Iterations
		if kp.iterations <= 0 {
			kp.iterations = calibratePBKDF2(kp.hash, keyLen, p.IterTime)
		}
	case "argon2i", "argon2id":
		if p.MemoryKiB < minArgonMemory || p.MemoryKiB > maxArgonMemory || int64(p.Iterations) > math.MaxUint32 {
			return kp, fmt.Errorf("%w: %s with memory %d KiB, time cost %d", ErrPBKDF, p.Type, p.MemoryKiB, p.Iterations)
		}
		kp.memory, kp.cpus, kp.time = p.MemoryKiB, p.Parallel, p.Iterations
		if kp.time <= 0 {
			kp.time, kp.memory = calibrateArgon2(p.Type, p.MemoryKiB, p.Parallel, keyLen, p.IterTime)
		}
	default:
		return kp, fmt.Errorf("%w: PBKDF %q", ErrUnsupported, p.Type)
	}
	return kp, nil
}

// calibratePBKDF2 finds the iteration count that takes target, the way
// cryptsetup's benchmark does: from 2^15 iterations, grow the count (by 16,
// 8, 4 or 2 times as the run was shorter) until one run takes over half a
// second, then scale that run to target.
func calibratePBKDF2(hashName string, keyLen int, target time.Duration) int {
	p := kdfParams{typ: "pbkdf2", hash: hashName, salt: make([]byte, 32)}
	iter := 1 << 15
	for {
		p.iterations = iter
		d := measureKDF(p, keyLen)
		if d > 500*time.Millisecond || iter >= 1<<30 {
			return max(minPBKDF2Iterations, scale(iter, target, d))
		}
		switch {
		case d <= 62*time.Millisecond:
			iter <<= 4
		case d <= 125*time.Millisecond:
			iter <<= 3
		case d <= 250*time.Millisecond:
			iter <<= 2
		default:
			iter <<= 1
		}
	}
}

// scale returns n*target/took, saturating.
func scale(n int, target, took time.Duration) int {
	if took <= 0 {
		return 1 << 30
	}
	v := float64(n) * float64(target) / float64(took)
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	return int(v)
}

// digestIterations is what cryptsetup writes in a new digest: 1000 when the
// keyslot PBKDF is forced, else calibrated to 125 ms of pbkdf2-sha256.
func digestIterations(p PBKDF, hashName string, keyLen int) int {
	if p.Iterations > 0 {
		return minPBKDF2Iterations
	}
	return calibratePBKDF2(hashName, keyLen, digestIterTime)
}
