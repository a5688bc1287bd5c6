package ublk

import (
	"testing"
	"unsafe"
)

// The kernel reads these structures by their C layout; every size and offset
// here is the one include/uapi/linux/ublk_cmd.h and io_uring.h give on
// 64-bit Linux.
func TestStructLayout(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"ublksrv_ctrl_cmd", unsafe.Sizeof(ctrlCmd{}), ctrlCmdSize},
		{"ublksrv_ctrl_dev_info", unsafe.Sizeof(devInfo{}), devInfoSize},
		{"ublksrv_io_desc", unsafe.Sizeof(ioDesc{}), ioDescSize},
		{"ublksrv_io_cmd", unsafe.Sizeof(ioCmd{}), ioCmdSize},
		{"ublk_param_basic", unsafe.Sizeof(paramBasic{}), 32},
		{"ublk_param_discard", unsafe.Sizeof(paramDiscard{}), 20},
		{"ublk_param_devt", unsafe.Sizeof(paramDevt{}), 16},
		{"io_uring_sqe (SQE128)", unsafe.Sizeof(sqe{}), sqeSize},
		{"io_uring_cqe", unsafe.Sizeof(cqe{}), cqeSize},
		{"io_uring_params", unsafe.Sizeof(uringParams{}), 120},
		{"io_sqring_offsets", unsafe.Sizeof(sqOffsets{}), 40},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("sizeof(%s) = %d, want %d", s.name, s.got, s.want)
		}
	}
	var (
		cc ctrlCmd
		di devInfo
		d  ioDesc
		ic ioCmd
		pb paramBasic
		pd paramDiscard
		p  params
		s  sqe
		up uringParams
	)
	offsets := []struct {
		name      string
		got, want uintptr
	}{
		{"ctrl_cmd.queue_id", unsafe.Offsetof(cc.queueID), 4},
		{"ctrl_cmd.len", unsafe.Offsetof(cc.len), 6},
		{"ctrl_cmd.addr", unsafe.Offsetof(cc.addr), 8},
		{"ctrl_cmd.data", unsafe.Offsetof(cc.data), 16},
		{"ctrl_cmd.dev_path_len", unsafe.Offsetof(cc.devPathLen), 24},
		{"dev_info.state", unsafe.Offsetof(di.state), 4},
		{"dev_info.max_io_buf_bytes", unsafe.Offsetof(di.maxIOBufBytes), 8},
		{"dev_info.dev_id", unsafe.Offsetof(di.devID), 12},
		{"dev_info.ublksrv_pid", unsafe.Offsetof(di.ublksrvPID), 16},
		{"dev_info.flags", unsafe.Offsetof(di.flags), 24},
		{"dev_info.owner_uid", unsafe.Offsetof(di.ownerUID), 40},
		{"io_desc.nr_sectors", unsafe.Offsetof(d.nrSectors), 4},
		{"io_desc.start_sector", unsafe.Offsetof(d.startSector), 8},
		{"io_desc.addr", unsafe.Offsetof(d.addr), 16},
		{"io_cmd.tag", unsafe.Offsetof(ic.tag), 2},
		{"io_cmd.result", unsafe.Offsetof(ic.result), 4},
		{"io_cmd.addr", unsafe.Offsetof(ic.addr), 8},
		{"basic.logical_bs_shift", unsafe.Offsetof(pb.logicalBSShift), 4},
		{"basic.io_min_shift", unsafe.Offsetof(pb.ioMinShift), 7},
		{"basic.max_sectors", unsafe.Offsetof(pb.maxSectors), 8},
		{"basic.dev_sectors", unsafe.Offsetof(pb.devSectors), 16},
		{"basic.virt_boundary_mask", unsafe.Offsetof(pb.virtBoundaryMask), 24},
		{"discard.max_write_zeroes_sectors", unsafe.Offsetof(pd.maxWriteZeroesSectors), 12},
		{"discard.max_discard_segments", unsafe.Offsetof(pd.maxDiscardSegments), 16},
		{"params.basic", unsafe.Offsetof(p.basic), 8},
		{"params.discard", unsafe.Offsetof(p.discard), 40},
		{"params.devt", unsafe.Offsetof(p.devt), 60},
		{"sqe.fd", unsafe.Offsetof(s.fd), 4},
		{"sqe.cmd_op", unsafe.Offsetof(s.off), 8},
		{"sqe.addr", unsafe.Offsetof(s.addr), 16},
		{"sqe.user_data", unsafe.Offsetof(s.userData), 32},
		{"sqe.cmd", unsafe.Offsetof(s.cmd), 48},
		{"io_uring_params.sq_off", unsafe.Offsetof(up.sqOff), 40},
		{"io_uring_params.cq_off", unsafe.Offsetof(up.cqOff), 80},
	}
	for _, o := range offsets {
		if o.got != o.want {
			t.Errorf("offsetof(%s) = %d, want %d", o.name, o.got, o.want)
		}
	}
	if len(s.cmd) < int(unsafe.Sizeof(cc)) || len(s.cmd) < int(unsafe.Sizeof(ic)) {
		t.Errorf("SQE command area of %d bytes cannot hold the ublk commands", len(s.cmd))
	}
}

