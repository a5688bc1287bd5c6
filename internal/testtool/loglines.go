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

// Accounted counts the lines kept so far that contain substr, as a
// rate-limited log (internal/ratelog) accounts for them: logged lines one
// each, and summary lines ("N more like it suppressed ...", which repeat
// the last line held back) N each, in suppressed.
func (l *LogLines) Accounted(substr string) (logged, suppressed int) {
	for _, line := range l.Lines() {
		if !strings.Contains(line, substr) {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(line, "%d more like it suppressed", &n); err == nil {
			suppressed += n
		} else {
			logged++
		}
	}
	return logged, suppressed
}
