package nbd

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
)

// The kernel's NBD generic netlink interface, from
// include/uapi/linux/nbd-netlink.h.
const (
	genlFamily  = "nbd"
	genlVersion = 1
)

// Commands.
const (
	genlCmdConnect     = 1
	genlCmdDisconnect  = 2
	genlCmdReconfigure = 3
	genlCmdLinkDead    = 4
	genlCmdStatus      = 5
)

// Top-level attributes.
const (
	genlAttrIndex           = 1  // u32
	genlAttrSizeBytes       = 2  // u64
	genlAttrBlockSizeBytes  = 3  // u64
	genlAttrTimeout         = 4  // u64, seconds
	genlAttrServerFlags     = 5  // u64, NBD_FLAG_*
	genlAttrClientFlags     = 6  // u64, NBD_CFLAG_*
	genlAttrSockets         = 7  // nested list of genlSockItem
	genlAttrDeadConnTimeout = 8  // u64, seconds
	genlAttrDeviceList      = 9  // nested list of genlDeviceItem (STATUS reply)
	genlAttrBackendID       = 10 // string, shown in /sys/block/nbdN/backend
)

// Nested attributes of genlAttrSockets and genlAttrDeviceList.
const (
	genlSockItem = 1 // nested: genlSockFD
	genlSockFD   = 1 // u32

	genlDeviceItem      = 1 // nested: genlDeviceIndex, genlDeviceConnected
	genlDeviceIndex     = 1 // u32
	genlDeviceConnected = 2 // u8
)

// Transmission flags the kernel client reads from NBD_ATTR_SERVER_FLAGS
// (include/uapi/linux/nbd.h), the same bits the handshake advertises.
const (
	kernelFlagHasFlags     = 1 << 0
	kernelFlagReadOnly     = 1 << 1
	kernelFlagSendFlush    = 1 << 2
	kernelFlagSendFUA      = 1 << 3
	kernelFlagSendTrim     = 1 << 5
	kernelFlagCanMultiConn = 1 << 8
)

// connectRequest is the body of NBD_CMD_CONNECT (and, with Index set and
// only sockets, NBD_CMD_RECONFIGURE).
type connectRequest struct {
	Index           int // -1: the kernel picks a free device (or makes one)
	SizeBytes       uint64
	BlockSizeBytes  uint64
	TimeoutSec      uint64 // 0: no request timeout
	DeadConnSec     uint64 // 0: fail requests at once when every connection is dead
	ServerFlags     uint64
	ClientFlags     uint64
	Sockets         []uint32 // file descriptors, one per connection
	BackendID       string   // "" = not sent
	reconfigureOnly bool     // only index, backend, sockets (and timeouts) are sent
}

func (r connectRequest) encode() ([]byte, error) {
	if len(r.Sockets) == 0 {
		return nil, errors.New("nbd: at least one socket is needed")
	}
	ae := netlink.NewAttributeEncoder()
	if r.Index >= 0 {
		ae.Uint32(genlAttrIndex, uint32(r.Index))
	}
	if !r.reconfigureOnly {
		ae.Uint64(genlAttrSizeBytes, r.SizeBytes)
		if r.BlockSizeBytes != 0 {
			ae.Uint64(genlAttrBlockSizeBytes, r.BlockSizeBytes)
		}
		ae.Uint64(genlAttrServerFlags, r.ServerFlags)
		if r.ClientFlags != 0 {
			ae.Uint64(genlAttrClientFlags, r.ClientFlags)
		}
	}
	// A device connected with a backend identifier refuses a reconfigure
	// that does not name the same one.
	if r.BackendID != "" {
		ae.String(genlAttrBackendID, r.BackendID)
	}
	// Timeouts are always sent on connect, so 0 means 0 and not whatever
	// the device was configured with before.
	if r.TimeoutSec != 0 || !r.reconfigureOnly {
		ae.Uint64(genlAttrTimeout, r.TimeoutSec)
	}
	if r.DeadConnSec != 0 || !r.reconfigureOnly {
		ae.Uint64(genlAttrDeadConnTimeout, r.DeadConnSec)
	}
	ae.Nested(genlAttrSockets, func(nae *netlink.AttributeEncoder) error {
		for _, fd := range r.Sockets {
			nae.Nested(genlSockItem, func(item *netlink.AttributeEncoder) error {
				item.Uint32(genlSockFD, fd)
				return nil
			})
		}
		return nil
	})
	return ae.Encode()
}

