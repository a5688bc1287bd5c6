package main

import (
	"testing"

	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// s3ReencSetup starts a SeaweedFS for the test, with a daemon run folder
// of its own, and returns a workspace, a key file and the location of a
// volume (not yet made) under prefix.
func s3ReencSetup(t *testing.T, prefix string) (w *workspace, key, loc string) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	w = newWorkspace(t)
	return w, w.key("key", "pw"), "s3://" + srv.Bucket() + "/" + prefix
}

// A volume in a real object store (SeaweedFS) is reencrypted offline
// and online by its s3:// location, with a kill -9 in each.
func TestReencryptRemoteS3(t *testing.T) {
	w, key, loc := s3ReencSetup(t, "reenc")
	img, model := reencImage(w, "base.img", remoteCase, key, 40<<20)
	// Small chunks: each step of the reencryption uploads the chunks it
	// wrote, header and data.
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--chunk-size", "256k", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, loc).ok(t)
	luksd(t, nil, "copy", "-q", img, loc).ok(t)
	model = reencryptRemote(t, w, loc, key, model, settleS3)
	out := w.path("out.img")
	luksd(t, nil, "copy", "-q", loc, out).ok(t)
	w.checkData(out, key, remoteCase, model)
}

// An S3 volume whose chunks hold header and data together (32 MiB
// chunks, 16 MiB of header: an explicit --offset, or a volume copied
// there) is neither reencrypted online nor has its header edited while
// it is served: the daemon's cache and the header writer's would each
// upload the other's half stale. Each refusal is one line, and the
// header is left as it was; once the server has gone, edits go ahead.
func TestReencryptRemoteS3SharedChunk(t *testing.T) {
	w, key, loc := s3ReencSetup(t, "shared")
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--chunk-size", "32M", "--offset", "32768", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, loc).ok(t)
	before := luksd(t, nil, "luksDump", loc).ok(t).stdout
	p := startServe(t, w.path("serve.sock"), "-d", key, loc)
	luksd(t, nil, "reencrypt", "-q", "-d", key, loc).expect(t, exitParams,
		"Online reencryption of "+loc+" is not supported by luksd: its 33554432-byte chunks hold header and data together. Close it and reencrypt it offline.")
	other := w.key("other", "other passphrase")
	addKey := []string{"luksAddKey", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", key, loc, other}
	luksd(t, nil, addKey...).expect(t, exitBusy, "Device "+loc+" is in use by host ")
	luksd(t, nil, addKey...).expect(t, exitBusy, "and its 33554432-byte chunks hold header and data together: close it to change its header.")
	p.stop(t)
	if after := luksd(t, nil, "luksDump", loc).ok(t).stdout; after != before {
		t.Fatalf("a refused online reencryption or key edit changed the header:\n%s\n---\n%s", before, after)
	}
	luksd(t, nil, addKey...).ok(t)
	luksd(t, nil, "open", "--test-passphrase", "--key-file", other, loc).ok(t)
}
