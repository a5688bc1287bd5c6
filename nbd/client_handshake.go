package nbd

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
)

// exportInfo is what a server's handshake says about its export.
type exportInfo struct {
	size  uint64
	flags uint16 // transmission flags (Flag*)
	// Block size constraints (NBD_INFO_BLOCK_SIZE), or the protocol's
	// defaults when the server sent none.
	minBlock, prefBlock, maxBlock uint32
	structured                    bool // structured replies agreed
}

// Defaults of the block size constraints when a server states none.
const (
	defaultMinBlock  = 1
	defaultPrefBlock = 4096
	defaultMaxBlock  = 32 << 20
)

// clientReadBuffer is the size of a connection's read buffer: many small
// replies arrive in one system call, while a large read's data goes from
// the socket straight into its buffer (all but what the buffer held).
const clientReadBuffer = 64 << 10

// errServerProtocol marks a server that broke the protocol (garbage,
// impossible replies): the connection cannot be trusted and redialling
// will not help.
var errServerProtocol = errors.New("NBD server broke the protocol")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errServerProtocol, fmt.Sprintf(format, args...))
}

// clientHandshake negotiates the fixed newstyle handshake on c: client
// flags FIXED_NEWSTYLE|NO_ZEROES, STARTTLS when tlsCfg is set,
// NBD_OPT_STRUCTURED_REPLY, then NBD_OPT_GO asking for the block sizes
// (NBD_OPT_EXPORT_NAME when the server does not know NBD_OPT_GO). It
// returns the connection to use from then on (TLS after STARTTLS).
func clientHandshake(c net.Conn, export string, tlsCfg *tls.Config) (net.Conn, *bufio.Reader, exportInfo, error) {
	var info exportInfo
	r := bufio.NewReaderSize(c, clientReadBuffer)
	var greet [18]byte
	if _, err := io.ReadFull(r, greet[:]); err != nil {
		return nil, nil, info, fmt.Errorf("reading the server's greeting: %w", err)
	}
	if binary.BigEndian.Uint64(greet[0:]) != magicInit || binary.BigEndian.Uint64(greet[8:]) != magicIHaveOpt {
		return nil, nil, info, protocolError("not a newstyle NBD server (greeting % x)", greet[:16])
	}
	if binary.BigEndian.Uint16(greet[16:])&flagFixedNew == 0 {
		return nil, nil, info, protocolError("the server does not speak fixed newstyle")
	}
	noZeroes := binary.BigEndian.Uint16(greet[16:])&flagNoZeroes != 0
	cflags := uint32(flagCFixedNew)
	if noZeroes {
		cflags |= flagCNoZeroes
	}
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, cflags)); err != nil {
		return nil, nil, info, err
	}
	if tlsCfg != nil {
		tc, err := clientStartTLS(c, r, tlsCfg)
		if err != nil {
			return nil, nil, info, err
		}
		c, r = tc, bufio.NewReaderSize(tc, clientReadBuffer)
	}
	typ, _, err := clientOption(c, r, optStructuredReply, nil)
	if err != nil {
		if tlsCfg != nil {
			err = refusedAfterTLS(err, len(tlsCfg.Certificates) > 0)
		}
		return nil, nil, info, err
	}
	info.structured = typ == repAck
	info, err = clientGo(c, r, export, info, noZeroes)
	return c, r, info, err
}

// clientStartTLS sends NBD_OPT_STARTTLS and runs the TLS handshake.
func clientStartTLS(c net.Conn, r *bufio.Reader, cfg *tls.Config) (*tls.Conn, error) {
	typ, msg, err := clientOption(c, r, optStartTLS, nil)
	if err != nil {
		return nil, err
	}
	if typ != repAck {
		return nil, fmt.Errorf("the server refused STARTTLS (reply %#x %q)", typ, msg)
	}
	if r.Buffered() > 0 {
		return nil, protocolError("plaintext bytes after the STARTTLS reply")
	}
	// Requests are sealed into full records and corked into large
	// socket writes, as the server's replies are (tls_writer.go).
	tc := tls.Client(&corkedConn{Conn: c}, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake with the NBD server: %w", err)
	}
	return tc, nil
}

// refusedAfterTLS explains a connection the server ended right after the
// TLS handshake: in TLS 1.3 the client finishes before the server has
// checked its certificate, so a refusal shows as the next read failing.
func refusedAfterTLS(err error, haveCert bool) error {
	if haveCert {
		return fmt.Errorf("%w (the server may not accept the client certificate of tls-certificates=)", err)
	}
	return fmt.Errorf("%w (the server may require a client certificate: %s and %s in the tls-certificates= directory)", err, TLSClientCertFile, TLSClientKeyFile)
}

