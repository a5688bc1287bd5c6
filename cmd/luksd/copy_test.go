package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/luksd/luksd/blockdev/s3/s3test"
	"github.com/luksd/luksd/internal/testtool"
)

// luksd copy moves a cryptsetup volume into the store and back: the
// store keeps only the chunks that are not all zeros, the volume served
// from the store takes writes, and the copy back opens in cryptsetup and
// decrypts (its key, an independent XTS) to what was written.
func TestCopyToS3AndBack(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	img, key := serveFormat(t, dir, 40<<20, "--type", "luks2")
	bucket := srv.Bucket()
	loc := "s3://" + bucket + "/copied"

	luksd(t, nil, "copy", img, loc).expect(t, 0, "")
	out, err := srv.Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{
		Bucket: aws.String(bucket), Prefix: aws.String("copied/chunk-")})
	if err != nil {
		t.Fatal(err)
	}
	// 10 chunks of 4 MiB; the data area (6 chunks) is all zeros.
	if n := len(out.Contents); n == 0 || n > 4 {
		t.Fatalf("%d chunk objects after copying a new 40 MiB volume, want the header's (1-4)", n)
	}
	if r := luksd(t, nil, "luksDump", loc); r.code != 0 || !strings.Contains(r.stdout, "LUKS header information") {
		t.Fatalf("luksDump of the copy: %d %s", r.code, r.stderr)
	}

	sock := filepath.Join(dir, "nbd.sock")
	p := startServe(t, sock, "--key-file", key, loc)
	// Neither end of a copy may be open elsewhere.
	luksd(t, nil, "copy", "-q", img, loc).expect(t, exitBusy, "in use")
	data := make([]byte, 5<<20)
	rand.Read(data)
	src := filepath.Join(dir, "src")
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", "--flush", src, p.uri())
	p.stop(t)

	back := filepath.Join(dir, "back.img")
	luksd(t, nil, "copy", loc, back).expect(t, 0, "")
	// A new file stays sparse where the volume is zeros: 16 MiB of
	// header and 5 MiB of data of its 40 are written.
	var st syscall.Stat_t
	if err := syscall.Stat(back, &st); err != nil || st.Size != 40<<20 || st.Blocks*512 > 30<<20 {
		t.Fatalf("the new copy: size %d, %d bytes allocated (%v)", st.Size, st.Blocks*512, err)
	}
	vk, off := serveVolumeKey(t, back, key)
	if pt := xtsDecrypt(t, back, vk, off, 5<<20, 4096); !bytes.Equal(pt, data) {
		t.Fatal("the copy back does not decrypt to what was written to the S3 volume")
	}

	// An existing destination is overwritten (with -q), but not a smaller one.
	luksd(t, nil, "copy", "-q", back, img).expect(t, 0, "")
	a, _ := os.ReadFile(back)
	b, _ := os.ReadFile(img)
	if !bytes.Equal(a, b) {
		t.Fatal("copy over an existing image differs")
	}
	luksd(t, nil, "copy", "-q", back, testtool.ImageAt(t, dir, "small", 1<<20)).expect(t, exitDevice, "too small")
	luksd(t, nil, "copy", filepath.Join(dir, "none"), back).expect(t, exitDevice, "does not exist")
}
