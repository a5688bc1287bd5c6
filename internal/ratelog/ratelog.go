// Package ratelog keeps repeated failure lines from flooding a log
// without hiding them: within each period the first lines pass, the rest
// are counted, and when the period ends one line says how many were
// suppressed and repeats the last of them.
package ratelog

import (
	"fmt"
	"sync"
	"time"
)

// Limiter passes at most Burst lines per Period to Logf. The zero Burst
// and Period are 10 lines a minute. A Limiter is safe for concurrent use;
// it must not be copied after first use.
type Limiter struct {
	Logf   func(format string, args ...any) // nil: lines are dropped
	Burst  int
	Period time.Duration

	mu         sync.Mutex
	start      time.Time // when the current period began
	passed     int       // lines passed in it
	suppressed int       // lines counted instead
	last       string    // the last suppressed line
	timer      *time.Timer
}

// Printf logs one line, or counts it when the period's burst is spent.
func (l *Limiter) Printf(format string, args ...any) {
	if l.Logf == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	period := l.period()
	if l.start.IsZero() || now.Sub(l.start) >= period && l.suppressed == 0 {
		l.start, l.passed = now, 0
	}
	burst := l.Burst
	if burst <= 0 {
		burst = 10
	}
	if l.passed < burst && l.suppressed == 0 {
		l.passed++
		l.Logf(format, args...)
		return
	}
	l.suppressed++
	l.last = fmt.Sprintf(format, args...)
	if l.timer == nil {
		l.timer = time.AfterFunc(max(0, l.start.Add(period).Sub(now)), l.summary)
	}
}

// summary ends a period in which lines were suppressed: it says how many,
// and a new period begins.
func (l *Limiter) summary() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.suppressed == 0 {
		return
	}
	l.Logf("%d more like it suppressed in the last %v, the last: %s", l.suppressed, l.period(), l.last)
	l.suppressed, l.last = 0, ""
	l.start, l.passed = time.Now(), 0
}

// Flush logs the count of lines suppressed so far at once (on shutdown).
func (l *Limiter) Flush() {
	l.mu.Lock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.summary()
}

func (l *Limiter) period() time.Duration {
	if l.Period <= 0 {
		return time.Minute
	}
	return l.Period
}
