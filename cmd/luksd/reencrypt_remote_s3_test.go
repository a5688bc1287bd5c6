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
