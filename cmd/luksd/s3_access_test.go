package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/luksd/luksd/blockdev/s3/s3test"
	"github.com/luksd/luksd/internal/testtool"
)

// Read-only credentials (a backup host's) open a volume read-only and
// copy it out, while nobody writes it; a writer's lease refuses them
// (exit 5) with the holder named, and a read-write open with them fails
// with the store's own refusal of the lease (exit 2), not "does not
// exist". status takes the location.
func TestS3ReadOnlyCredentials(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("s3 access test"), 0o600)
	loc := "s3://" + srv.Bucket() + "/ro"
	luksd(t, nil, "luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--device-size", "24M", "--key-file", key, loc).expect(t, 0, "")

	// A writer holds the lease: status by location shows it, and a
	// reader is refused with the holder named.
	w := startServe(t, filepath.Join(dir, "w.sock"), "--name", "s3access", "--key-file", key, loc)
	r := luksd(t, nil, "status", loc+"/")
	if r.code != 0 || !strings.Contains(r.stdout, "is active") || !strings.Contains(r.stdout, "lease:   host ") ||
		!strings.Contains(r.stdout, "chunk size: 4194304 bytes") {
		t.Fatalf("status %s: %d\n%s%s", loc, r.code, r.stdout, r.stderr)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.ReadOnlyAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.ReadOnlySecretKey)
	img := filepath.Join(dir, "copy.img")
	luksd(t, nil, "copy", loc, img).expect(t, exitBusy, "which is in use (already mapped or mounted). Its lease is held by ")
	w.stop(t)
	if r := luksd(t, nil, "status", loc); r.code != exitDevice || r.stdout != loc+" is inactive.\n" {
		t.Fatalf("status %s of a closed volume: %d %q", loc, r.code, r.stdout)
	}

	// Nobody writes: the reader copies and serves read-only.
	luksd(t, nil, "copy", loc, img).expect(t, 0, "")
	testtool.Run(t, "cryptsetup", "open", "--test-passphrase", "--key-file", key, img)
	p := startServe(t, filepath.Join(dir, "r.sock"), "--readonly", "--key-file", key, loc)
	if info := testtool.Run(t, "nbdinfo", p.uri()); !strings.Contains(info, "is_read_only: true") {
		t.Fatalf("nbdinfo of a read-only serve:\n%s", info)
	}
	p.stop(t)

	// Writing needs the lease, which these credentials cannot write.
	luksd(t, nil, "serve", "--socket", filepath.Join(dir, "x.sock"), "--key-file", key, loc).
		expect(t, exitPermission, "luksd: put "+loc+"/luksd-lease.json: access denied (AccessDenied")
}

// Another host's lease names that host and the documented way to break it.
func TestS3BusyNamesHolder(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("s3 access test"), 0o600)
	bucket := srv.Bucket()
	loc := "s3://" + bucket + "/held"
	luksd(t, nil, "luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--device-size", "24M", "--key-file", key, loc).expect(t, 0, "")
	lease := `{"host":"elsewhere","boot_id":"b","pid":77,"pid_start":"1","generation":9,"expires":"2099-01-01T00:00:00Z"}`
	putObject(t, srv, bucket, "held/luksd-lease.json", lease)
	want := "Cannot use device " + loc + " which is in use (already mapped or mounted). Its lease is held by host elsewhere (pid 77) until "
	luksd(t, nil, "serve", "--socket", filepath.Join(dir, "s.sock"), "--key-file", key, loc).expect(t, exitBusy, want)
	luksd(t, nil, "serve", "--readonly", "--socket", filepath.Join(dir, "s.sock"), "--key-file", key, loc).
		expect(t, exitBusy, "`aws s3 rm "+loc+"/luksd-lease.json` breaks it.")
	if r := luksd(t, nil, "status", loc); r.code != exitDevice || !strings.Contains(r.stdout, "lease:   host elsewhere (pid 77) until ") {
		t.Fatalf("status %s: %d %q", loc, r.code, r.stdout)
	}
}

// A luksFormat --device-size that fails (a size too small, no key file)
// leaves no volume behind: the next one creates it.
func TestS3FormatFailureLeavesNothing(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("s3 access test"), 0o600)
	bucket := srv.Bucket()
	loc := "s3://" + bucket + "/fail"
	format := func(args ...string) result {
		return luksd(t, nil, append([]string{"luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"},
			append(args, loc)...)...)
	}
	format("--device-size", "1M", "--key-file", key).expect(t, exitParams, "Cannot format device: device is too small")
	format("--device-size", "24M", "--key-file", filepath.Join(dir, "none")).expect(t, exitParams, "Failed to open key file.")
	format("--type", "luks1", "--device-size", "1M", "--key-file", key).expect(t, exitParams, "device is too small")
	if n := countObjects(t, srv, bucket, "fail/"); n != 0 {
		t.Fatalf("%d objects left after failed formats", n)
	}
	format("--device-size", "24M", "--key-file", key).expect(t, 0, "")
}

// putObject writes object key of bucket, as another host would.
func putObject(t *testing.T, srv *s3test.Server, bucket, key, body string) {
	t.Helper()
	_, err := srv.Client().PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// countObjects counts the objects of bucket under prefix.
func countObjects(t *testing.T, srv *s3test.Server, bucket, prefix string) int {
	t.Helper()
	out, err := srv.Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{
		Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}
