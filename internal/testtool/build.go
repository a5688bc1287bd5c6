package testtool

import "sync"

var (
	luksdOnce sync.Once
	luksdPath string
	luksdErr  error
)

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
