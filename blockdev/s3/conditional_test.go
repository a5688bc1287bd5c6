package s3

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// The lease rests on the store's conditional writes and on reading
// back what was just written: of openers racing to create the lease one
// wins, a write against a stale ETag fails, and a GET right after a PUT
// sees it. (SeaweedFS serializes racing conditional writes: the losers
// wait up to seconds for its lock before their 412, so few rounds.)
func TestStoreConditionalWrites(t *testing.T) {
	srv := s3test.Start(t)
	st := NewStore(srv.Client(), srv.Bucket(), "cond")
	for round := range 4 {
		name := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := st.putIf(name, []byte{byte(i)}, "*", "")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, errPrecondition):
					lost++
				default:
					t.Errorf("put If-None-Match: %v", err)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d of 6 creators won (%d refused), want 1", round, won, lost)
		}
		etag, err := st.putIf(name, []byte("v2"), "", "")
		if err != nil {
			t.Fatal(err)
		}
		b, got, err := st.getVersion(name)
		if err != nil || string(b) != "v2" || got != etag {
			t.Fatalf("round %d: read after write: %q %q %v, want v2 %q", round, b, got, err, etag)
		}
		if _, err := st.putIf(name, []byte("v3"), "", `"stale"`); !errors.Is(err, errPrecondition) {
			t.Fatalf("round %d: put If-Match a stale ETag: %v, want errPrecondition", round, err)
		}
		if _, err := st.putIf(name, []byte("v3"), "", etag); err != nil {
			t.Fatalf("round %d: put If-Match the current ETag: %v", round, err)
		}
	}
}
