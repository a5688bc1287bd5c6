package blockdev

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Busy reports whether a block device is mounted, used as swap or held by
// another block device (dm, md, ...), as far as this process can see. A
// path that is no block device is not.
func Busy(path string) bool {
	var st unix.Stat_t
	if path == "" || unix.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return false
	}
	// The device and its partitions (nbd0p1, ...), as major:minor.
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	ids := map[string]bool{}
	dirs := []string{sys}
	if ents, err := os.ReadDir(sys); err == nil {
		for _, e := range ents {
			if _, err := os.Stat(sys + "/" + e.Name() + "/partition"); err == nil {
				dirs = append(dirs, sys+"/"+e.Name())
			}
		}
	}
	for _, d := range dirs {
		if holders, err := os.ReadDir(d + "/holders"); err == nil && len(holders) > 0 {
			return true
		}
		if id, err := os.ReadFile(d + "/dev"); err == nil {
			ids[strings.TrimSpace(string(id))] = true
		}
	}
	ids[fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))] = true
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 2 && ids[f[2]] {
				return true
			}
		}
	}
	if sw, err := os.ReadFile("/proc/swaps"); err == nil {
		for _, line := range strings.Split(string(sw), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == path {
				return true
			}
		}
	}
	return false
}
