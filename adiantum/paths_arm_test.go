//go:build arm && gc && !purego

package adiantum

type implPath struct {
	name string
	use  func() (restore func())
}

func implPaths() []implPath {
	set := func(neon bool) func() func() {
		return func() func() {
			old := useNEON
			useNEON = neon
			return func() { useNEON = old }
		}
	}
	paths := []implPath{{"generic", set(false)}}
	if useNEON {
		paths = append(paths, implPath{"neon", set(true)})
	}
	return paths
}
