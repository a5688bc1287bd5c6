package luks2

import (
	"math"
	"time"
)

// Calibrate returns p with its defaults filled in and its cost set as a new
// keyslot for a keyLen-byte key would get it: Iterations (pbkdf2 iterations
// or argon2 time cost) and, for argon2, MemoryKiB after any reduction. With
// an IterTime of one second, pbkdf2's Iterations is iterations per second,
// which is what `benchmark` prints.
func Calibrate(p PBKDF, keyLen int) (PBKDF, error) {
	p = p.withDefaults()
	p.Iterations = 0
	kp, err := p.params(make([]byte, 32), keyLen)
	if err != nil {
		return p, err
	}
	if kp.typ == "pbkdf2" {
		p.Iterations = kp.iterations
	} else {
		p.Iterations, p.MemoryKiB, p.Parallel = kp.time, kp.memory, kp.cpus
	}
	return p, nil
}

// Argon2 calibration, after cryptsetup's crypt_argon2_check: memory is the
// cost raised first, the time cost only once memory is at its maximum.
const (
	// argon2MinSample is the shortest run an estimate is made from.
	argon2MinSample = 250 * time.Millisecond
	// argon2Growth is the exponent estimates assume for the time of a
	// derivation in its memory: over 1, as time per KiB grows with the
	// memory (TLB and cache misses), so that an estimate from a smaller
	// run lands below the target and the next run closes in. Measured
	// with two lanes on the development machine: 151 ns per KiB per pass
	// at 4 MiB, 219 at 16 MiB, 307 at 256 MiB, an exponent of 1.17.
	argon2Growth = 1.2
	// argon2MaxStep bounds the growth of memory from one run to the
	// next: a sample a little faster than usual (noise, or a smaller run
	// still in cache) would otherwise send the next run far past the
	// target. From a 12 ms sample at 16 MiB, a 9x step took 181 ms for a
	// 150 ms target, and the keyslot got 1/1.21 of the memory measured.
	argon2MaxStep = 4
	// argon2MaxRounds bounds the measurements after the first sample.
	argon2MaxRounds = 8
)

// calibrateArgon2 returns the time cost and memory (at most memKiB) of a
// derivation that takes about target, as cryptsetup accepts it: between
// 95% and 110% of the target. It starts small and grows towards the
// result, so that it never measures with much more memory than it
// returns: luksFormat's peak memory is the keyslot's, not a benchmark's
// (measuring the full memory first, as luksd did, held 1 GiB to make a
// 300 MiB keyslot). When even the smallest memory is too slow, it returns
// the minimums.
func calibrateArgon2(typ string, memKiB, threads, keyLen int, target time.Duration) (timeCost, memory int) {
	low := max(minArgonMemory, 8*threads)
	p := kdfParams{typ: typ, time: minArgonTime, memory: min(memKiB, max(low, 1<<10)), cpus: threads, salt: make([]byte, 32)}
	sample := min(argon2MinSample, target/2)
	// 1. A first run long enough to estimate from: grow memory (then the
	// time cost) at most argon2MaxStep-fold a run, towards a run of about
	// 1.5x sample. A jump from a short run straight to the target
	// overshoots, as time per KiB grows with the memory: that held
	// 200 MiB to make a 116 MiB keyslot.
	d := measureArgon2(p, keyLen, 2)
	for d < sample && (p.memory < memKiB || p.time < math.MaxInt32/argon2MaxStep) {
		grow := min(argon2MaxStep, math.Pow(1.5*float64(sample)/float64(max(d, time.Microsecond)), 1/argon2Growth))
		if p.memory < memKiB {
			p.memory = min(memKiB, max(p.memory+1, int(float64(p.memory)*grow)))
		} else {
			p.time = max(p.time+1, int(float64(p.time)*grow))
		}
		d = measureArgon2(p, keyLen, 2)
	}
	// 2. Estimate the costs for the target from the last run and measure
	// them, until a run lands inside cryptsetup's window.
	for range argon2MaxRounds {
		if d >= target*95/100 && d <= target*110/100 {
			break
		}
		next, ok := nextArgon2Costs(p, low, memKiB, target, d)
		if !ok {
			break
		}
		p = next
		d = measureArgon2(p, keyLen, 1)
		if d > target*110/100 {
			// One slow sample is more often the machine than the
			// costs: take the better of two before scaling back.
			d = min(d, measureArgon2(p, keyLen, 1))
		}
	}
	if d > target*110/100 && (p.time > minArgonTime || p.memory > low) {
		// Still too slow after the last round: scale down without
		// another measurement rather than keep costs over the target.
		p, _ = nextArgon2Costs(p, low, memKiB, target, d)
	}
	return p.time, p.memory
}

// nextArgon2Costs scales p, which took d, to take target: the memory
// while it is below its maximum or when the time cost is at its minimum,
// otherwise the time cost. ok is false when the costs cannot change.
func nextArgon2Costs(p kdfParams, low, high int, target, d time.Duration) (kdfParams, bool) {
	f := float64(target) / float64(max(d, time.Microsecond))
	if f < 1 && p.time > minArgonTime {
		t := int(float64(p.time) * f)
		if t >= minArgonTime {
			p.time = t
			return p, true
		}
		// Below the minimum time cost: move the rest onto memory.
		f = float64(p.time) * f / minArgonTime
		p.time = minArgonTime
	}
	if f > 1 {
		f = min(argon2MaxStep, math.Pow(f, 1/argon2Growth))
	}
	old := p
	if p.memory < high || f < 1 {
		p.memory = min(high, max(low, int(float64(p.memory)*f)))
		if p.memory == high && f > 1 {
			// Memory capped: the rest of the growth goes to time.
			rest := f * float64(old.memory) / float64(high)
			p.time = max(p.time, int(float64(p.time)*rest))
		}
	} else {
		p.time = max(minArgonTime, int(float64(p.time)*f))
	}
	return p, p.time != old.time || p.memory != old.memory
}

// measureArgon2 is the shortest of n runs of p, as cryptsetup takes the
// best of its samples: another process's burst only makes runs slower.
func measureArgon2(p kdfParams, keyLen, n int) time.Duration {
	best := measureKDF(p, keyLen)
	for range n - 1 {
		best = min(best, measureKDF(p, keyLen))
	}
	return best
}
