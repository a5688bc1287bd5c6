//go:build !(amd64 || arm64 || arm) || !gc || purego

package adiantum

// The portable paths serve every platform without assembly here.

func chachaXOR(s *[16]uint32, dst, src []byte, rounds int) {
	chachaXORGeneric(s, dst, src, rounds)
}

func nhSum(k *nhKey, m []byte, h *[4]uint64) {
	nhSumGeneric(k, m, h)
}
