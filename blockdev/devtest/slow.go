package devtest

import (
	"sync"
	"time"

	"github.com/luksd/luksd/blockdev"
)

// Slow answers every read a delay after reading it from the device below
// (as dm-delay does), and counts how many reads were in progress at once.
// Holding the data just read also widens read-modify-write windows for
// race tests.
type Slow struct {
	blockdev.Device
	delay   time.Duration
	mu      sync.Mutex
	now     int
	maxSeen int
}

// NewSlow wraps dev, delaying each read by delay.
func NewSlow(dev blockdev.Device, delay time.Duration) *Slow {
	return &Slow{Device: dev, delay: delay}
}

// ReadAt reads below, then waits the delay before returning.
func (s *Slow) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	s.now++
	s.maxSeen = max(s.maxSeen, s.now)
	s.mu.Unlock()
	n, err := s.Device.ReadAt(p, off)
	time.Sleep(s.delay)
	s.mu.Lock()
	s.now--
	s.mu.Unlock()
	return n, err
}

// MaxInFlight returns the most reads in progress at once since the last
// call, and starts counting again.
func (s *Slow) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.maxSeen
	s.maxSeen = s.now
	return m
}
