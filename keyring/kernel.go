package keyring

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrKernelKeyNotFound: no readable "user" key of that description in the
// keyrings the process searches.
var ErrKernelKeyNotFound = errors.New("keyring: no such user key in the kernel keyring")

// FromKernel reads the "user" key description from the kernel keyring,
// as cryptsetup's luks2-keyring token does: request_key(2) searches the
// thread, process and session keyrings (the user-session keyring, and
// the user keyring linked from it, when the process has no session
// keyring). "logon" keys cannot be read from user space, so they are not
// found, as with cryptsetup.
func FromKernel(description string) (*Secret, error) {
	id, err := unix.RequestKey("user", description, "", 0)
	if err != nil {
		if errors.Is(err, unix.ENOKEY) || errors.Is(err, unix.EKEYEXPIRED) || errors.Is(err, unix.EKEYREVOKED) {
			return nil, fmt.Errorf("%w: %q: %w", ErrKernelKeyNotFound, description, err)
		}
		return nil, fmt.Errorf("keyring: request_key %q: %w", description, err)
	}
	for {
		// KEYCTL_READ returns the key's size whatever the buffer's; read
		// again when it grew in between.
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("keyring: reading key %q: %w", description, err)
		}
		s, err := NewSecret(n)
		if err != nil {
			return nil, err
		}
		m, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, s.mem[:n], 0)
		if err != nil {
			s.Wipe()
			return nil, fmt.Errorf("keyring: reading key %q: %w", description, err)
		}
		if m <= n {
			s.truncate(m)
			return s, nil
		}
		s.Wipe()
	}
}
