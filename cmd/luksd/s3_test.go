package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/luksd/luksd/blockdev/s3"
	"github.com/luksd/luksd/blockdev/s3/s3test"
	"github.com/luksd/luksd/internal/testtool"
)

// s3Ciphertext copies the volume's raw bytes out of the store into a file.
func s3Ciphertext(t *testing.T, location, dir string) string {
	t.Helper()
	st, err := s3.Connect(location)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s3.OpenVolume(st, s3.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := make([]byte, v.Size())
	if _, err := v.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "copy.img")
	if err := os.WriteFile(img, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return img
}

// A volume in a real object store (SeaweedFS) is made by luksFormat
// --device-size, read by the header verbs, and served over NBD to real
// clients; after their flushes the server is killed (kill -9), and the
// ciphertext in the store, copied to a file, opens in cryptsetup and
// decrypts (with cryptsetup's key and an independent XTS) to what the
// clients wrote.
func TestS3FormatServeAndCryptsetup(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("s3 test passphrase"), 0o600)
	loc := "s3://" + srv.Bucket() + "/volumes/one"
	cheap := []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}

	luksd(t, nil, append([]string{"luksFormat", "-q", "--device-size", "40M", "--key-file", key, loc}, cheap...)...).expect(t, 0, "")
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--key-file", key, loc).expect(t, exitBusy, "a volume exists")
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--key-file", key, testtool.ImageAt(t, dir, "f", 1<<20)).
		expect(t, exitParams, "Option --device-size is not allowed with luksFormat action.")
	if r := luksd(t, nil, "luksDump", loc); r.code != 0 || !strings.Contains(r.stdout, "offset: 16777216 [bytes]") {
		t.Fatalf("luksDump %s: %d %s%s", loc, r.code, r.stdout, r.stderr)
	}
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, loc).expect(t, 0, "")
	luksd(t, []byte("wrong"), "open", "--test-passphrase", loc).expect(t, exitPermission, "No key available with this passphrase.")

	sock := filepath.Join(dir, "nbd.sock")
	p := startServe(t, sock, "--key-file", key, loc)
	// The lease in the store keeps a second server out.
	luksd(t, nil, "serve", "--socket", filepath.Join(dir, "second.sock"), "--key-file", key, loc).
		expect(t, exitBusy, "in use")
	info := testtool.Run(t, "nbdinfo", p.uri())
	for _, want := range []string{"export-size: 25165824", "can_flush: true", "can_trim: false"} {
		if !strings.Contains(info, want) {
			t.Fatalf("nbdinfo lacks %q:\n%s", want, info)
		}
	}
	data := make([]byte, 6<<20)
	rand.Read(data)
	src := filepath.Join(dir, "src")
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", "--flush", "--connections=4", src, p.uri())
	testtool.Run(t, "qemu-io", "--image-opts", "-c", "write -P 0x44 4194816 512", "-c", "write -P 0x55 20M 1536",
		"-c", "flush", "driver=nbd,server.type=unix,server.path="+sock)
	// Killed at once after the flushes (no close, no last flush): the
	// store holds every write they covered, and the next server on this
	// host takes the dead one's lease over at once.
	p.cmd.Process.Kill()
	<-p.exited
	want := make([]byte, 24<<20)
	copy(want, data)
	copy(want[4<<20+512:], bytes.Repeat([]byte{0x44}, 512))
	copy(want[20<<20:], bytes.Repeat([]byte{0x55}, 1536))

	img := s3Ciphertext(t, loc, dir)
	vk, off := serveVolumeKey(t, img, key)
	if off != 16<<20 {
		t.Fatalf("cryptsetup reads data offset %d", off)
	}
	pt := xtsDecrypt(t, img, vk, off, 24<<20, 4096)
	if !bytes.Equal(pt[:6<<20], want[:6<<20]) || !bytes.Equal(pt[20<<20:20<<20+1536], want[20<<20:20<<20+1536]) {
		t.Fatal("the store's ciphertext does not decrypt (cryptsetup's key, x/crypto/xts) to what was written")
	}

	// Served again, read-only: the data is there.
	p = startServe(t, sock, "--key-file", key, "--readonly", loc)
	out := filepath.Join(dir, "out")
	testtool.Run(t, "nbdcopy", p.uri(), out)
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got[:6<<20], want[:6<<20]) || !bytes.Equal(got[20<<20:20<<20+1536], want[20<<20:20<<20+1536]) {
		t.Fatal("data read back through a new serve differs")
	}
	p.stop(t)
}

