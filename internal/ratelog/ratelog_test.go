package ratelog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

type lines struct {
	mu sync.Mutex
	l  []string
}

func (s *lines) logf(format string, args ...any) {
	s.mu.Lock()
	s.l = append(s.l, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *lines) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.l...)
}

// The burst passes, the rest are counted and the count is logged when
// the period ends, with the last suppressed line; then lines pass again.
func TestLimiter(t *testing.T) {
	var out lines
	l := &Limiter{Logf: out.logf, Burst: 3, Period: 200 * time.Millisecond}
	for i := range 10 {
		l.Printf("flush failed #%d", i)
	}
	if got := out.get(); len(got) != 3 || got[2] != "flush failed #2" {
		t.Fatalf("during the burst: %q", got)
	}
	time.Sleep(400 * time.Millisecond)
	got := out.get()
	if len(got) != 4 || !strings.Contains(got[3], "7 more like it suppressed") || !strings.HasSuffix(got[3], "flush failed #9") {
		t.Fatalf("after the period: %q", got)
	}
	l.Printf("flush failed again")
	if got := out.get(); len(got) != 5 || got[4] != "flush failed again" {
		t.Fatalf("in the next period: %q", got)
	}
}

// Flush reports what is suppressed at once.
func TestLimiterFlush(t *testing.T) {
	var out lines
	l := &Limiter{Logf: out.logf, Burst: 1, Period: time.Hour}
	l.Printf("a")
	l.Printf("b")
	l.Printf("c")
	l.Flush()
	if got := out.get(); len(got) != 2 || !strings.HasPrefix(got[1], "2 more like it suppressed") {
		t.Fatalf("%q", got)
	}
	l.Flush()
	if got := out.get(); len(got) != 2 {
		t.Fatalf("a second Flush logged again: %q", got)
	}
}
