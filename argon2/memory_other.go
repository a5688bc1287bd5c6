//go:build !linux

package argon2

// allocBlocks allocates n zeroed blocks on the Go heap.
func allocBlocks(n int) ([]block, error) { return make([]block, n), nil }

// freeBlocks wipes blocks, which hold what the password derives, and
// leaves them to the garbage collector.
func freeBlocks(blocks []block) { clear(blocks) }
