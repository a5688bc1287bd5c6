package luks2

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReencryptionLockExcludes(t *testing.T) {
	old := LockDir
	LockDir = filepath.Join(t.TempDir(), "cryptsetup")
	defer func() { LockDir = old }()
	const uuid = "0d1c2e5a-9c3b-4c1e-8a0e-3f0f6d5b2a11"
	l, err := LockReencryption(uuid)
	mustNil(t, err)
	path := filepath.Join(LockDir, "LN_LUKS2-reencryption-"+uuid)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("lock file: %v", err)
	}
	if _, err := LockReencryption(uuid); !errors.Is(err, ErrReencryptionLocked) {
		t.Fatalf("second holder: %v", err)
	}
	mustNil(t, l.Unlock())
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("lock file left after the last holder: %v", err)
	}
	l, err = LockReencryption(uuid)
	mustNil(t, err)
	mustNil(t, l.Unlock())
}