// decodeConnectRequest parses what encode produced (the kernel's view of
// the message); the tests use it to check the encoding.
func decodeConnectRequest(b []byte) (connectRequest, error) {
	r := connectRequest{Index: -1}
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return r, err
	}
	u64 := map[uint16]*uint64{
		genlAttrSizeBytes:       &r.SizeBytes,
		genlAttrBlockSizeBytes:  &r.BlockSizeBytes,
		genlAttrTimeout:         &r.TimeoutSec,
		genlAttrDeadConnTimeout: &r.DeadConnSec,
		genlAttrServerFlags:     &r.ServerFlags,
		genlAttrClientFlags:     &r.ClientFlags,
	}
	for ad.Next() {
		if p, ok := u64[ad.Type()]; ok {
			*p = ad.Uint64()
			continue
		}
		switch ad.Type() {
		case genlAttrIndex:
			r.Index = int(ad.Uint32())
		case genlAttrBackendID:
			r.BackendID = ad.String()
		case genlAttrSockets:
			if ad.TypeFlags()&netlink.Nested == 0 {
				return r, errors.New("nbd: sockets attribute lacks NLA_F_NESTED")
			}
			ad.Nested(func(list *netlink.AttributeDecoder) error {
				for list.Next() {
					if list.Type() != genlSockItem {
						return fmt.Errorf("nbd: unexpected attribute %d in socket list", list.Type())
					}
					list.Nested(func(item *netlink.AttributeDecoder) error {
						for item.Next() {
							if item.Type() == genlSockFD {
								r.Sockets = append(r.Sockets, item.Uint32())
							}
						}
						return nil
					})
				}
				return nil
			})
		default:
			return r, fmt.Errorf("nbd: unexpected attribute %d", ad.Type())
		}
	}
	return r, ad.Err()
}

// encodeIndex is the body of NBD_CMD_DISCONNECT and NBD_CMD_STATUS.
func encodeIndex(index int) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	if index >= 0 {
		ae.Uint32(genlAttrIndex, uint32(index))
	}
	return ae.Encode()
}

// decodeIndex reads NBD_ATTR_INDEX from a CONNECT reply.
func decodeIndex(b []byte) (int, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return -1, err
	}
	index := -1
	for ad.Next() {
		if ad.Type() == genlAttrIndex {
			index = int(ad.Uint32())
		}
	}
	if err := ad.Err(); err != nil {
		return -1, err
	}
	if index < 0 {
		return -1, errors.New("nbd: the kernel's connect reply names no device index")
	}
	return index, nil
}

// DeviceStatus is one entry of the kernel's NBD device list.
type DeviceStatus struct {
	Index     int
	Connected bool
}

// decodeStatus reads the NBD_ATTR_DEVICE_LIST of a STATUS reply.
func decodeStatus(b []byte) ([]DeviceStatus, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	var list []DeviceStatus
	for ad.Next() {
		if ad.Type() != genlAttrDeviceList {
			continue
		}
		ad.Nested(func(items *netlink.AttributeDecoder) error {
			for items.Next() {
				if items.Type() != genlDeviceItem {
					continue
				}
				d := DeviceStatus{Index: -1}
				items.Nested(func(item *netlink.AttributeDecoder) error {
					for item.Next() {
						switch item.Type() {
						case genlDeviceIndex:
							d.Index = int(item.Uint32())
						case genlDeviceConnected:
							d.Connected = item.Uint8() != 0
						}
					}
					return nil
				})
				list = append(list, d)
			}
			return nil
		})
	}
	return list, ad.Err()
}
