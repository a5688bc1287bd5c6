package nbd

import (
	"fmt"

	"github.com/mdlayher/netlink"
)

// Resize tells nbd.ko the device's new size in bytes: NBD_CMD_RECONFIGURE
// with the index, the backend identifier (which a device connected with
// one requires) and NBD_ATTR_SIZE_BYTES, which the kernel applies to a
// connected device since Linux 5.3 (nbd_genl_size_set, in 6.12 too) and
// announces with a change uevent. The block size is sent again
// unchanged. The server must already serve the new size when it grows
// (Server.SetSize) and keep the old one until this returns when it
// shrinks.
func (a *Attachment) Resize(size int64) error {
	if size <= 0 {
		return fmt.Errorf("nbd: cannot resize %s to %d bytes", a.DevicePath(), size)
	}
	bs := a.cfg.BlockSize
	if bs == 0 {
		bs = 512
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(genlAttrIndex, uint32(a.index))
	ae.Uint64(genlAttrSizeBytes, uint64(size))
	ae.Uint64(genlAttrBlockSizeBytes, uint64(bs))
	if a.cfg.Backend != "" {
		ae.String(genlAttrBackendID, a.cfg.Backend)
	}
	body, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = execute(a.cfg.netlink(), "resize", a.index, genlCmdReconfigure, body)
	return err
}

// SetSize changes the size the server serves: requests are checked
// against it from now on, and clients that connect later are told it in
// the handshake. A client already connected keeps the size it was told
// (NBD has no way to tell it another); the kernel client is told by
// Attachment.Resize.
func (s *Server) SetSize(size int64) { s.size.Store(size) }
