//go:build !race

package testtool

// Race reports whether the race detector is on.
const Race = false
