package nbd

import (
	"encoding/binary"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/devtest"
	"github.com/luksd/luksd/internal/testtool"
)

func metaData(export string, queries ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(export)))
	b = append(b, export...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(queries)))
	for _, q := range queries {
		b = binary.BigEndian.AppendUint32(b, uint32(len(q)))
		b = append(b, q...)
	}
	return b
}

// metaOption sends a meta-context option and returns the contexts replied
// (id and name) and the final reply type.
func (rc *rawClient) metaOption(t *testing.T, opt uint32, data []byte) (ids []uint32, names []string, final uint32) {
	t.Helper()
	rc.send(t, optionBytes(opt, data))
	for {
		typ, p := rc.optionReply(t, opt)
		if typ != repMetaContext {
			return ids, names, typ
		}
		if len(p) < 4 {
			t.Fatalf("META_CONTEXT reply of %d bytes", len(p))
		}
		ids = append(ids, binary.BigEndian.Uint32(p))
		names = append(names, string(p[4:]))
	}
}

func TestMetaContextNegotiation(t *testing.T) {
	sock, _ := serveMem(t, devtest.NewMem(1<<20), Config{Name: "vol"})
	c := dialRaw(t, sock)
	c.greet(t, flagCFixedNew|flagCNoZeroes)

	expect := func(what string, opt uint32, data []byte, wantNames []string, wantID uint32, wantFinal uint32) {
		t.Helper()
		ids, names, final := c.metaOption(t, opt, data)
		if final != wantFinal || strings.Join(names, ",") != strings.Join(wantNames, ",") {
			t.Errorf("%s: contexts %q, final reply %#x; want %q, %#x", what, names, final, wantNames, wantFinal)
		}
		for _, id := range ids {
			if id != wantID {
				t.Errorf("%s: context id %d, want %d", what, id, wantID)
			}
		}
	}
	all := []string{baseAllocation}
	expect("SET before structured replies", optSetMetaContext, metaData("", baseAllocation), nil, 0, repErrInvalid)
	if types, _ := c.option(t, optStructuredReply, nil); types[0] != repAck {
		t.Fatalf("structured replies refused: %#x", types)
	}
	expect("LIST without queries", optListMetaContext, metaData(""), all, 0, repAck)
	expect("LIST base:", optListMetaContext, metaData("vol", "base:"), all, 0, repAck)
	expect("LIST an unknown namespace", optListMetaContext, metaData("", "x-luksd:dirty"), nil, 0, repAck)
	expect("LIST an unknown base leaf", optListMetaContext, metaData("", "base:nothing"), nil, 0, repAck)
	expect("LIST a query without namespace", optListMetaContext, metaData("", "allocation"), nil, 0, repErrInvalid)
	expect("LIST an unknown export", optListMetaContext, metaData("other"), nil, 0, repErrUnknown)
	expect("LIST with a count over the data", optListMetaContext, []byte{0, 0, 0, 0, 0, 0, 0, 9}, nil, 0, repErrInvalid)
	expect("SET base: selects nothing", optSetMetaContext, metaData("", "base:"), nil, 0, repAck)
	expect("SET base:allocation", optSetMetaContext, metaData("", "x-a:b", baseAllocation), all, allocationID, repAck)
	if types, _ := c.option(t, optGo, goData("")); types[len(types)-1] != repAck {
		t.Fatalf("GO refused: %#x", types)
	}

	c.send(t, requestBytes(cmdBlockStatus, 0, 5, 4096, 8192))
	var b [structuredHeaderLen + blockStatusLen]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(b[0:]) != magicStructuredReply || binary.BigEndian.Uint16(b[4:]) != replyFlagDone ||
		binary.BigEndian.Uint16(b[6:]) != replyTypeBlockStatus || binary.BigEndian.Uint64(b[8:]) != 5 ||
		binary.BigEndian.Uint32(b[16:]) != blockStatusLen || binary.BigEndian.Uint32(b[20:]) != allocationID ||
		binary.BigEndian.Uint32(b[24:]) != 8192 || binary.BigEndian.Uint32(b[28:]) != 0 {
		t.Fatalf("bad BLOCK_STATUS chunk % x", b)
	}
	for i, r := range []struct{ off, n uint64 }{{1 << 20, 512}, {1<<20 - 512, 1024}, {0, 0}} {
		cookie := uint64(10 + i)
		c.send(t, requestBytes(cmdBlockStatus, 0, cookie, r.off, uint32(r.n)))
		var e [structuredHeaderLen + structuredErrorLength]byte
		if _, err := io.ReadFull(c.r, e[:]); err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint16(e[6:]) != replyTypeError || binary.BigEndian.Uint64(e[8:]) != cookie ||
			binary.BigEndian.Uint32(e[20:]) != errInval {
			t.Errorf("BLOCK_STATUS of %d bytes at %d: chunk % x, want an EINVAL error chunk", r.n, r.off, e)
		}
	}
}

// Without a selected context BLOCK_STATUS is refused, and the connection
// goes on.
func TestBlockStatusNeedsContext(t *testing.T) {
	sock, _ := serveMem(t, devtest.NewMem(1<<20), Config{})
	c := dialGo(t, sock, "")
	if code := c.cmd(t, cmdBlockStatus, 0, 0, 4096); code != errInval {
		t.Fatalf("BLOCK_STATUS without a context: error %d, want EINVAL", code)
	}
	stillServes(t, sock)
}

// nbdinfo --map lists the crypt export as one allocated data extent.
func TestNbdinfoMap(t *testing.T) {
	e := startExport(t, 8<<20, 4096, Config{}, false)
	out := testtool.Run(t, "nbdinfo", "--map", e.uri())
	f := strings.Fields(out)
	if len(f) != 4 || f[0] != "0" || f[1] != strconv.Itoa(8<<20) || f[2] != "0" || f[3] != "data" {
		t.Fatalf("nbdinfo --map: %q, want one extent \"0 %d 0 data\"", out, 8<<20)
	}
}

func FuzzMetaRequest(f *testing.F) {
	f.Add(metaData(""))
	f.Add(metaData("vol", "base:", baseAllocation))
	f.Add(append(metaData("", "x:y"), 1))
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMetaRequest(data)
		if err != nil {
			return
		}
		// What parses re-encodes to the same bytes.
		if got := metaData(m.export, m.queries...); string(got) != string(data) {
			t.Fatalf("re-encoded % x, parsed from % x", got, data)
		}
	})
}
