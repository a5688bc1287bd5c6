package s3

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// An endpoint from a [services] section of ~/.aws/config (no
// AWS_ENDPOINT_URL) is addressed path-style too: SeaweedFS on loopback
// has no bucket host names.
func TestServicesEndpointPathStyle(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	bucket := srv.Bucket()
	cfg := filepath.Join(t.TempDir(), "config")
	os.WriteFile(cfg, []byte("[profile store]\nregion = us-east-1\nservices = loop\n\n[services loop]\ns3 =\n  endpoint_url = "+
		srv.Endpoint+"\n"), 0o600)
	t.Setenv("AWS_ENDPOINT_URL", "")
	os.Unsetenv("AWS_ENDPOINT_URL")
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_PROFILE", "store")
	st, err := Connect("s3://" + bucket + "/svc")
	if err != nil {
		t.Fatal(err)
	}
	if err := Create(st, 4*testChunk, testChunk); err != nil {
		t.Fatalf("create through the [services] endpoint: %v", err)
	}
	if _, err := ReadManifest(st); err != nil {
		t.Fatal(err)
	}
}

// What the SDK says is luksd's one line: no log line of its own first
// (an IMDS that refuses a token), a CA bundle that cannot be read named
// as such and not taken for a missing volume, a store's multi-line
// message joined.
func TestConfigErrorsOneLine(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer imds.Close()
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL) // loopback
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	os.Unsetenv("AWS_PROFILE")

	r, w, _ := os.Pipe()
	stderr := os.Stderr
	os.Stderr = w
	_, err := Connect("s3://b/p")
	os.Stderr = stderr
	w.Close()
	logged, _ := readAll(r)
	if !errors.Is(err, ErrAccessDenied) || logged != "" {
		t.Errorf("no credentials beside an IMDS that refuses: %v, logged %q", err, logged)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "a")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "b")
	t.Setenv("AWS_CA_BUNDLE", "/nonexistent/ca.pem")
	_, err = Connect("s3://b/p")
	if err == nil || errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "AWS_CA_BUNDLE") {
		t.Errorf("unreadable CA bundle: %v", err)
	}

	e := &StoreError{Op: "get", Location: "s3://b/p/x", Err: errors.New("first\nsecond  line")}
	if got := e.Error(); got != "get s3://b/p/x: first second line" {
		t.Errorf("StoreError = %q", got)
	}
}

func readAll(f *os.File) (string, error) {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), nil
		}
	}
}