// The ioctl-encoded command numbers as the kernel's _IOR/_IOWR macros
// produce them (values as strace prints them for ublk servers).
func TestCommandEncoding(t *testing.T) {
	cases := []struct {
		name string
		got  uint32
		want uint32
	}{
		{"UBLK_U_CMD_GET_DEV_INFO", ctrlOp(cmdGetDevInfo, true), 0x80207502},
		{"UBLK_U_CMD_ADD_DEV", ctrlOp(cmdAddDev, true), 0xc0207504},
		{"UBLK_U_CMD_DEL_DEV", ctrlOp(cmdDelDev, true), 0xc0207505},
		{"UBLK_U_CMD_START_DEV", ctrlOp(cmdStartDev, true), 0xc0207506},
		{"UBLK_U_CMD_STOP_DEV", ctrlOp(cmdStopDev, true), 0xc0207507},
		{"UBLK_U_CMD_SET_PARAMS", ctrlOp(cmdSetParams, true), 0xc0207508},
		{"UBLK_U_CMD_GET_PARAMS", ctrlOp(cmdGetParams, true), 0x80207509},
		{"UBLK_U_CMD_START_USER_RECOVERY", ctrlOp(cmdStartUserRecovery, true), 0xc0207510},
		{"UBLK_U_CMD_END_USER_RECOVERY", ctrlOp(cmdEndUserRecovery, true), 0xc0207511},
		{"UBLK_U_CMD_GET_FEATURES", ctrlOp(cmdGetFeatures, true), 0x80207513},
		{"UBLK_U_CMD_DEL_DEV_ASYNC", ctrlOp(cmdDelDevAsync, true), 0x80207514},
		{"UBLK_U_IO_FETCH_REQ", ioOp(ioFetchReq, true), 0xc0107520},
		{"UBLK_U_IO_COMMIT_AND_FETCH_REQ", ioOp(ioCommitAndFetchReq, true), 0xc0107521},
		{"UBLK_CMD_ADD_DEV (legacy)", ctrlOp(cmdAddDev, false), 0x04},
		{"UBLK_IO_FETCH_REQ (legacy)", ioOp(ioFetchReq, false), 0x20},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestCharDeviceOffsets(t *testing.T) {
	// user copy: queue in bits 41..52, tag in bits 25..40, above 2 GiB
	if got, want := userCopyOffset(0, 0), int64(0x80000000); got != want {
		t.Errorf("userCopyOffset(0,0) = %#x, want %#x", got, want)
	}
	if got, want := userCopyOffset(3, 5), int64(0x80000000)+3<<41+5<<25; got != want {
		t.Errorf("userCopyOffset(3,5) = %#x, want %#x", got, want)
	}
	// neighbouring tags never overlap: a request is at most 32 MiB
	if d := userCopyOffset(0, 1) - userCopyOffset(0, 0); d != 32<<20 {
		t.Errorf("tag stride = %d, want 32 MiB", d)
	}
	// descriptor arrays: each queue's slot fits 4096 descriptors of 24 bytes
	if got := descMapOffset(0, 4096); got != 0 {
		t.Errorf("descMapOffset(0) = %d", got)
	}
	if got, want := descMapOffset(2, 4096), int64(2*4096*24); got != want {
		t.Errorf("descMapOffset(2) = %d, want %d", got, want)
	}
	if got, want := descMapOffset(1, 65536), int64(131072); got != want {
		t.Errorf("descMapOffset(1, 64K pages) = %d, want %d", got, want)
	}
	if got := descMapLen(128, 4096); got != 4096 {
		t.Errorf("descMapLen(128) = %d, want 4096", got)
	}
	if got := descMapLen(4096, 4096); got != 98304 {
		t.Errorf("descMapLen(4096) = %d, want 98304", got)
	}
}
