package tpm2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
)

// DefaultDevice is the kernel's resource-managed TPM, which systemd uses
// unless told otherwise.
const DefaultDevice = "/dev/tpmrm0"

// ErrNoDevice: no TPM at the device asked for.
var ErrNoDevice = errors.New("systemd-tpm2: no TPM2 device")

// Open opens a TPM as systemd's tpm2-device= names it: a character
// device path ("" for DefaultDevice), or "swtpm:host=H,port=P", the data
// port of a software TPM (swtpm socket --server type=tcp) — the TCTI
// string systemd-cryptenroll takes for one.
func Open(device string) (transport.TPMCloser, error) {
	if device == "" {
		device = DefaultDevice
	}
	conf, ok := strings.CutPrefix(device, "swtpm:")
	if !ok {
		t, err := linuxtpm.Open(device)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrNoDevice, device, err)
		}
		return t, nil
	}
	host, port := "127.0.0.1", "2321"
	for _, kv := range strings.Split(conf, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "host":
			host = v
		case "port":
			port = v
		case "":
		default:
			return nil, fmt.Errorf("%w: swtpm option %q (host=, port=)", ErrNoDevice, k)
		}
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrNoDevice, device, err)
	}
	return &stream{c}, nil
}

// stream speaks TPM 2.0 commands over a byte stream, as swtpm's data
// port takes them: a command, then a response whose header gives its
// length.
type stream struct{ c net.Conn }

// maxResponse bounds what a TPM may answer (TPM2's largest is ~4 KiB).
const maxResponse = 64 << 10

func (s *stream) Send(cmd []byte) ([]byte, error) {
	s.c.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := s.c.Write(cmd); err != nil {
		return nil, err
	}
	hdr := make([]byte, 10) // tag, size, response code
	if _, err := io.ReadFull(s.c, hdr); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[2:6])
	if n < 10 || n > maxResponse {
		return nil, fmt.Errorf("systemd-tpm2: a TPM response of %d bytes", n)
	}
	rsp := make([]byte, n)
	copy(rsp, hdr)
	_, err := io.ReadFull(s.c, rsp[10:])
	return rsp, err
}

func (s *stream) Close() error { return s.c.Close() }
