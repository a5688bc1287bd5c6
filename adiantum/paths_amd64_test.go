//go:build amd64 && gc && !purego

package adiantum

type implPath struct {
	name string
	use  func() (restore func())
}

// implPaths lists the paths this CPU runs, each forcing its own choice.
func implPaths() []implPath {
	set := func(avx2, avx512 bool) func() func() {
		return func() func() {
			old2, old512 := useAVX2, useAVX512
			useAVX2, useAVX512 = avx2, avx512
			return func() { useAVX2, useAVX512 = old2, old512 }
		}
	}
	paths := []implPath{{"generic", set(false, false)}}
	if useAVX2 {
		paths = append(paths, implPath{"avx2", set(true, false)})
	}
	if useAVX2 && useAVX512 {
		paths = append(paths, implPath{"avx512", set(true, true)})
	}
	return paths
}
