package daemon

import (
	"os"
	"path/filepath"
)

// announceDevice asks the kernel to send a "change" event for the block
// device once the state file names its volume: udev's first event for a
// new /dev/nbdN or /dev/ublkbN comes before that, so luksd's rules
// (contrib/udev/60-luksd.rules, which ask `luksd udev-name` who owns the
// device) would find no volume. Without udev the event goes nowhere.
func announceDevice(dev string) {
	p := filepath.Join("/sys/class/block", filepath.Base(dev), "uevent")
	if err := os.WriteFile(p, []byte("change"), 0); err != nil && !os.IsNotExist(err) {
		Log.Printf("%s: %v", dev, err)
	}
}

// VolumeOnDevice returns the name of the active volume whose kernel block
// device is dev (/dev/nbd0, or just nbd0) and how its /dev/mapper name is
// made ("dm", "symlink"); "" when none is.
func VolumeOnDevice(dev string) (name, mapping string) {
	if !filepath.IsAbs(dev) {
		dev = "/dev/" + dev
	}
	for _, s := range activeStates() {
		if s.Device == dev {
			return s.Name, s.MapperKind
		}
	}
	return "", ""
}
