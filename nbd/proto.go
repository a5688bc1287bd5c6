// Package nbd serves a blockdev.Device over the NBD protocol (fixed newstyle
// handshake, concurrent transmission) to clients on sockets, and to the
// kernel's NBD driver over an already connected socket.
//
// The wire format follows the protocol description in the NBD project's
// doc/proto.md; all integers are big-endian.
package nbd

import "fmt"

// Handshake magics and flags.
// MaxStringBytes is the longest export name, description or message
// the NBD protocol allows.
const MaxStringBytes = 4096

const (
	magicInit     = 0x4e42444d41474943 // "NBDMAGIC"
	magicIHaveOpt = 0x49484156454f5054 // "IHAVEOPT"
	magicOptReply = 0x0003e889045565a9
	flagFixedNew  = 1 << 0 // NBD_FLAG_FIXED_NEWSTYLE
	flagNoZeroes  = 1 << 1 // NBD_FLAG_NO_ZEROES
	flagCFixedNew = 1 << 0 // NBD_FLAG_C_FIXED_NEWSTYLE
	flagCNoZeroes = 1 << 1 // NBD_FLAG_C_NO_ZEROES
	exportNamePad = 124    // zero bytes after NBD_OPT_EXPORT_NAME's reply
)

// Options (NBD_OPT_*).
const (
	optExportName       = 1
	optAbort            = 2
	optList             = 3
	optStartTLS         = 5
	optInfo             = 6
	optGo               = 7
	optStructuredReply  = 8
	optListMetaContext  = 9
	optSetMetaContext   = 10
	optExtendedHeaders  = 11
	repAck              = 1
	repServer           = 2
	repInfo             = 3
	repMetaContext      = 4
	repErrUnsup         = 1<<31 + 1
	repErrPolicy        = 1<<31 + 2
	repErrInvalid       = 1<<31 + 3
	repErrUnknown       = 1<<31 + 6
	repErrTooBig        = 1<<31 + 9
	infoExport          = 0
	infoName            = 1
	infoDescription     = 2
	infoBlockSize       = 3
	optHeaderLen        = 16 // IHAVEOPT, option, length
	optReplyHeaderLen   = 20 // magic, option, reply type, length
	requestHeaderLen    = 28
	simpleReplyLen      = 16
	structuredHeaderLen = 20
)

// Transmission flags (NBD_FLAG_*), sent with the export size.
const (
	FlagHasFlags        = 1 << 0
	FlagReadOnly        = 1 << 1
	FlagSendFlush       = 1 << 2
	FlagSendFUA         = 1 << 3
	FlagRotational      = 1 << 4
	FlagSendTrim        = 1 << 5
	FlagSendWriteZeroes = 1 << 6
	FlagCanMultiConn    = 1 << 8
)

// Requests and replies of the transmission phase.
const (
	magicRequest          = 0x25609513
	magicSimpleReply      = 0x67446698
	magicStructuredReply  = 0x668e33ef
	cmdRead               = 0
	cmdWrite              = 1
	cmdDisc               = 2
	cmdFlush              = 3
	cmdTrim               = 4
	cmdWriteZeroes        = 6
	cmdBlockStatus        = 7
	cmdFlagFUA            = 1 << 0
	cmdFlagNoHole         = 1 << 1
	cmdFlagDF             = 1 << 2
	cmdFlagReqOne         = 1 << 3
	cmdFlagFastZero       = 1 << 4
	replyFlagDone         = 1 << 0
	replyTypeNone         = 0
	replyTypeOffsetData   = 1
	replyTypeBlockStatus  = 5
	replyTypeError        = 1<<15 + 1
	structuredDataHdrLen  = 8 // offset before the data of an OFFSET_DATA chunk
	structuredErrorLength = 6 // error code and empty message length
)

// Error numbers on the wire (Linux values, as the protocol fixes them).
const (
	errPerm     = 1
	errIO       = 5
	errNoMem    = 12
	errInval    = 22
	errNoSpc    = 28
	errOverflow = 75
	errNotSup   = 95
	errShutdown = 108
)

// commandName names a request type for the log.
func commandName(typ uint16) string {
	switch typ {
	case cmdRead:
		return "read"
	case cmdWrite:
		return "write"
	case cmdFlush:
		return "flush"
	case cmdTrim:
		return "trim"
	case cmdWriteZeroes:
		return "write zeroes"
	case cmdBlockStatus:
		return "block status"
	}
	return fmt.Sprintf("command %d", typ)
}

// request is a parsed transmission-phase request header.
type request struct {
	flags  uint16
	typ    uint16
	cookie uint64
	offset uint64
	length uint32
	// answer, when set, is shared by whoever may reply: the request's
	// worker and its timeout (timeout.go).
	answer *answer
}