// clientGo selects the export with NBD_OPT_GO, or NBD_OPT_EXPORT_NAME
// when the server answers NBD_OPT_GO with NBD_REP_ERR_UNSUP.
func clientGo(c net.Conn, r *bufio.Reader, export string, info exportInfo, noZeroes bool) (exportInfo, error) {
	data := binary.BigEndian.AppendUint32(nil, uint32(len(export)))
	data = append(data, export...)
	data = binary.BigEndian.AppendUint16(data, 1)
	data = binary.BigEndian.AppendUint16(data, infoBlockSize)
	info.minBlock, info.prefBlock, info.maxBlock = defaultMinBlock, defaultPrefBlock, defaultMaxBlock
	if _, err := c.Write(optionBytes(optGo, data)); err != nil {
		return info, err
	}
	gotExport := false
	for {
		typ, payload, err := readOptReply(r, optGo)
		if err != nil {
			return info, err
		}
		switch {
		case typ == repInfo:
			if err := info.parseInfo(payload); err != nil {
				return info, err
			}
			gotExport = gotExport || binary.BigEndian.Uint16(payload) == infoExport
		case typ == repAck:
			if !gotExport {
				return info, protocolError("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT")
			}
			return info, info.check()
		case typ == repErrUnsup:
			info.structured = false // EXPORT_NAME: no structured replies either way
			return clientExportName(c, r, export, info, noZeroes)
		case typ&(1<<31) != 0:
			return info, fmt.Errorf("the NBD server refused export %q: %s", export, optErrorText(typ, payload))
		default:
			return info, protocolError("reply %d to NBD_OPT_GO", typ)
		}
	}
}

// parseInfo reads one NBD_REP_INFO payload.
func (info *exportInfo) parseInfo(p []byte) error {
	if len(p) < 2 {
		return protocolError("short NBD_REP_INFO")
	}
	switch binary.BigEndian.Uint16(p) {
	case infoExport:
		if len(p) != 12 {
			return protocolError("NBD_INFO_EXPORT of %d bytes", len(p))
		}
		info.size = binary.BigEndian.Uint64(p[2:])
		info.flags = binary.BigEndian.Uint16(p[10:])
	case infoBlockSize:
		if len(p) != 14 {
			return protocolError("NBD_INFO_BLOCK_SIZE of %d bytes", len(p))
		}
		info.minBlock = binary.BigEndian.Uint32(p[2:])
		info.prefBlock = binary.BigEndian.Uint32(p[6:])
		info.maxBlock = binary.BigEndian.Uint32(p[10:])
	}
	return nil
}

// check refuses block size constraints the protocol forbids: powers of
// two, min <= 64 KiB, min <= pref <= max (max a multiple of min).
func (info *exportInfo) check() error {
	pow2 := func(v uint32) bool { return v != 0 && v&(v-1) == 0 }
	mn, pf, mx := info.minBlock, info.prefBlock, info.maxBlock
	if !pow2(mn) || !pow2(pf) || mn > 64<<10 || pf < mn || mx < pf || mx%mn != 0 && mx != math.MaxUint32 {
		return protocolError("block sizes min %d preferred %d max %d", mn, pf, mx)
	}
	if info.flags&FlagHasFlags == 0 {
		info.flags = 0
	}
	return nil
}

// clientExportName selects the export the old way: the server answers
// with the size and flags, or closes the connection.
func clientExportName(c net.Conn, r *bufio.Reader, export string, info exportInfo, noZeroes bool) (exportInfo, error) {
	if _, err := c.Write(optionBytes(optExportName, []byte(export))); err != nil {
		return info, err
	}
	n := 10
	if !noZeroes {
		n += exportNamePad
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return info, fmt.Errorf("the NBD server refused export %q: %w", export, err)
	}
	info.size = binary.BigEndian.Uint64(b)
	info.flags = binary.BigEndian.Uint16(b[8:])
	return info, info.check()
}

// clientOption sends an option without data expectations beyond one final
// reply, and returns that reply's type and payload.
func clientOption(c net.Conn, r *bufio.Reader, opt uint32, data []byte) (uint32, []byte, error) {
	if _, err := c.Write(optionBytes(opt, data)); err != nil {
		return 0, nil, err
	}
	for {
		typ, p, err := readOptReply(r, opt)
		if err != nil || typ != repInfo && typ != repServer {
			return typ, p, err
		}
	}
}

// optionBytes is an option request.
func optionBytes(opt uint32, data []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, optHeaderLen+len(data)), magicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// readOptReply reads one option reply to opt.
func readOptReply(r *bufio.Reader, opt uint32) (uint32, []byte, error) {
	var h [optReplyHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, fmt.Errorf("reading the reply to option %d: %w", opt, err)
	}
	if m := binary.BigEndian.Uint64(h[0:]); m != magicOptReply {
		return 0, nil, protocolError("bad option reply magic %#x", m)
	}
	if o := binary.BigEndian.Uint32(h[8:]); o != opt {
		return 0, nil, protocolError("reply to option %d when %d was sent", o, opt)
	}
	typ := binary.BigEndian.Uint32(h[12:])
	n := binary.BigEndian.Uint32(h[16:])
	if n > maxOptionLen {
		return 0, nil, protocolError("option reply of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, fmt.Errorf("reading the reply to option %d: %w", opt, err)
	}
	return typ, p, nil
}

// optErrorText describes an option error reply.
func optErrorText(typ uint32, msg []byte) string {
	names := map[uint32]string{repErrUnsup: "unsupported", repErrPolicy: "policy", repErrInvalid: "invalid",
		repErrUnknown: "unknown export", repErrTooBig: "too big", repErrTLSReqd: "TLS required"}
	name := names[typ]
	if name == "" {
		name = fmt.Sprintf("error %#x", typ)
	}
	if len(msg) > 0 {
		return fmt.Sprintf("%s (%s)", name, truncate(msg))
	}
	return name
}
