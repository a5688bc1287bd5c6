package ublk

// The ublk user ABI, from the kernel's include/uapi/linux/ublk_cmd.h, and
// the parts of include/uapi/linux/io_uring.h this package uses. Names follow
// Go style; each constant notes its C name where they differ in more than case.

// Control commands. The legacy numbers are the ioctl "nr" of the
// ioctl-encoded commands (UBLK_U_CMD_*), which kernels since 6.4 prefer.
const (
	cmdGetQueueAffinity  = 0x01
	cmdGetDevInfo        = 0x02
	cmdAddDev            = 0x04
	cmdDelDev            = 0x05
	cmdStartDev          = 0x06
	cmdStopDev           = 0x07
	cmdSetParams         = 0x08
	cmdGetParams         = 0x09
	cmdStartUserRecovery = 0x10
	cmdEndUserRecovery   = 0x11
	cmdGetDevInfo2       = 0x12
	cmdGetFeatures       = 0x13 // ioctl-encoded only
	cmdDelDevAsync       = 0x14 // ioctl-encoded only, newer kernels
)

// I/O commands, issued on /dev/ublkcN.
const (
	ioFetchReq          = 0x20
	ioCommitAndFetchReq = 0x21
	ioNeedGetData       = 0x22
)

// Results of an I/O command's completion.
const (
	ioResOK          = 0
	ioResNeedGetData = 1
	// ioResAbort is -ENODEV: the queue is going away, do not re-fetch.
)

// The character device's offsets: the descriptor arrays are mapped at
// cmdBufOffset + queue*maxCmdBufSize; with UBLK_F_USER_COPY the request
// data is read and written at ioBufOffset + queue<<qidOff + tag<<tagOff.
const (
	cmdBufOffset  = 0
	ioBufOffset   = 0x80000000
	maxQueueDepth = 4096

	ioBufBits = 25 // a single request carries at most 32 MiB
	tagOff    = ioBufBits
	tagBits   = 16
	qidOff    = tagOff + tagBits
	qidBits   = 12
	maxQueues = 1 << qidBits
)

// Feature flags (UBLK_F_*), negotiated through ADD_DEV's dev_info.flags.
const (
	FeatureZeroCopy          = 1 << 0
	FeatureCompInTask        = 1 << 1
	FeatureNeedGetData       = 1 << 2
	FeatureUserRecovery      = 1 << 3
	FeatureUserRecoveryReiss = 1 << 4
	FeatureUnprivileged      = 1 << 5
	FeatureCmdIoctlEncode    = 1 << 6
	FeatureUserCopy          = 1 << 7
	FeatureZoned             = 1 << 8
	FeatureUserRecoveryFail  = 1 << 9
)

// Device states (UBLK_S_DEV_*).
const (
	stateDead     = 0
	stateLive     = 1
	stateQuiesced = 2
	stateFailIO   = 3
)

// Request operations (UBLK_IO_OP_*): the low byte of ioDesc.opFlags.
const (
	opRead        = 0
	opWrite       = 1
	opFlush       = 2
	opDiscard     = 3
	opWriteSame   = 4
	opWriteZeroes = 5
)

// Request flags (UBLK_IO_F_*) in ioDesc.opFlags above the op byte.
const (
	ioFlagFUA     = 1 << 13
	ioFlagNoUnmap = 1 << 15
)

// Basic parameter attributes (UBLK_ATTR_*).
const (
	attrReadOnly      = 1 << 0
	attrRotational    = 1 << 1
	attrVolatileCache = 1 << 2
	attrFUA           = 1 << 3
)

// Parameter types (UBLK_PARAM_TYPE_*).
const (
	paramTypeBasic   = 1 << 0
	paramTypeDiscard = 1 << 1
	paramTypeDevt    = 1 << 2
)

// ctrlCmd is struct ublksrv_ctrl_cmd, carried in a 128-byte SQE's command area.
type ctrlCmd struct {
	devID      uint32
	queueID    uint16 // 0xffff when the command is not for a queue
	len        uint16
	addr       uint64
	data       uint64
	devPathLen uint16
	pad        uint16
	reserved   uint32
}

