package adiantum

import "testing"

// forEachPath runs f once per implementation path this CPU can run, forcing
// each one in turn, generic included.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	for _, p := range implPaths() {
		t.Run(p.name, func(t *testing.T) {
			defer p.use()()
			f(t)
		})
	}
}
