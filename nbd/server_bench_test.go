package nbd

import (
	"encoding/binary"
	"io"
	"testing"
	"time"
)

// BenchmarkRead4KDepth32 measures 4 KiB reads through the crypt layer over
// a unix socket with 32 requests in flight, as fio's randread does.
func BenchmarkRead4KDepth32(b *testing.B) { benchmarkRequests(b, cmdRead, 4096) }

// BenchmarkRead1MDepth32 is the same with 1 MiB reads.
func BenchmarkRead1MDepth32(b *testing.B) { benchmarkRequests(b, cmdRead, 1<<20) }

// BenchmarkWrite4KDepth32 is BenchmarkRead4KDepth32 with writes, as fio's
// randwrite. (On a disk-backed TMPDIR it measures O_DIRECT writes; with
// TMPDIR=/dev/shm, the server path.)
func BenchmarkWrite4KDepth32(b *testing.B) { benchmarkRequests(b, cmdWrite, 4096) }

func benchmarkRequests(b *testing.B, typ uint16, size uint32) {
	e := startExport(b, 64<<20, 4096, Config{}, false)
	c := dialGo(b, e.sock, "")
	c.c.SetDeadline(time.Time{})
	const depth = 32
	inFlight := make(chan struct{}, depth)
	blocks := uint64(64<<20) / uint64(size)
	var payload []byte
	if typ == cmdWrite {
		payload = make([]byte, size)
	}
	go func() {
		for i := range b.N {
			inFlight <- struct{}{}
			off := (uint64(i) * 7919 % blocks) * uint64(size)
			if _, err := c.c.Write(append(requestBytes(typ, 0, uint64(i), off, size), payload...)); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	var h [simpleReplyLen]byte
	for range b.N {
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			b.Fatal(err)
		}
		if binary.BigEndian.Uint32(h[4:]) != 0 {
			b.Fatal("request failed")
		}
		if typ == cmdRead {
			if _, err := io.ReadFull(c.r, buf); err != nil {
				b.Fatal(err)
			}
		}
		<-inFlight
	}
}
