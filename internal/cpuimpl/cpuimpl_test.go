package cpuimpl

import (
	"fmt"
	"testing"
)

func TestAvailable(t *testing.T) {
	for _, tc := range []struct {
		avx2, avx512, neon bool
		want               string
	}{
		{false, false, false, "[generic]"},
		{true, false, false, "[generic avx2]"},
		{true, true, false, "[generic avx2 avx512]"},
		{false, true, false, "[generic]"}, // AVX-512 kernels also use AVX2
		{false, false, true, "[generic neon]"},
	} {
		if got := fmt.Sprint(Available(tc.avx2, tc.avx512, tc.neon)); got != tc.want {
			t.Errorf("Available(%v, %v, %v) = %s, want %s", tc.avx2, tc.avx512, tc.neon, got, tc.want)
		}
	}
}
