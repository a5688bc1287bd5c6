package keyring

import (
	"errors"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

func TestFromKernelReadsUserKeys(t *testing.T) {
	testtool.KeyringSession(t)
	testtool.AddKernelKey(t, "user", "luksd-test:user", []byte("sesame\x00bytes"))
	s, err := FromKernel("luksd-test:user")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Wipe()
	if string(s.Bytes()) != "sesame\x00bytes" {
		t.Fatalf("read %q", s.Bytes())
	}
}

func TestFromKernelMissingAndLogonKeys(t *testing.T) {
	testtool.KeyringSession(t)
	// A logon key's payload never leaves the kernel: cryptsetup's
	// luks2-keyring token cannot use one, and neither can luksd.
	testtool.AddKernelKey(t, "logon", "luksd-test:logon", []byte("sesame"))
	for _, d := range []string{"luksd-test:absent", "luksd-test:logon"} {
		if _, err := FromKernel(d); !errors.Is(err, ErrKernelKeyNotFound) {
			t.Errorf("%s: %v, want ErrKernelKeyNotFound", d, err)
		}
	}
}
