package main

import (
	"testing"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// A volume in a real object store (SeaweedFS) is reencrypted offline
// and online by its s3:// location, with a kill -9 in each.
func TestReencryptRemoteS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	img, model := reencImage(w, "base.img", remoteCase, key, 40<<20)
	loc := "s3://" + srv.Bucket() + "/reenc"
	// Small chunks: each step of the reencryption uploads the chunks it
	// wrote, header and data.
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--chunk-size", "256k", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, loc).ok(t)
	luksd(t, nil, "copy", "-q", img, loc).ok(t)
	model = reencryptRemote(t, w, loc, key, model)
	out := w.path("out.img")
	luksd(t, nil, "copy", "-q", loc, out).ok(t)
	w.checkData(out, key, remoteCase, model)
}

// An S3 volume whose chunks hold header and data together (32 MiB
// chunks, 16 MiB of header: an explicit --offset, or a volume copied
// there) is not reencrypted online: the daemon's
// cache and the header writer's would each upload the other's half
// stale. The refusal is one line, and the header is left unmarked.
func TestReencryptRemoteS3SharedChunk(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w := newWorkspace(t)
	key := w.key("key", "pw")
	loc := "s3://" + srv.Bucket() + "/shared"
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--chunk-size", "32M", "--offset", "32768", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, loc).ok(t)
	before := luksd(t, nil, "luksDump", loc).ok(t).stdout
	p := startServe(t, w.path("serve.sock"), "-d", key, loc)
	luksd(t, nil, "reencrypt", "-q", "-d", key, loc).expect(t, exitParams,
		"Online reencryption of "+loc+" is not supported by luksd: its 33554432-byte chunks hold header and data together. Close it and reencrypt it offline.")
	p.stop(t)
	if after := luksd(t, nil, "luksDump", loc).ok(t).stdout; after != before {
		t.Fatalf("a refused online reencryption changed the header:\n%s\n---\n%s", before, after)
	}
}