// devInfo is struct ublksrv_ctrl_dev_info.
type devInfo struct {
	nrHWQueues    uint16
	queueDepth    uint16
	state         uint16
	pad0          uint16
	maxIOBufBytes uint32
	devID         uint32
	ublksrvPID    int32
	pad1          uint32
	flags         uint64
	ublksrvFlags  uint64
	ownerUID      uint32
	ownerGID      uint32
	reserved1     uint64
	reserved2     uint64
}

// ioDesc is struct ublksrv_io_desc, one per tag in the mapped array.
type ioDesc struct {
	opFlags     uint32
	nrSectors   uint32
	startSector uint64
	addr        uint64
}

// ioCmd is struct ublksrv_io_cmd, carried in the SQE's command area.
type ioCmd struct {
	qid    uint16
	tag    uint16
	result int32
	addr   uint64
}

// paramBasic is struct ublk_param_basic.
type paramBasic struct {
	attrs            uint32
	logicalBSShift   uint8
	physicalBSShift  uint8
	ioOptShift       uint8
	ioMinShift       uint8
	maxSectors       uint32
	chunkSectors     uint32
	devSectors       uint64
	virtBoundaryMask uint64
}

// paramDiscard is struct ublk_param_discard.
type paramDiscard struct {
	discardAlignment      uint32
	discardGranularity    uint32
	maxDiscardSectors     uint32
	maxWriteZeroesSectors uint32
	maxDiscardSegments    uint16
	reserved0             uint16
}

// paramDevt is struct ublk_param_devt (read-only, filled by GET_PARAMS).
type paramDevt struct {
	charMajor uint32
	charMinor uint32
	diskMajor uint32
	diskMinor uint32
}

// params is the head of struct ublk_params up to and including devt; its
// len field tells the kernel how much of the structure follows, so newer
// kernels with more parameter types accept it unchanged.
type params struct {
	len     uint32
	types   uint32
	basic   paramBasic
	discard paramDiscard
	devt    paramDevt
}

// ioctl direction bits of the ioctl-encoded command numbers.
const (
	iocWrite = 1
	iocRead  = 2
)

// ioc encodes an ioctl number as the kernel's _IOC(dir, 'u', nr, size) does.
func ioc(dir, nr, size uint32) uint32 {
	return dir<<30 | size<<16 | uint32('u')<<8 | nr
}

// ctrlOp returns the command number for a control command: ioctl-encoded
// (UBLK_U_CMD_*) when the kernel understands that, else the legacy number.
func ctrlOp(nr uint32, encoded bool) uint32 {
	if !encoded {
		return nr
	}
	dir := uint32(iocRead | iocWrite)
	switch nr {
	case cmdGetQueueAffinity, cmdGetDevInfo, cmdGetParams, cmdGetDevInfo2, cmdGetFeatures, cmdDelDevAsync:
		dir = iocRead
	}
	return ioc(dir, nr, ctrlCmdSize)
}

// ioOp returns the command number for an I/O command.
func ioOp(nr uint32, encoded bool) uint32 {
	if !encoded {
		return nr
	}
	return ioc(iocRead|iocWrite, nr, ioCmdSize)
}

// Sizes the kernel checks, as the C structures have them.
const (
	ctrlCmdSize = 32
	devInfoSize = 64
	ioDescSize  = 24
	ioCmdSize   = 16
	featuresLen = 8
)

// userCopyOffset is the file offset on /dev/ublkcN of byte 0 of the request
// carried by (queue, tag), for pread/pwrite under UBLK_F_USER_COPY.
func userCopyOffset(queue, tag int) int64 {
	return ioBufOffset + int64(queue)<<qidOff + int64(tag)<<tagOff
}

// descMapOffset returns the mmap offset of a queue's descriptor array on
// /dev/ublkcN: every queue's slot is sized for the largest depth.
func descMapOffset(queue, pageSize int) int64 {
	return cmdBufOffset + int64(queue)*int64(roundUp(maxQueueDepth*ioDescSize, pageSize))
}

// descMapLen returns the length of a queue's descriptor mapping.
func descMapLen(depth, pageSize int) int {
	return roundUp(depth*ioDescSize, pageSize)
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }
