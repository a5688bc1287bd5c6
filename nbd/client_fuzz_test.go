package nbd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// fuzzServer is the server's end of a pipe that discards what the client
// sends and answers with in, then hangs up.
func fuzzServer(in []byte) net.Conn {
	client, server := net.Pipe()
	go io.Copy(io.Discard, server)
	go func() {
		server.Write(in)
		server.Close()
	}()
	client.SetDeadline(time.Now().Add(10 * time.Second))
	return client
}

// FuzzClientHandshake feeds arbitrary server bytes to the client's
// option haggling: an error or a sane export, never a panic.
func FuzzClientHandshake(f *testing.F) {
	greet := binary.BigEndian.AppendUint64(nil, magicInit)
	greet = binary.BigEndian.AppendUint64(greet, magicIHaveOpt)
	greet = binary.BigEndian.AppendUint16(greet, flagFixedNew|flagNoZeroes)
	f.Add(greet)
	f.Fuzz(func(t *testing.T, in []byte) {
		c := fuzzServer(in)
		defer c.Close()
		_, _, info, err := clientHandshake(c, "vol", nil)
		if err == nil && (info.minBlock == 0 || info.maxBlock < info.minBlock) {
			t.Fatalf("accepted block sizes %d..%d", info.minBlock, info.maxBlock)
		}
	})
}

// FuzzClientReplies feeds arbitrary replies to a connection with one read
// in flight: the read completes (with data or an error), never a panic or
// a write outside its buffer.
func FuzzClientReplies(f *testing.F) {
	ok := make([]byte, simpleReplyLen)
	putSimpleHeader(ok, 0, 1)
	f.Add(append(ok, make([]byte, 512)...), false)
	chunk := make([]byte, structuredHeaderLen)
	putStructuredHeader(chunk, replyFlagDone, replyTypeOffsetData, 1, 8+512)
	f.Add(append(binary.BigEndian.AppendUint64(chunk, 0), make([]byte, 512)...), true)
	f.Fuzz(func(t *testing.T, in []byte, structured bool) {
		c := fuzzServer(in)
		cc := newClientConn(c, bufio.NewReader(c), exportInfo{structured: structured}, 10*time.Second, nil)
		buf := make([]byte, 512+16)
		err := cc.roundTrip(cmdRead, 0, 0, 512, nil, buf[:512])
		cc.close()
		for _, b := range buf[512:] {
			if b != 0 {
				t.Fatalf("the read wrote past its buffer (err %v)", err)
			}
		}
	})
}
