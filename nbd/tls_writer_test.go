package nbd

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

// recordingConn records what the server writes to the socket, write by
// write.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(b))
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// since returns the writes after the first n, and the TLS records in them
// (application data records' plaintext lengths, AEAD overhead taken off).
func (c *recordingConn) since(t *testing.T, n int) (writes int, records []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stream := bytes.Join(c.writes[n:], nil)
	for len(stream) > 0 {
		if len(stream) < 5 {
			t.Fatalf("a partial TLS record header: % x", stream)
		}
		l := int(binary.BigEndian.Uint16(stream[3:]))
		if stream[0] == 23 { // application data: content type byte and 16-byte tag
			records = append(records, l-17)
		}
		stream = stream[5+l:]
	}
	return len(c.writes) - n, records
}

// TestTLSReplyRecords: a 1 MiB read reply through TLS leaves in full
// 16 KiB records, its header sharing the first with the payload, and in
// a few large socket writes rather than one per record.
func TestTLSReplyRecords(t *testing.T) {
	ca := testtool.NewCA(t, "records CA")
	tc, err := LoadTLSDir(ca.ServerDir(t), false)
	if err != nil {
		t.Fatal(err)
	}
	dev := devtest.NewMem(4 << 20)
	data := make([]byte, 1<<20)
	rand.Read(data)
	dev.WriteAt(data, 0)
	srv := NewServer(dev, Config{TLS: tc, TLSMode: TLSRequire})
	server, client := net.Pipe()
	rec := &recordingConn{Conn: server}
	go srv.ServeConn(rec)
	t.Cleanup(func() { client.Close(); srv.Close() })

	rc := &rawClient{c: client, r: bufio.NewReader(client)}
	client.SetDeadline(time.Now().Add(20 * time.Second))
	rc.greet(t, flagCFixedNew|flagCNoZeroes)
	if err := rc.startTLS(t, clientTLS(t, ca.TrustOnlyDir(t))); err != nil {
		t.Fatal(err)
	}
	if types, _ := rc.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("go: %#x", types)
	}
	rec.mu.Lock()
	before := len(rec.writes)
	rec.mu.Unlock()
	if b, code := rc.read(t, 0, 1<<20); code != 0 || !bytes.Equal(b, data) {
		t.Fatalf("read through TLS: code %d, data equal %v", code, bytes.Equal(b, data))
	}
	writes, records := rec.since(t, before)
	// 16-byte header + 1 MiB = 64 full records and one of 16 bytes.
	if len(records) != 65 || records[0] != tlsRecordPayload || records[64] != 16 {
		t.Errorf("%d records, first %d bytes, last %d; want 65, %d and 16", len(records), records[0], records[len(records)-1], tlsRecordPayload)
	}
	if writes > 8 {
		t.Errorf("the reply took %d socket writes, want a few large ones", writes)
	}
	t.Logf("%d records in %d writes", len(records), writes)
}
