package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/s3/s3test"
)

func TestParseLocation(t *testing.T) {
	for loc, want := range map[string][2]string{
		"s3://bucket/vol":        {"bucket", "vol"},
		"s3://bucket/a/b/c/":     {"bucket", "a/b/c"},
		"s3://bucket":            {"bucket", ""},
		"s3://bucket/":           {"bucket", ""},
		"s3://":                  {},
		"s3:///vol":              {},
		"s3://bucket/vol?x=1":    {},
		"nbd://bucket/vol":       {},
		"s3://bucket/vol#secret": {},
	} {
		b, p, err := ParseLocation(loc)
		if want == ([2]string{}) {
			if !errors.Is(err, ErrLocation) {
				t.Errorf("ParseLocation(%q) = %q %q %v, want ErrLocation", loc, b, p, err)
			}
			continue
		}
		if err != nil || b != want[0] || p != want[1] {
			t.Errorf("ParseLocation(%q) = %q %q %v, want %q", loc, b, p, err, want)
		}
	}
}

// blockdev.Create and Open reach a volume through the SDK's standard
// sources (here the environment) alone.
func TestOpenByLocation(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	loc := "s3://" + srv.Bucket() + "/by/location"
	if _, err := blockdev.Open(loc, blockdev.OpenOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open before create: %v, want ErrNotExist", err)
	}
	if err := blockdev.Create(loc, blockdev.CreateOptions{Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := blockdev.Create(loc, blockdev.CreateOptions{Size: 1 << 20}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v, want ErrExist", err)
	}
	dev, err := blockdev.Open(loc, blockdev.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dev.Size() != 1<<20 || !blockdev.CapsOf(dev).Trim {
		t.Fatalf("size %d, caps %+v", dev.Size(), blockdev.CapsOf(dev))
	}
	if _, err := dev.WriteAt([]byte("through the location"), 4000); err != nil {
		t.Fatal(err)
	}
	if err := dev.Flush(); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 20)
	if _, err := dev.ReadAt(p, 4000); err != nil || !bytes.Equal(p, []byte("through the location")) {
		t.Fatalf("read back %q, %v", p, err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	// From the store, where the chunk went up unsigned over http
	// (UnsignedPayloadOverHTTP): the store took it, checksum and all.
	dev, err = blockdev.Open(loc, blockdev.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	clear(p)
	if _, err := dev.ReadAt(p, 4000); err != nil || !bytes.Equal(p, []byte("through the location")) {
		t.Fatalf("read back after reopening %q, %v", p, err)
	}

	if err := blockdev.Create(t.TempDir()+"/img", blockdev.CreateOptions{Size: 1 << 20}); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Errorf("Create of a local path: %v", err)
	}
	if err := blockdev.Create("nosuch://x/y", blockdev.CreateOptions{Size: 1 << 20}); !errors.Is(err, blockdev.ErrUnknownScheme) {
		t.Errorf("Create of an unknown scheme: %v", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	if _, err := blockdev.Open(loc, blockdev.OpenOptions{}); !errors.Is(err, os.ErrPermission) {
		t.Errorf("open with a wrong secret: %v, want ErrPermission", err)
	}
}

// The environment sets the cache bounds and the lease; a value that is
// not a positive number is refused, not ignored.
func TestOptionsFromEnv(t *testing.T) {
	t.Setenv("LUKSD_S3_CACHE_MIB", "16")
	t.Setenv("LUKSD_S3_LEASE_SECONDS", "300")
	o, err := optionsFromEnv()
	if err != nil || o.CacheBytes != 16<<20 || o.LeaseTTL != 300*time.Second || o.DirtyBytes != 0 {
		t.Fatalf("optionsFromEnv = %+v, %v", o, err)
	}
	for _, bad := range []string{"0", "-5", "1.5", "ten"} {
		t.Setenv("LUKSD_S3_LEASE_SECONDS", bad)
		if _, err := optionsFromEnv(); !errors.Is(err, ErrLocation) {
			t.Errorf("LUKSD_S3_LEASE_SECONDS=%s: %v, want ErrLocation", bad, err)
		}
	}
}

// clientEnv points the SDK's standard sources at endpoint alone.
func clientEnv(t *testing.T, endpoint string) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_ENDPOINT_URL": endpoint, "AWS_CONFIG_FILE": "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
}

// Over plain http a PUT is signed without its body's SHA-256
// (UNSIGNED-PAYLOAD) and carries the body's CRC32 in a header the
// signature covers, so the store still refuses a body corrupted on the
// way; other requests are as the SDK makes them.
func TestPutOverHTTPUnsignedWithChecksum(t *testing.T) {
	type request struct {
		method, sha256, crc32, auth string
		body                        []byte
	}
	seen := make(chan request, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- request{r.Method, r.Header.Get("X-Amz-Content-Sha256"), r.Header.Get("X-Amz-Checksum-Crc32"),
			r.Header.Get("Authorization"), body}
		w.Header().Set("ETag", `"etag"`)
		if r.Method == http.MethodGet {
			w.Write([]byte("stored"))
		}
	}))
	defer srv.Close()
	clientEnv(t, srv.URL)
	api, err := newClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(api, "bucket", "vol")
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(rand.N(256))
	}
	if err := st.put("chunk-0", data, false); err != nil {
		t.Fatal(err)
	}
	put := <-seen
	sum := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data)))
	switch {
	case put.method != http.MethodPut || !bytes.Equal(put.body, data):
		t.Fatalf("%s of %d bytes, want a PUT of the chunk's %d", put.method, len(put.body), len(data))
	case put.sha256 != "UNSIGNED-PAYLOAD":
		t.Errorf("PUT over http with x-amz-content-sha256 %q, want UNSIGNED-PAYLOAD", put.sha256)
	case put.crc32 != sum:
		t.Errorf("PUT with x-amz-checksum-crc32 %q, want the body's %q", put.crc32, sum)
	case !strings.Contains(put.auth, "x-amz-checksum-crc32") || !strings.Contains(put.auth, "x-amz-content-sha256"):
		t.Errorf("the signature does not cover the checksum: %s", put.auth)
	}
	if _, err := st.get("chunk-0"); err != nil {
		t.Fatal(err)
	}
	// A GET has no body: the SDK's own empty-payload hash.
	if get := <-seen; get.sha256 == "UNSIGNED-PAYLOAD" || get.sha256 == "" {
		t.Errorf("GET with x-amz-content-sha256 %q, want the empty body's hash", get.sha256)
	}
}

