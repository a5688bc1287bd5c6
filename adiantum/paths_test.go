package adiantum

import "testing"

// forEachImpl runs f once per implementation this machine runs, generic
// included, each with its own Cipher values, in parallel.
func forEachImpl(t *testing.T, f func(t *testing.T, im impl)) {
	for _, im := range impls() {
		t.Run(im.String(), func(t *testing.T) {
			t.Parallel()
			f(t, im)
		})
	}
}
