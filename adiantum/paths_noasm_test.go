//go:build !(amd64 || arm64 || arm) || !gc || purego

package adiantum

type implPath struct {
	name string
	use  func() (restore func())
}

func implPaths() []implPath {
	return []implPath{{"generic", func() func() { return func() {} }}}
}
