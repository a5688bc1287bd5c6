package daemon

import (
	"fmt"
	"os"
)

// protectFromOOM sets the daemon's oom_score_adj to -1000, as the kernel
// lets root do: the OOM killer never picks it. A killed daemon is a
// vanished disk under a mounted file system, which loses more than any
// memory it could free; its own memory is small and bounded (see
// lockedMemory and blockdev's buffer pool).
func protectFromOOM() error {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); err != nil {
		return fmt.Errorf("cannot set oom_score_adj -1000: %v", err)
	}
	return nil
}
