package luks2

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
