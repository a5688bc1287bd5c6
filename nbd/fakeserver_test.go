package nbd

import (
	"sync"

	"github.com/luksd/luksd/internal/testtool"
)

// The replies the client tests' fake servers (testtool.FakeNBD) send,
// built with the package's own wire format.

// simpleExport is a 1 MiB export that offers flush and simple replies only.
var simpleExport = testtool.NBDExport{Flags: FlagSendFlush}

// simpleBytes is a simple reply: error code, cookie, then data.
func simpleBytes(code uint32, cookie uint64, data ...byte) []byte {
	b := make([]byte, simpleReplyLen)
	putSimpleHeader(b, code, cookie)
	return append(b, data...)
}

// chunkBytes is one structured reply chunk.
func chunkBytes(flags, typ uint16, cookie uint64, payload []byte) []byte {
	b := make([]byte, structuredHeaderLen)
	putStructuredHeader(b, flags, typ, cookie, uint32(len(payload)))
	return append(b, payload...)
}

// diskAnswer answers reads and writes on disk with simple replies, under
// mu; a request outside disk hangs up.
func diskAnswer(disk []byte, mu *sync.Mutex) func(testtool.NBDRequest) []byte {
	return func(req testtool.NBDRequest) []byte {
		if req.Offset+uint64(req.Length) > uint64(len(disk)) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		span := disk[req.Offset:][:req.Length]
		switch req.Type {
		case cmdRead:
			return simpleBytes(0, req.Cookie, span...)
		case cmdWrite:
			copy(span, req.Data)
		}
		return simpleBytes(0, req.Cookie)
	}
}