// Credentials come from the SDK's sources only; wrong or missing ones
// are one line and exit 2, a location with no volume exit 4.
func TestS3CredentialsAndMissingVolume(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	loc := "s3://" + srv.Bucket() + "/v"
	luksd(t, nil, "luksDump", loc).expect(t, exitDevice, "Device "+loc+" does not exist or access denied.")
	luksd(t, nil, "luksDump", "s3://"+srv.Bucket()).expect(t, exitDevice, "does not exist or access denied.")

	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	luksd(t, nil, "luksDump", loc).expect(t, exitPermission, "access denied (SignatureDoesNotMatch")
	t.Setenv("AWS_ACCESS_KEY_ID", "nobody")
	luksd(t, nil, "luksFormat", "-q", "--device-size", "20M", loc).expect(t, exitPermission, "access denied (InvalidAccessKeyId")
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	luksd(t, nil, "luksDump", loc).expect(t, exitPermission, "no credentials found")

	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)

	// Over TLS, with a private CA: refused until AWS_CA_BUNDLE names it.
	t.Setenv("AWS_ENDPOINT_URL", srv.TLSEndpoint)
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	luksd(t, nil, "luksDump", loc).expect(t, exitDevice, "certificate signed by unknown authority")
	t.Setenv("AWS_CA_BUNDLE", srv.CAFile)
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("tls"), 0o600)
	luksd(t, nil, "luksFormat", "-q", "--device-size", "20M", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--key-file", key, loc).expect(t, 0, "")
	luksd(t, nil, "open", "--test-passphrase", "--key-file", key, loc).expect(t, 0, "")

	// A store that does not answer is tried again until LUKSD_S3_TIMEOUT.
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("LUKSD_S3_TIMEOUT", "1")
	luksd(t, nil, "luksDump", loc).expect(t, exitDevice, "connection refused")
}

// fio writes 4 KiB blocks at random (over three chunks) at iodepth 32
// through `luksd serve` of an S3 volume whose cache holds two chunks and
// lets one be dirty (so writes wait for uploads and chunks are evicted
// and read back all the time), and verifies them; a new server, on a
// cold cache, verifies them again from the store. Then the store is
// killed and restarted under a writing fio, which must see no error.
func TestS3FioVerify(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	t.Setenv("LUKSD_S3_CACHE_MIB", "8")
	t.Setenv("LUKSD_S3_DIRTY_MIB", "4")
	// A restart of weed on a loaded machine may take tens of seconds:
	// the store timeout (60 s by default; the lease follows it, twice as
	// long) must outlast it, or the writes fail by design.
	t.Setenv("LUKSD_S3_TIMEOUT", "300")
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("fio"), 0o600)
	loc := "s3://" + srv.Bucket() + "/fio"
	luksd(t, nil, "luksFormat", "-q", "--device-size", "40M", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
		"--key-file", key, loc).expect(t, 0, "")
	sock := filepath.Join(dir, "nbd.sock")
	fioPath := testtool.Need(t, "fio")
	run := func(p *serveProc, extra ...string) error {
		args := append([]string{"--name=verify", "--ioengine=nbd", "--uri=" + p.uri(), "--rw=randwrite", "--bs=4k",
			"--iodepth=32", "--size=12M", "--randseed=7", "--verify=crc32c", "--verify_fatal=1",
			"--verify_state_save=0"}, extra...)
		cmd := exec.Command(fioPath, args...)
		cmd.Dir = dir // fio leaves state files in its working directory
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "err= 0") {
			return fmt.Errorf("fio %v: %v\n%s", extra, err, out)
		}
		return nil
	}
	fio := func(p *serveProc, extra ...string) {
		t.Helper()
		if err := run(p, extra...); err != nil {
			t.Fatal(err)
		}
	}
	p := startServe(t, sock, "--key-file", key, loc)
	fio(p, "--do_verify=1")
	p.stop(t)
	p = startServe(t, sock, "--key-file", key, loc)
	fio(p, "--verify_only=1")

	// The store is killed (kill -9) while fio writes, and restarted: the
	// requests that needed it wait for it (retries with backoff), nothing
	// fails, and a new server verifies every write from the store.
	done := make(chan error, 1)
	go func() { done <- run(p, "--randseed=8", "--size=8M", "--do_verify=0") }()
	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("fio ended (%v) before the store was killed: the outage went untested", err)
	default:
	}
	srv.Kill()
	down := time.Now()
	time.Sleep(time.Second)
	srv.Restart()
	outage := time.Since(down)
	if err := <-done; err != nil {
		// The log says which request failed and why (a lapsed lease, a
		// store timeout); the outage says whether the store was down
		// longer than the limits above allow.
		p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("while the store was down %v (lease %s s, timeout %s s): %v\nluksd serve:\n%s\nweed:\n%s",
			outage.Round(time.Millisecond), os.Getenv("LUKSD_S3_LEASE_SECONDS"), os.Getenv("LUKSD_S3_TIMEOUT"),
			err, p.stderr, srv.LogTail())
	}
	t.Logf("the store was down %v", outage.Round(time.Millisecond))
	p.stop(t)
	p = startServe(t, sock, "--key-file", key, loc)
	fio(p, "--randseed=8", "--size=8M", "--verify_only=1")
	p.stop(t)
}

