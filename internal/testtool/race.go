//go:build race

package testtool

// Race reports whether the race detector is on. Under it sync.Pool drops
// items at random, so allocation counts are meaningless; `make unit` runs
// the allocation tests again without it.
const Race = true
