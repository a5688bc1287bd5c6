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

// An NBD export is always an existing destination (its server has it;
// there is nothing to create): luksd copy writes every block of a
// cryptsetup volume to it, zeros included, after the overwrite dialog
// (-q skips it), and cryptsetup opens the file the export serves. An
// export smaller than the source or read-only is refused in one line,
// before anything is written; and an export copies back to a new file
// and to another export.
func TestCopyToNBD(t *testing.T) {
	t.Setenv("LUKSD_RUN_DIR", t.TempDir())
	dir := t.TempDir()
	const size = 32 << 20
	img, key := serveFormat(t, dir, size, "--type", "luks2")
	// Ciphertext-like bytes in the data area, zeros after them.
	data := make([]byte, 4<<20)
	rand.Read(data)
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 16<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want, _ := os.ReadFile(img)

	// The export's file holds other bytes where the source has zeros:
	// skipping zero blocks would leave them.
	junk := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{0xa5}, n), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	disk := junk("export.img", size)
	addr := testtool.FreeLoopbackPort(t)
	host, port, _ := strings.Cut(addr, ":")
	testtool.StartPeerServer(t, "tcp", addr, "nbdkit", "-f", "-i", host, "-p", port, "file", disk)
	uri := "nbd://" + addr + "/"

	s := startOnTTY(t, "copy", img, uri)
	s.answer("This will overwrite data on "+uri+" irrevocably.", 1, "no")
	if code, screen := s.wait(); code != exitParams || !strings.Contains(screen, "Operation aborted.") {
		t.Fatalf("copy to an NBD export declined: exit %d:\n%s", code, screen)
	}
	if got, _ := os.ReadFile(disk); !bytes.Equal(got, bytes.Repeat([]byte{0xa5}, size)) {
		t.Fatal("a declined copy wrote to the export")
	}

	luksd(t, nil, "copy", "-q", img, uri).expect(t, 0, "")
	if got, _ := os.ReadFile(disk); !bytes.Equal(got, want) {
		t.Fatal("the export's file differs from the source after the copy")
	}
	testtool.Run(t, "cmp", img, disk)
	testtool.Run(t, "cryptsetup", "open", "--test-passphrase", "--key-file", key, disk)

	small := junk("small.img", 8<<20)
	smallSock := filepath.Join(dir, "small.sock")
	testtool.StartPeerServer(t, "unix", smallSock, "nbdkit", "-f", "-U", smallSock, "file", small)
	smallURI := "nbd+unix:///?socket=" + smallSock
	luksd(t, nil, "copy", "-q", img, smallURI).
		expect(t, exitDevice, "Device "+smallURI+" is too small (8388608 bytes, the source has 33554432).")

	ro := junk("ro.img", size)
	roSock := filepath.Join(dir, "ro.sock")
	testtool.StartPeerServer(t, "unix", roSock, "nbdkit", "-f", "-r", "-U", roSock, "file", ro)
	roURI := "nbd+unix:///?socket=" + roSock
	luksd(t, nil, "copy", "-q", img, roURI).expect(t, exitDevice, "Device "+roURI+" is read-only.")
	if got, _ := os.ReadFile(ro); !bytes.Equal(got, bytes.Repeat([]byte{0xa5}, size)) {
		t.Fatal("a refused copy changed the read-only export's file")
	}

	// From an export: to a new file, and to another export.
	back := filepath.Join(dir, "back.img")
	luksd(t, nil, "copy", uri, back).expect(t, 0, "")
	testtool.Run(t, "cmp", img, back)
	other := junk("other.img", size)
	otherSock := filepath.Join(dir, "other.sock")
	testtool.StartPeerServer(t, "unix", otherSock, "nbdkit", "-f", "-U", otherSock, "file", other)
	luksd(t, nil, "copy", "-q", uri, "nbd+unix:///?socket="+otherSock).expect(t, 0, "")
	testtool.Run(t, "cmp", img, other)
	testtool.Run(t, "cryptsetup", "open", "--test-passphrase", "--key-file", key, other)

	// Neither end may be open elsewhere: a luksd serve of the export on
	// this host is the only claim there is on it.
	srv := startServe(t, filepath.Join(dir, "luksd.sock"), "--key-file", key, uri)
	luksd(t, nil, "copy", "-q", back, uri).expect(t, exitBusy, "which is in use")
	luksd(t, nil, "copy", "-q", uri, back).expect(t, exitBusy, "which is in use")
	srv.stop(t)
	testtool.Run(t, "cmp", img, disk)
}