// luksFormat --chunk-size picks the size of a new S3 volume's chunk
// objects, and the manifest records it: data written through serve lands
// in chunks of that size, and the volume copied out to a file opens in
// cryptsetup and decrypts to what was written. Sizes the store does not
// keep, and --chunk-size on an existing volume, are refused.
func TestS3ChunkSize(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("chunky"), 0o600)
	bucket := srv.Bucket()
	loc := "s3://" + bucket + "/chunky"
	format := func(extra ...string) result {
		return luksd(t, nil, append([]string{"luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
			"--key-file", key, loc}, extra...)...)
	}
	format("--device-size", "32M", "--chunk-size", "6000").expect(t, exitParams, "Chunk size must be a multiple of 4096 bytes")
	format("--device-size", "32M", "--chunk-size", "12k").expect(t, exitParams, "chunk size 12288 is not a power of two")
	format("--device-size", "32M", "--chunk-size", "1x").expect(t, exitParams, "Invalid size specification in parameter --chunk-size.")
	format("--device-size", "32M", "--chunk-size", "256k").expect(t, 0, "")
	format("--chunk-size", "1M").expect(t, exitParams, "Option --chunk-size is allowed only with --device-size")

	st, err := s3.Connect(loc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s3.ReadManifest(st)
	if err != nil || m.ChunkSize != 256<<10 || m.Size != 32<<20 {
		t.Fatalf("manifest %+v, %v; want 256 KiB chunks of a 32 MiB volume", m, err)
	}

	sock := filepath.Join(dir, "nbd.sock")
	p := startServe(t, sock, "--key-file", key, loc)
	data := make([]byte, 3<<20)
	rand.Read(data)
	src := filepath.Join(dir, "src")
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", "--flush", src, p.uri())
	p.stop(t)

	// The plaintext's 3 MiB from the data offset (16 MiB) are chunks 64
	// to 75 of 256 KiB, each stored whole; nothing past them.
	out, err := srv.Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{
		Bucket: aws.String(bucket), Prefix: aws.String("chunky/chunk-")})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for _, o := range out.Contents {
		stored[strings.TrimPrefix(aws.ToString(o.Key), "chunky/")] = aws.ToInt64(o.Size)
	}
	for idx := 64; idx < 76; idx++ {
		if n := stored[fmt.Sprintf("chunk-%016x", idx)]; n != 256<<10 {
			t.Fatalf("chunk %d holds %d bytes, want 256 KiB (stored: %v)", idx, n, stored)
		}
	}
	if _, ok := stored[fmt.Sprintf("chunk-%016x", 76)]; ok || len(stored) > 76 {
		t.Fatalf("chunks past the data written are stored: %v", stored)
	}

	// The data offset is aligned to chunks larger than LUKS2's default
	// 16 MiB offset, and LUKS1's default 2 MiB to the default 4 MiB
	// chunks, so that no chunk holds header and data; --offset is kept.
	for _, c := range []struct {
		prefix string
		args   []string
		want   string
	}{
		{"big", []string{"--device-size", "96M", "--chunk-size", "32M"}, "offset: 33554432 [bytes]"},
		{"big-offset", []string{"--device-size", "96M", "--chunk-size", "32M", "--offset", "32768"}, "offset: 16777216 [bytes]"},
		{"luks1", []string{"--device-size", "32M", "--type", "luks1"}, "Payload offset:\t8192"},
	} {
		at := "s3://" + bucket + "/" + c.prefix
		luksd(t, nil, append([]string{"luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
			"--key-file", key, at}, c.args...)...).expect(t, 0, "")
		if dump := luksd(t, nil, "luksDump", at).stdout; !strings.Contains(dump, c.want) {
			t.Errorf("luksFormat %v: luksDump does not say %q:\n%s", c.args, c.want, dump)
		}
	}

	img := filepath.Join(dir, "copy.img")
	luksd(t, nil, "copy", loc, img).expect(t, 0, "")
	vk, off := serveVolumeKey(t, img, key)
	if pt := xtsDecrypt(t, img, vk, off, 3<<20, 4096); !bytes.Equal(pt, data) {
		t.Fatal("the copy of a 256 KiB-chunk volume does not decrypt (cryptsetup's key) to what was written")
	}
}