// The client keeps as many idle connections to the store as uploads,
// read-ahead and readers use at once, not the SDK's 10.
func TestClientKeepsConnections(t *testing.T) {
	clientEnv(t, "http://127.0.0.1:1")
	api, err := newClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bc, ok := api.Options().HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("HTTP client %T, want the SDK's buildable client", api.Options().HTTPClient)
	}
	if n := bc.GetTransport().MaxIdleConnsPerHost; n != idleConnsPerHost {
		t.Errorf("%d idle connections kept per host, want %d", n, idleConnsPerHost)
	}
}

// A chunk read back is checked against the CRC32 its PUT stored (the
// SDK's response validation, on by default): a body that does not match
// fails the read rather than being taken as the chunk, whether it is
// shorter than the chunk, as long or longer. The SDK's own setting
// AWS_RESPONSE_CHECKSUM_VALIDATION=when_required turns the check off.
func TestReadChecksChecksum(t *testing.T) {
	stored := make([]byte, 64<<10)
	for i := range stored {
		stored[i] = byte(rand.N(256))
	}
	var mu sync.Mutex
	body, sum := stored, crc32.ChecksumIEEE(stored)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, s := body, sum
		mu.Unlock()
		if r.Header.Get("X-Amz-Checksum-Mode") == "ENABLED" {
			w.Header().Set("X-Amz-Checksum-Crc32",
				base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, s)))
		}
		w.Header().Set("ETag", `"etag"`)
		w.Write(b)
	}))
	defer srv.Close()
	clientEnv(t, srv.URL)
	read := func(n int) ([]byte, error) {
		t.Helper()
		api, err := newClient(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st := NewStore(api, "bucket", "vol")
		st.Timeout = 300 * time.Millisecond // no retries to speak of: a check that fails fails again
		p := make([]byte, n)
		return p, st.readInto("chunk-0", p)
	}
	for _, n := range []int{len(stored), len(stored) + 1, len(stored) - 1} {
		if p, err := read(n); err != nil || !bytes.Equal(p[:min(n, len(stored))], stored[:min(n, len(stored))]) {
			t.Fatalf("read of %d bytes of a sound chunk: %v, or other bytes", n, err)
		}
	}
	mu.Lock()
	body = bytes.Clone(stored)
	body[len(body)-1] ^= 1 // a bit flipped in the store or on the way
	mu.Unlock()
	for _, n := range []int{len(stored), len(stored) + 1, len(stored) - 1} {
		if _, err := read(n); err == nil {
			t.Errorf("read of %d bytes of a chunk whose body does not match its checksum: no error", n)
		}
	}
	t.Setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
	if p, err := read(len(stored)); err != nil || !bytes.Equal(p, body) {
		t.Errorf("read with the check off: %v, or other bytes", err)
	}
}
