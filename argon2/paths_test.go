package argon2

import "testing"

// forEachImpl runs f once per implementation this machine runs, generic
// included, in parallel.
func forEachImpl(t *testing.T, f func(t *testing.T, im impl)) {
	for _, im := range impls() {
		t.Run(im.String(), func(t *testing.T) {
			t.Parallel()
			f(t, im)
		})
	}
}

// deriveWith runs one derivation with im in fresh memory.
func deriveWith(im impl, p params, password, salt, secret, data []byte) ([]byte, error) {
	var m Memory
	defer m.Free()
	return m.derive(im, p, password, salt, secret, data)
}