// The memory of `luksd serve` of an S3 volume is bounded by its cache:
// under a write load that dirties many times the cache (sequential 1 MiB
// writes across the volume, then random 4 KiB writes that read chunks
// back), its peak resident set stays under the cache size plus what a
// serve holds besides (s3MemoryOverheadMiB).
func TestS3ServeMemoryBound(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	const cacheMiB = 32
	t.Setenv("LUKSD_S3_CACHE_MIB", strconv.Itoa(cacheMiB))
	t.Setenv("LUKSD_S3_DIRTY_MIB", "16")
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("memory"), 0o600)
	loc := "s3://" + srv.Bucket() + "/memory"
	luksd(t, nil, "luksFormat", "-q", "--device-size", "272M", "--chunk-size", "256k", "--pbkdf", "pbkdf2",
		"--pbkdf-force-iterations", "1000", "--key-file", key, loc).expect(t, 0, "")
	p := startServe(t, filepath.Join(dir, "nbd.sock"), "--key-file", key, loc)
	idle := testtool.ProcStatusKiBOf(t, p.cmd.Process.Pid, "VmRSS")

	fio := func(args ...string) {
		t.Helper()
		cmd := exec.Command(testtool.Need(t, "fio"), append([]string{"--name=load", "--ioengine=nbd", "--uri=" + p.uri(),
			"--size=256M", "--end_fsync=1"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fio %v: %v\n%s", args, err, out)
		}
	}
	fio("--rw=write", "--bs=1M", "--iodepth=8")
	seq := testtool.ProcStatusKiBOf(t, p.cmd.Process.Pid, "VmHWM")
	fio("--rw=randwrite", "--bs=4k", "--iodepth=32", "--io_size=4M", "--randseed=3", "--fsync=256")
	peak := testtool.ProcStatusKiBOf(t, p.cmd.Process.Pid, "VmHWM")
	t.Logf("peak after the sequential writes: %d KiB", seq)
	p.stop(t)
	limit := int64(cacheMiB+s3MemoryOverheadMiB) << 10
	t.Logf("luksd serve: %d KiB resident idle, peak %d KiB under writes (limit %d KiB)", idle, peak, limit)
	if peak > limit {
		t.Fatalf("luksd serve of an S3 volume with a %d MiB cache peaked at %d KiB resident, over %d KiB",
			cacheMiB, peak, limit)
	}
}

// s3MemoryOverheadMiB is what a serve of an S3 volume may hold besides
// its cache, under TestS3ServeMemoryBound's load: 24 MiB for an idle
// daemon (code, Go runtime, SDK; 22 MiB measured), 16 MiB for the
// requests in flight (fio's 8 x 1 MiB, in plaintext and ciphertext
// buffers), 4 MiB for the upload snapshots (8 x 256 KiB on the Go heap,
// which the collector may let grow to twice that) and 20 MiB for the
// heap the SDK and HTTP grow under load with the collector's slack. The
// cache itself is outside the Go heap (chunkmem.go): on the heap it took
// up to twice its size (110 MiB peak here, where 85 MiB now).
const s3MemoryOverheadMiB = 64
