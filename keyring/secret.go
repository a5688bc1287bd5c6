// Package keyring is where luksd's keys come from — key files, standard
// input, the terminal, the random generator — and where they are kept: in
// memory locked against swapping and wiped when no longer needed.
package keyring

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNoMemory: no memory for a Secret (cryptsetup's exit 3).
var ErrNoMemory = errors.New("keyring: cannot allocate secure memory")

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
		return nil, fmt.Errorf("%w: %w", ErrNoMemory, err)
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

// LockReachable locks in memory the pages of every object reachable from v
// through pointers, interfaces and slices: for a cipher, its expanded key
// schedule, wherever its packages keep it (crypto/aes's round keys sit
// behind an interface). Go's collector does not move heap objects, so the
// pages stay those objects' for as long as they live. mlock is not counted:
// the pages stay locked until the process exits. It returns how many bytes
// of objects it found; it fails when the memory-lock limit is too low.
func LockReachable(v any) (int, error) {
	w := reachWalker{seen: map[uintptr]bool{}}
	w.walk(reflect.ValueOf(v))
	page := uintptr(os.Getpagesize())
	total := 0
	for _, r := range w.spans {
		total += int(r[1] - r[0])
		start := r[0] &^ (page - 1)
		end := (r[1] + page - 1) &^ (page - 1)
		// By address: the page around an object is no Go object itself.
		if _, _, e := unix.Syscall(unix.SYS_MLOCK, start, end-start, 0); e != 0 {
			return total, fmt.Errorf("keyring: cannot lock the key schedule in memory: %w", e)
		}
	}
	runtime.KeepAlive(v) // the walk keeps bare addresses
	return total, nil
}

// maxReachable bounds the walk: a cipher holds a few KiB.
const maxReachable = 1 << 20

type reachWalker struct {
	seen  map[uintptr]bool
	spans [][2]uintptr
	bytes uintptr
}

// walk records the memory behind v's pointers and slices and follows them.
func (w *reachWalker) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem())
		}
	case reflect.Pointer:
		if !v.IsNil() && w.record(v.Pointer(), v.Type().Elem().Size()) {
			w.walk(v.Elem())
		}
	case reflect.Slice:
		if !v.IsNil() && w.record(v.Pointer(), uintptr(v.Cap())*v.Type().Elem().Size()) {
			for i := range v.Len() {
				w.walk(v.Index(i))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			w.walk(v.Field(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			w.walk(v.Index(i))
		}
	}
}

// record notes [p, p+size) and reports whether it is new.
func (w *reachWalker) record(p, size uintptr) bool {
	if p == 0 || w.seen[p] || w.bytes+size > maxReachable {
		return false
	}
	w.seen[p] = true
	w.bytes += size
	if size > 0 {
		w.spans = append(w.spans, [2]uintptr{p, p + size})
	}
	return true
}
