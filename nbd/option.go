package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// handshakeResult is what the option haggling settled.
type handshakeResult struct {
	export     string
	structured bool
	allocation bool // base:allocation selected (NBD_OPT_SET_META_CONTEXT)
	readOnly   bool // the access config grants this client read-only use
}

// handshake runs the fixed newstyle negotiation: the server's greeting,
// the client's flags, then options until NBD_OPT_GO or NBD_OPT_EXPORT_NAME
// selects the export. Every error ends the connection. After STARTTLS, hc
// holds the TLS connection.
func (s *Server) handshake(hc *handshakeConn) (handshakeResult, error) {
	var res handshakeResult
	var greet [18]byte
	binary.BigEndian.PutUint64(greet[0:], magicInit)
	binary.BigEndian.PutUint64(greet[8:], magicIHaveOpt)
	binary.BigEndian.PutUint16(greet[16:], flagFixedNew|flagNoZeroes)
	if _, err := hc.w.Write(greet[:]); err != nil {
		return res, err
	}
	var cf [4]byte
	if _, err := io.ReadFull(hc.r, cf[:]); err != nil {
		return res, fmt.Errorf("reading client flags: %w", err)
	}
	clientFlags := binary.BigEndian.Uint32(cf[:])
	if clientFlags&^(flagCFixedNew|flagCNoZeroes) != 0 {
		return res, fmt.Errorf("client flags %#x include unknown bits", clientFlags)
	}
	noZeroes := clientFlags&flagCNoZeroes != 0
	buf := make([]byte, 0, 512)
	for range maxOptions {
		opt, data, err := readOption(hc.r, buf)
		if err != nil {
			return res, hc.explain(err)
		}
		var done bool
		switch {
		case s.tlsRequired(hc, opt):
			err = s.refuseBeforeTLS(hc, opt)
		case opt == optStartTLS:
			err = s.startTLS(hc, data, &res)
		default:
			done, err = s.handleOption(hc, opt, data, noZeroes, &res)
		}
		if err != nil || done {
			return res, hc.explain(err)
		}
	}
	return res, hc.explain(fmt.Errorf("more than %d options", maxOptions))
}

