package daemontest

import (
	"bytes"
	"sync"
)

// LogBuffer is a log sink the daemon's goroutines and the test share:
// daemon.Log.SetOutput(&buf).
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
