package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/luksd/luksd/luks2"
)

// resolveDevice turns a device given as UUID=... or LABEL=... into a path,
// as cryptsetup does for UUID= (its uuid_or_device: lower-cased, under
// /dev/disk/by-uuid, only hex digits and dashes); LABEL= is luksd's, under
// /dev/disk/by-label. Where udev made no such link (an initramfs, a
// system without udev) the block devices are searched for a LUKS header
// with that UUID or label, as crypt_get_uuid would read it. Anything else
// is returned as given.
func resolveDevice(spec string) string {
	var dir, want string
	label := false
	switch {
	case strings.HasPrefix(spec, "UUID="):
		want = strings.ToLower(spec[len("UUID="):])
		if want == "" || strings.Trim(want, "0123456789abcdef-") != "" {
			return spec
		}
		dir = "/dev/disk/by-uuid"
	case strings.HasPrefix(spec, "LABEL="):
		want, label = spec[len("LABEL="):], true
		if want == "" || strings.Contains(want, "/") {
			return spec
		}
		dir = "/dev/disk/by-label"
	default:
		return spec
	}
	if p := filepath.Join(dir, want); exists(p) {
		return p
	}
	if p := findLUKS(want, label); p != "" {
		return p
	}
	return filepath.Join(dir, want) // does not exist: open says so
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// findLUKS returns the block device whose LUKS header has the UUID (or,
// with label, the LUKS2 label) want, or "".
func findLUKS(want string, label bool) string {
	ents, _ := os.ReadDir("/sys/class/block")
	for _, e := range ents {
		p := "/dev/" + e.Name()
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		size, _ := f.Seek(0, 2)
		h, err := luks2.Read(f, size)
		f.Close()
		if err != nil {
			continue
		}
		if (!label && h.UUID() == want) || (label && h.Label() == want) {
			return p
		}
	}
	return ""
}
