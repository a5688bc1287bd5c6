package daemon

import (
	"testing"
	"time"
)

// TestFailedFrontendShowsInState: once the frontend reports that a
// request's handling failed (a panic answered with EIO), the state file
// says so, for status, and the volume still closes normally.
func TestFailedFrontendShowsInState(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	defer func(p time.Duration) { failPoll = p }(failPoll)
	failPoll = 10 * time.Millisecond
	fe, _, done := startFake(t, "failing")

	time.Sleep(5 * failPoll)
	if st, err := Active("failing"); err != nil || st == nil || st.Failed {
		t.Fatalf("before any failure: state %+v, %v", st, err)
	}
	fe.Last().Fail()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := Active("failing")
		if err != nil || st == nil {
			t.Fatalf("state %+v, %v", st, err)
		}
		if st.Failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the state file never said the volume failed")
		}
		time.Sleep(failPoll)
	}
	stopVolume(t, "failing", done)
}
