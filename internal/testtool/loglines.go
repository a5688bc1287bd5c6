package testtool

import (
	"fmt"
	"strings"
	"sync"
)

// LogLines collects the lines of a Logf-style callback (Logf), safe for
// concurrent use.
type LogLines struct {
	mu    sync.Mutex
	saved []string
}

// Logf formats one line and keeps it.
func (l *LogLines) Logf(format string, args ...any) {
	l.mu.Lock()
	l.saved = append(l.saved, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// Lines returns the lines kept so far.
func (l *LogLines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.saved...)
}

// String is every line kept so far, one per line.
func (l *LogLines) String() string { return strings.Join(l.Lines(), "\n") }
