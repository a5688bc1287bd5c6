package ublk

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/internal/testtool"
)

// slowDevice answers every read after a delay (as dm-delay does) and
// records how many reads were in progress at once.
type slowDevice struct {
	blockdev.Device
	delay time.Duration

	mu          sync.Mutex
	now, maxNow int
}

func (d *slowDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	d.now++
	d.maxNow = max(d.maxNow, d.now)
	d.mu.Unlock()
	time.Sleep(d.delay)
	d.mu.Lock()
	d.now--
	d.mu.Unlock()
	return d.Device.ReadAt(p, off)
}

func (d *slowDevice) resetMax() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.maxNow
	d.maxNow = 0
	return m
}

// TestKernelStalledQueueServesOnWorkers: once a small request has held a
// queue's thread on a slow device, the queue's small requests are served
// on workers, side by side, instead of one after the other on the thread.
func TestKernelStalledQueueServesOnWorkers(t *testing.T) {
	needKernel(t)
	dev := &slowDevice{Device: newKernelDev(8 << 20), delay: time.Second}
	d, err := New(dev, Options{ID: -1, Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	fd, err := unix.Open(d.Path(), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	read := func(off int64) {
		if _, err := unix.Pread(fd, testtool.AlignedBuffer(4096), off); err != nil {
			t.Errorf("pread at %d: %v", off, err)
		}
	}
	read(0) // on the queue thread, for a second: the watchdog notices
	dev.resetMax()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); read(int64(i+1) << 20) }()
	}
	wg.Wait()
	if m := dev.resetMax(); m < 2 {
		t.Fatalf("after a stall, at most %d small read in progress at once: still served one by one on the queue thread", m)
	}
}
