package nbd

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
)

// The server offers one metadata context, base:allocation, so that clients
// that map an export (nbdinfo --map, qemu-img map, nbdcopy) get an answer.
// Every extent is reported allocated data (status 0): a discarded sector of
// an encrypted volume reads back as the decryption of whatever the backend
// returns, never as zeroes, so nothing is a hole or known zero.
const (
	baseAllocation = "base:allocation"
	allocationID   = 1     // the context id handed out by SET_META_CONTEXT
	blockStatusLen = 4 + 8 // context id, one descriptor (length, flags)
)

// metaRequest is the data of NBD_OPT_LIST_META_CONTEXT and
// NBD_OPT_SET_META_CONTEXT.
type metaRequest struct {
	export  string
	queries []string
}

// parseMetaRequest parses a 32-bit export name length, the name, a 32-bit
// query count and that many length-prefixed queries, all of the option.
func parseMetaRequest(data []byte) (metaRequest, error) {
	var m metaRequest
	str := func() (string, error) {
		if len(data) < 4 {
			return "", errors.New("option data too short")
		}
		n := binary.BigEndian.Uint32(data)
		if n > MaxStringBytes || uint64(n) > uint64(len(data)-4) {
			return "", errors.New("string length does not fit the option")
		}
		s := string(data[4 : 4+n])
		data = data[4+n:]
		return s, nil
	}
	var err error
	if m.export, err = str(); err != nil {
		return m, err
	}
	if len(data) < 4 {
		return m, errors.New("option data too short")
	}
	count := binary.BigEndian.Uint32(data)
	data = data[4:]
	// Each query takes at least its 4-byte length: a count the data cannot
	// hold is refused before anything is allocated for it.
	if uint64(count)*4 > uint64(len(data)) {
		return m, errors.New("query count does not fit the option")
	}
	m.queries = make([]string, 0, count)
	for range count {
		q, err := str()
		if err != nil {
			return m, err
		}
		m.queries = append(m.queries, q)
	}
	if len(data) != 0 {
		return m, errors.New("trailing bytes after the queries")
	}
	return m, nil
}

// handleMetaContext answers NBD_OPT_LIST_META_CONTEXT and
// NBD_OPT_SET_META_CONTEXT. SET replaces the selection even when it fails.
func (s *Server) handleMetaContext(w io.Writer, opt uint32, data []byte, res *handshakeResult) error {
	if opt == optSetMetaContext {
		res.allocation = false
		if !res.structured {
			return writeOptError(w, opt, repErrInvalid, "NBD_OPT_SET_META_CONTEXT needs structured replies")
		}
	}
	req, err := parseMetaRequest(data)
	if err != nil {
		return writeOptError(w, opt, repErrInvalid, err.Error())
	}
	if !s.knows(req.export) {
		return writeOptError(w, opt, repErrUnknown, "no such export")
	}
	match := false
	for _, q := range req.queries {
		ns, leaf, ok := strings.Cut(q, ":")
		if !ok || ns == "" {
			return writeOptError(w, opt, repErrInvalid, "a query must start with a namespace and a colon")
		}
		// "base:" lists every base context; SET ignores it. Unknown
		// namespaces and leaves are ignored, as the protocol requires.
		if ns == "base" && (leaf == "allocation" || leaf == "" && opt == optListMetaContext) {
			match = true
		}
	}
	if opt == optListMetaContext && len(req.queries) == 0 {
		match = true
	}
	if match {
		id := uint32(0) // reserved in LIST replies
		if opt == optSetMetaContext {
			id = allocationID
			res.allocation = true
		}
		payload := binary.BigEndian.AppendUint32(nil, id)
		if err := writeOptReply(w, opt, repMetaContext, append(payload, baseAllocation...)); err != nil {
			return err
		}
	}
	return writeOptReply(w, opt, repAck, nil)
}

// replyBlockStatus answers NBD_CMD_BLOCK_STATUS for base:allocation: the
// whole requested range as one allocated-data extent.
func (ss *session) replyBlockStatus(req request) {
	if !req.answer.claim() {
		return
	}
	var b [structuredHeaderLen + blockStatusLen]byte
	putStructuredHeader(b[:], replyFlagDone, replyTypeBlockStatus, req.cookie, blockStatusLen)
	binary.BigEndian.PutUint32(b[structuredHeaderLen:], allocationID)
	binary.BigEndian.PutUint32(b[structuredHeaderLen+4:], req.length)
	binary.BigEndian.PutUint32(b[structuredHeaderLen+8:], 0)
	ss.send(b[:])
}
