package nbd

import (
	"bytes"
	"encoding/binary"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/luksd/luksd/internal/testtool"
)

func TestConnectRequestRoundTrip(t *testing.T) {
	want := connectRequest{
		Index:          7,
		SizeBytes:      1 << 30,
		BlockSizeBytes: 4096,
		TimeoutSec:     600,
		DeadConnSec:    30,
		ServerFlags:    kernelFlagHasFlags | kernelFlagSendFlush | kernelFlagCanMultiConn,
		Sockets:        []uint32{5, 6, 9},
		BackendID:      "luksd:vol",
	}
	testtool.RoundTrip(t, want, connectRequest.encode, decodeConnectRequest)
}

func TestConnectRequestAnyIndex(t *testing.T) {
	b, err := connectRequest{Index: -1, SizeBytes: 512, Sockets: []uint32{3}}.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeConnectRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Index != -1 {
		t.Fatalf("index %d was sent; want none so the kernel picks", got.Index)
	}
	attrs, err := netlink.UnmarshalAttributes(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attrs {
		if a.Type == genlAttrIndex {
			t.Fatal("NBD_ATTR_INDEX present")
		}
	}
}

func TestConnectRequestNeedsSocket(t *testing.T) {
	if _, err := (connectRequest{SizeBytes: 512}).encode(); err == nil {
		t.Fatal("encoded a connect request without sockets")
	}
}

func TestReconfigureSendsIndexBackendSockets(t *testing.T) {
	b, err := connectRequest{Index: 2, SizeBytes: 512, ServerFlags: 1, Sockets: []uint32{4}, BackendID: "luksd:v", reconfigureOnly: true}.encode()
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := netlink.UnmarshalAttributes(b)
	if err != nil {
		t.Fatal(err)
	}
	var types []uint16
	for _, a := range attrs {
		types = append(types, a.Type&^netlink.Nested)
	}
	if !reflect.DeepEqual(types, []uint16{genlAttrIndex, genlAttrBackendID, genlAttrSockets}) {
		t.Fatalf("reconfigure attributes %v, want index, backend and sockets", types)
	}
}

// TestConnectWireLayout checks the bytes against the kernel's attribute
// layout: struct nlattr {u16 len; u16 type} + value padded to 4 bytes, the
// socket list nested twice with NLA_F_NESTED (0x8000) set.
func TestConnectWireLayout(t *testing.T) {
	b, err := connectRequest{Index: 3, SizeBytes: 1 << 20, BlockSizeBytes: 512, ServerFlags: 0x10d, Sockets: []uint32{11}}.encode()
	if err != nil {
		t.Fatal(err)
	}
	ne := binary.NativeEndian // netlink attributes are in host byte order
	attr := func(typ uint16, payload []byte) []byte {
		b := ne.AppendUint16(nil, uint16(4+len(payload)))
		b = ne.AppendUint16(b, typ)
		b = append(b, payload...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	u32 := func(v uint32) []byte { return ne.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return ne.AppendUint64(nil, v) }
	var want []byte
	want = append(want, attr(1, u32(3))...)      // NBD_ATTR_INDEX
	want = append(want, attr(2, u64(1<<20))...)  // NBD_ATTR_SIZE_BYTES
	want = append(want, attr(3, u64(512))...)    // NBD_ATTR_BLOCK_SIZE_BYTES
	want = append(want, attr(5, u64(0x10d))...)  // NBD_ATTR_SERVER_FLAGS
	want = append(want, attr(4, u64(0))...)      // NBD_ATTR_TIMEOUT
	want = append(want, attr(8, u64(0))...)      // NBD_ATTR_DEAD_CONN_TIMEOUT
	fd := attr(1, u32(11))                       // NBD_SOCK_FD
	item := attr(1|0x8000, fd)                   // NBD_SOCK_ITEM | NLA_F_NESTED
	want = append(want, attr(7|0x8000, item)...) // NBD_ATTR_SOCKETS | NLA_F_NESTED
	if !bytes.Equal(b, want) {
		t.Fatalf("wire bytes\n got % x\nwant % x", b, want)
	}
}

func TestIndexRoundTrip(t *testing.T) {
	b, err := encodeIndex(12)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeIndex(b)
	if err != nil || got != 12 {
		t.Fatalf("decodeIndex = %d, %v; want 12", got, err)
	}
	empty, _ := encodeIndex(-1)
	if len(empty) != 0 {
		t.Fatalf("index -1 encoded to % x; want nothing", empty)
	}
	if _, err := decodeIndex(empty); err == nil {
		t.Fatal("decodeIndex accepted a reply without an index")
	}
}

func TestStatusDecode(t *testing.T) {
	want := []DeviceStatus{{Index: 0, Connected: true}, {Index: 1}, {Index: 15, Connected: true}}
	testtool.RoundTrip(t, want, encodeStatusReply, decodeStatus)
}

// TestUAPIValues compares the constants with the kernel's header when it is
// installed (linux-libc-dev); the expected values are also spelled out.
func TestUAPIValues(t *testing.T) {
	fixed := map[string]int{
		"NBD_ATTR_INDEX": genlAttrIndex, "NBD_ATTR_SIZE_BYTES": genlAttrSizeBytes,
		"NBD_ATTR_BLOCK_SIZE_BYTES": genlAttrBlockSizeBytes, "NBD_ATTR_TIMEOUT": genlAttrTimeout,
		"NBD_ATTR_SERVER_FLAGS": genlAttrServerFlags, "NBD_ATTR_CLIENT_FLAGS": genlAttrClientFlags,
		"NBD_ATTR_SOCKETS": genlAttrSockets, "NBD_ATTR_DEAD_CONN_TIMEOUT": genlAttrDeadConnTimeout,
		"NBD_ATTR_DEVICE_LIST": genlAttrDeviceList, "NBD_ATTR_BACKEND_IDENTIFIER": genlAttrBackendID,
		"NBD_SOCK_ITEM": genlSockItem, "NBD_SOCK_FD": genlSockFD,
		"NBD_DEVICE_ITEM": genlDeviceItem, "NBD_DEVICE_INDEX": genlDeviceIndex,
		"NBD_DEVICE_CONNECTED": genlDeviceConnected,
		"NBD_CMD_CONNECT":      genlCmdConnect, "NBD_CMD_DISCONNECT": genlCmdDisconnect,
		"NBD_CMD_RECONFIGURE": genlCmdReconfigure, "NBD_CMD_LINK_DEAD": genlCmdLinkDead,
		"NBD_CMD_STATUS": genlCmdStatus,
	}
	spelled := map[string]int{
		"NBD_ATTR_INDEX": 1, "NBD_ATTR_SIZE_BYTES": 2, "NBD_ATTR_BLOCK_SIZE_BYTES": 3,
		"NBD_ATTR_TIMEOUT": 4, "NBD_ATTR_SERVER_FLAGS": 5, "NBD_ATTR_CLIENT_FLAGS": 6,
		"NBD_ATTR_SOCKETS": 7, "NBD_ATTR_DEAD_CONN_TIMEOUT": 8, "NBD_ATTR_DEVICE_LIST": 9,
		"NBD_ATTR_BACKEND_IDENTIFIER": 10, "NBD_SOCK_ITEM": 1, "NBD_SOCK_FD": 1,
		"NBD_DEVICE_ITEM": 1, "NBD_DEVICE_INDEX": 1, "NBD_DEVICE_CONNECTED": 2,
		"NBD_CMD_CONNECT": 1, "NBD_CMD_DISCONNECT": 2, "NBD_CMD_RECONFIGURE": 3,
		"NBD_CMD_LINK_DEAD": 4, "NBD_CMD_STATUS": 5,
	}
	if !reflect.DeepEqual(fixed, spelled) {
		t.Fatalf("constants %v differ from uapi %v", fixed, spelled)
	}
	src, err := os.ReadFile("/usr/include/linux/nbd-netlink.h")
	if err != nil {
		t.Logf("kernel header not installed, checked the spelled-out values only: %v", err)
		return
	}
	fromHeader := parseEnums(string(src))
	for name, v := range fixed {
		if h, ok := fromHeader[name]; !ok || h != v {
			t.Errorf("%s = %d here, %d (found %v) in nbd-netlink.h", name, v, h, ok)
		}
	}
	if fam := regexp.MustCompile(`NBD_GENL_FAMILY_NAME\s+"(\w+)"`).FindStringSubmatch(string(src)); fam == nil || fam[1] != genlFamily {
		t.Errorf("family name %q, header says %v", genlFamily, fam)
	}
}

// parseEnums numbers the members of each C enum in src from 0.
func parseEnums(src string) map[string]int {
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`(?s)enum\s*\{(.*?)\}`).FindAllStringSubmatch(src, -1) {
		for i, name := range strings.Split(m[1], ",") {
			out[strings.TrimSpace(name)] = i
		}
	}
	return out
}

func TestFlags(t *testing.T) {
	rw := AttachConfig{}.Flags()
	if rw != kernelFlagHasFlags|kernelFlagSendFlush|kernelFlagSendFUA|kernelFlagCanMultiConn {
		t.Fatalf("read-write flags %#x", rw)
	}
	if f := (AttachConfig{Trim: true}).Flags(); f&kernelFlagSendTrim == 0 || f&kernelFlagReadOnly != 0 {
		t.Fatalf("discard flags %#x", f)
	}
	if f := (AttachConfig{ReadOnly: true, Trim: true}).Flags(); f&kernelFlagReadOnly == 0 || f&kernelFlagSendTrim != 0 {
		t.Fatalf("read-only flags %#x: want READ_ONLY and no TRIM", f)
	}
	if f := (AttachConfig{ServerFlags: kernelFlagSendFlush | kernelFlagReadOnly}).Flags(); f != kernelFlagHasFlags|kernelFlagSendFlush|kernelFlagReadOnly {
		t.Fatalf("explicit server flags became %#x", f)
	}
	// Bits as in include/uapi/linux/nbd.h.
	if kernelFlagSendTrim != 32 || kernelFlagCanMultiConn != 256 || kernelFlagSendFUA != 8 {
		t.Fatal("flag bits differ from nbd.h")
	}
}

// encodeStatusReply builds a STATUS reply body as the kernel does; it
// exists for the tests of decodeStatus.
func encodeStatusReply(list []DeviceStatus) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(genlAttrDeviceList, func(items *netlink.AttributeEncoder) error {
		for _, d := range list {
			items.Nested(genlDeviceItem, func(item *netlink.AttributeEncoder) error {
				item.Uint32(genlDeviceIndex, uint32(d.Index))
				var c uint8
				if d.Connected {
					c = 1
				}
				item.Uint8(genlDeviceConnected, c)
				return nil
			})
		}
		return nil
	})
	return ae.Encode()
}
