package daemon

import "testing"

// status and close take the remote location an active volume serves.
func TestResolveRemoteLocation(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	lock, err := claimName("remote")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseName("remote", lock)
	st := sampleState()
	st.Name, st.Image = "remote", "s3://bucket/vol"
	if err := writeState(st); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"s3://bucket/vol", "s3://bucket/vol/"} {
		if got, ok, err := ResolveName(arg); err != nil || !ok || got != "remote" {
			t.Errorf("ResolveName(%q) = %q, %v, %v; want remote", arg, got, ok, err)
		}
	}
	if _, ok, err := ResolveName("s3://bucket/other"); ok || err != nil {
		t.Errorf("ResolveName of a location no volume serves: ok %v, %v", ok, err)
	}
}