// readOption reads one option request. Payloads over maxOptionLen end the
// connection: no legitimate option is that long, and reading it would let
// a client make the server allocate at will.
func readOption(r *bufio.Reader, buf []byte) (uint32, []byte, error) {
	var h [optHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, fmt.Errorf("reading option: %w", err)
	}
	if m := binary.BigEndian.Uint64(h[0:]); m != magicIHaveOpt {
		return 0, nil, fmt.Errorf("bad option magic %#x", m)
	}
	opt := binary.BigEndian.Uint32(h[8:])
	n := binary.BigEndian.Uint32(h[12:])
	if n > maxOptionLen {
		return opt, nil, fmt.Errorf("option %d is %d bytes long (limit %d)", opt, n, maxOptionLen)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	data := buf[:n]
	if _, err := io.ReadFull(r, data); err != nil {
		return opt, nil, fmt.Errorf("reading option %d: %w", opt, err)
	}
	return opt, data, nil
}

// handleOption answers one option; done reports that the transmission
// phase begins.
func (s *Server) handleOption(hc *handshakeConn, opt uint32, data []byte, noZeroes bool, res *handshakeResult) (done bool, err error) {
	w := hc.w
	switch opt {
	case optExportName:
		if !s.knows(string(data)) {
			return false, fmt.Errorf("unknown export %q", truncate(data))
		}
		// NBD_OPT_EXPORT_NAME has no error reply: a refused client is
		// disconnected.
		grant := s.grant(hc)
		if grant == GrantNone {
			return false, fmt.Errorf("%w: %s", errPolicy, s.refusal(hc))
		}
		res.export = string(data)
		res.readOnly = grant == GrantReadOnly
		reply := make([]byte, 10, 10+exportNamePad)
		binary.BigEndian.PutUint64(reply[0:], uint64(s.Size()))
		binary.BigEndian.PutUint16(reply[8:], s.exportFlags(res.readOnly))
		if !noZeroes {
			reply = reply[:10+exportNamePad]
		}
		_, err := w.Write(reply)
		return err == nil, err
	case optAbort:
		writeOptReply(w, opt, repAck, nil)
		return false, errAborted
	case optList:
		if len(data) != 0 {
			return false, writeOptError(w, opt, repErrInvalid, "NBD_OPT_LIST takes no data")
		}
		entry := binary.BigEndian.AppendUint32(nil, uint32(len(s.cfg.Name)))
		entry = append(entry, s.cfg.Name...)
		entry = append(entry, s.cfg.Description...)
		if err := writeOptReply(w, opt, repServer, entry); err != nil {
			return false, err
		}
		return false, writeOptReply(w, opt, repAck, nil)
	case optStructuredReply:
		if len(data) != 0 {
			return false, writeOptError(w, opt, repErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data")
		}
		res.structured = true
		return false, writeOptReply(w, opt, repAck, nil)
	case optInfo, optGo:
		name, infos, err := parseInfoRequest(data)
		if err != nil {
			return false, writeOptError(w, opt, repErrInvalid, err.Error())
		}
		if !s.knows(name) {
			return false, writeOptError(w, opt, repErrUnknown, "no such export")
		}
		grant := s.grant(hc)
		if grant == GrantNone {
			return false, s.refuseAccess(hc, opt)
		}
		if err := s.writeInfos(w, opt, name, infos, grant == GrantReadOnly); err != nil {
			return false, err
		}
		if err := writeOptReply(w, opt, repAck, nil); err != nil {
			return false, err
		}
		if opt == optGo {
			res.export = name
			res.readOnly = grant == GrantReadOnly
			return true, nil
		}
		return false, nil
	case optListMetaContext, optSetMetaContext:
		return false, s.handleMetaContext(w, opt, data, res)
	default:
		// Extended headers and anything unknown.
		return false, writeOptError(w, opt, repErrUnsup, "option not supported")
	}
}

// knows reports whether name selects the export.
func (s *Server) knows(name string) bool { return name == "" || name == s.cfg.Name }

// parseInfoRequest parses NBD_OPT_INFO / NBD_OPT_GO data: a 32-bit name
// length, the name, a 16-bit count and that many 16-bit info types.
func parseInfoRequest(data []byte) (string, []uint16, error) {
	if len(data) < 6 {
		return "", nil, errors.New("option data too short")
	}
	n := binary.BigEndian.Uint32(data)
	if n > MaxStringBytes || uint64(n) > uint64(len(data)-6) {
		return "", nil, errors.New("export name length does not fit the option")
	}
	name := string(data[4 : 4+n])
	rest := data[4+n:]
	count := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != 2*count {
		return "", nil, errors.New("information request count does not fit the option")
	}
	infos := make([]uint16, count)
	for i := range infos {
		infos[i] = binary.BigEndian.Uint16(rest[2*i:])
	}
	return name, infos, nil
}

// writeInfos sends NBD_INFO_EXPORT and NBD_INFO_BLOCK_SIZE always, and the
// name and description when asked.
func (s *Server) writeInfos(w io.Writer, opt uint32, name string, infos []uint16, readOnly bool) error {
	exp := binary.BigEndian.AppendUint16(nil, infoExport)
	exp = binary.BigEndian.AppendUint64(exp, uint64(s.Size()))
	exp = binary.BigEndian.AppendUint16(exp, s.exportFlags(readOnly))
	if err := writeOptReply(w, opt, repInfo, exp); err != nil {
		return err
	}
	minBS, prefBS, maxBS := s.blockSizes()
	bs := binary.BigEndian.AppendUint16(nil, infoBlockSize)
	bs = binary.BigEndian.AppendUint32(bs, minBS)
	bs = binary.BigEndian.AppendUint32(bs, prefBS)
	bs = binary.BigEndian.AppendUint32(bs, maxBS)
	if err := writeOptReply(w, opt, repInfo, bs); err != nil {
		return err
	}
	sentName, sentDesc := false, false
	for _, i := range infos {
		var payload []byte
		switch {
		case i == infoName && !sentName:
			sentName = true
			payload = binary.BigEndian.AppendUint16(nil, infoName)
			payload = append(payload, s.cfg.Name...)
		case i == infoDescription && !sentDesc && s.cfg.Description != "":
			sentDesc = true
			payload = binary.BigEndian.AppendUint16(nil, infoDescription)
			payload = append(payload, s.cfg.Description...)
		default:
			continue
		}
		if err := writeOptReply(w, opt, repInfo, payload); err != nil {
			return err
		}
	}
	return nil
}

func writeOptReply(w io.Writer, opt, typ uint32, data []byte) error {
	b := make([]byte, optReplyHeaderLen, optReplyHeaderLen+len(data))
	binary.BigEndian.PutUint64(b[0:], magicOptReply)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], typ)
	binary.BigEndian.PutUint32(b[16:], uint32(len(data)))
	_, err := w.Write(append(b, data...))
	return err
}

func writeOptError(w io.Writer, opt, typ uint32, msg string) error {
	return writeOptReply(w, opt, typ, []byte(msg))
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
