// Package keyring is where luksd's keys come from — key files, standard
// input, the terminal — and where they are kept: in memory locked against
// swapping and wiped when no longer needed.
package keyring

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Secret holds key material outside the Go heap, in an anonymous mapping
// locked with mlock so it is never written to swap, and zeroed by Wipe.
// A Secret is safe for concurrent reads; Wipe must not race with users.
type Secret struct {
	mu     sync.Mutex
	mem    []byte // the whole mapping, a multiple of the page size
	n      int    // bytes in use
	locked bool
}

// NewSecret returns a zeroed Secret of n bytes. When the memory-lock limit
// (RLIMIT_MEMLOCK) does not allow mlock, the memory stays usable but
// unlocked; Locked reports which.
func NewSecret(n int) (*Secret, error) {
	if n < 0 {
		return nil, fmt.Errorf("keyring: negative secret size %d", n)
	}
	page := os.Getpagesize()
	size := (n + page - 1) / page * page
	if size == 0 {
		size = page
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("keyring: cannot allocate secure memory: %w", err)
	}
	// Keep the pages out of core dumps as well; failure is harmless.
	_ = unix.Madvise(mem, unix.MADV_DONTDUMP)
	s := &Secret{mem: mem, n: n}
	s.locked = unix.Mlock(mem) == nil
	return s, nil
}

// FromBytes copies b into a new Secret and zeroes b.
func FromBytes(b []byte) (*Secret, error) {
	s, err := NewSecret(len(b))
	if err != nil {
		clear(b)
		return nil, err
	}
	copy(s.mem, b)
	clear(b)
	return s, nil
}

// Bytes returns the secret. The slice aliases the locked memory and is
// invalid after Wipe; do not copy it to ordinary memory longer than needed.
func (s *Secret) Bytes() []byte {
	if s == nil || s.mem == nil {
		return nil
	}
	return s.mem[:s.n:s.n]
}

// Len returns the secret's length in bytes.
func (s *Secret) Len() int {
	if s == nil || s.mem == nil {
		return 0
	}
	return s.n
}

// Locked reports whether the memory is locked against swapping.
func (s *Secret) Locked() bool { return s != nil && s.locked }

// Equal reports whether two secrets hold the same bytes, in constant time
// for equal lengths.
func (s *Secret) Equal(o *Secret) bool {
	a, b := s.Bytes(), o.Bytes()
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// Wipe zeroes the secret, unlocks and unmaps its memory. It is safe to call
// more than once and on a nil Secret.
func (s *Secret) Wipe() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem == nil {
		return
	}
	clear(s.mem)
	if s.locked {
		_ = unix.Munlock(s.mem)
	}
	_ = unix.Munmap(s.mem)
	s.mem, s.n, s.locked = nil, 0, false
}

// grow returns a Secret with room for at least n bytes holding s's bytes,
// and wipes s. The new secret's length is n.
func (s *Secret) grow(n int) (*Secret, error) {
	if n <= len(s.mem) {
		s.n = n
		return s, nil
	}
	t, err := NewSecret(n)
	if err != nil {
		return nil, err
	}
	copy(t.mem, s.mem[:s.n])
	s.Wipe()
	return t, nil
}

// truncate sets the length to n (n <= capacity), zeroing what is dropped.
func (s *Secret) truncate(n int) {
	clear(s.mem[n:])
	s.n = n
}
