//go:build !amd64 || !gc || purego

package sha256mb

// available lists crypto/sha256 alone: there are no kernels here.
func available() []impl { return []impl{generic} }

func blocks2(h *[16]uint32, p, q *byte, n int) { panic("sha256mb: no kernel") }

func blocks16(h *[8][16]uint32, p *byte, stride, n int) { panic("sha256mb: no kernel") }
