package nbd

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/internal/testtool"
)

// testExport is a crypt device over a temporary image file, served on a
// unix socket.
type testExport struct {
	srv    *Server
	dev    *dmcrypt.Device
	sock   string
	image  string
	key    []byte
	opts   dmcrypt.DeviceOptions
	logMu  sync.Mutex
	logged []string
	done   chan error
}

const testSegOffset = 1 << 20

// newCryptDevice opens image as an aes-xts-plain64 volume with key.
func newCryptDevice(t testing.TB, image string, key []byte, opts dmcrypt.DeviceOptions) *dmcrypt.Device {
	t.Helper()
	f, err := blockdev.OpenFile(image, opts.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dmcrypt.New("aes-xts-plain64", key)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dmcrypt.NewDevice(f, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startExport creates a size-byte plaintext volume and serves it.
func startExport(t testing.TB, size int64, sectorSize int, cfg Config, discards bool) *testExport {
	t.Helper()
	dir := t.TempDir()
	e := &testExport{image: filepath.Join(dir, "img"), sock: filepath.Join(dir, "nbd.sock"), key: make([]byte, 64)}
	rand.Read(e.key)
	if err := os.WriteFile(e.image, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(e.image, testSegOffset+size); err != nil {
		t.Fatal(err)
	}
	e.opts = dmcrypt.DeviceOptions{Offset: testSegOffset, SectorSize: sectorSize, AllowDiscards: discards, ReadOnly: cfg.ReadOnly}
	e.serve(t, cfg)
	return e
}

func (e *testExport) serve(t testing.TB, cfg Config) {
	t.Helper()
	e.dev = newCryptDevice(t, e.image, e.key, e.opts)
	cfg.Logf = func(f string, a ...any) {
		e.logMu.Lock()
		e.logged = append(e.logged, f)
		e.logMu.Unlock()
	}
	e.srv = NewServer(e.dev, cfg)
	l, err := ListenUnix(e.sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.done = make(chan error, 1)
	go func() { e.done <- e.srv.Serve(l) }()
	t.Cleanup(func() { e.stop(t) })
}

func (e *testExport) stop(t testing.TB) {
	if e.srv == nil {
		return
	}
	e.srv.Close()
	if err := <-e.done; err != ErrServerClosed {
		t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
	if err := e.dev.Flush(); err != nil {
		t.Error(err)
	}
	e.dev.Close()
	e.srv = nil
}

func (e *testExport) uri() string { return "nbd+unix:///?socket=" + e.sock }

// plaintext decrypts the whole volume straight from the image file.
func (e *testExport) plaintext(t testing.TB) []byte {
	t.Helper()
	d := newCryptDevice(t, e.image, e.key, dmcrypt.DeviceOptions{Offset: testSegOffset, SectorSize: e.opts.SectorSize, ReadOnly: true})
	defer d.Close()
	b := make([]byte, d.Size())
	if _, err := d.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNbdinfo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sector   int
		discards bool
		ro       bool
	}{
		{"xts512", 512, false, false},
		{"xts4096-discards", 4096, true, false},
		{"readonly", 4096, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startExport(t, 8<<20, tc.sector, Config{Name: "vol", ReadOnly: tc.ro}, tc.discards)
			var info struct {
				Exports []struct {
					Name      string `json:"export-name"`
					Size      int64  `json:"export-size"`
					ReadOnly  bool   `json:"is_read_only"`
					CanFlush  bool   `json:"can_flush"`
					CanFUA    bool   `json:"can_fua"`
					CanTrim   bool   `json:"can_trim"`
					CanZero   bool   `json:"can_zero"`
					CanMulti  bool   `json:"can_multi_conn"`
					MinBlock  int    `json:"block_size_minimum"`
					PrefBlock int    `json:"block_size_preferred"`
					MaxBlock  int    `json:"block_size_maximum"`
				} `json:"exports"`
				Structured bool `json:"structured"`
			}
			out := testtool.Run(t, "nbdinfo", "--json", e.uri())
			if err := json.Unmarshal([]byte(out), &info); err != nil || len(info.Exports) != 1 {
				t.Fatalf("nbdinfo --json: %v\n%s", err, out)
			}
			x := info.Exports[0]
			if x.Size != 8<<20 || x.CanFlush != true || x.CanMulti != true || x.ReadOnly != tc.ro ||
				x.CanFUA == tc.ro || x.CanZero == tc.ro || x.CanTrim != (tc.discards && !tc.ro) ||
				x.MinBlock != 1 || x.PrefBlock != tc.sector || x.MaxBlock != 32<<20 || !info.Structured {
				t.Fatalf("nbdinfo reports %+v (structured %v)", x, info.Structured)
			}
			// The export answers to its name as well as to "".
			if out := testtool.Run(t, "nbdinfo", "--size", "nbd+unix:///vol?socket="+e.sock); strings.TrimSpace(out) != "8388608" {
				t.Fatalf("nbdinfo --size of export \"vol\": %q", out)
			}
			cmd := exec.Command("nbdinfo", "--size", "nbd+unix:///other?socket="+e.sock)
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Fatalf("an unknown export name was accepted: %s", out)
			}
			if out := testtool.Run(t, "nbdinfo", "--list", "--json", e.uri()); !strings.Contains(out, `"vol"`) {
				t.Fatalf("nbdinfo --list does not show the export: %s", out)
			}
		})
	}
}

func TestQemuIOPatterns(t *testing.T) {
	for _, sector := range []int{512, 4096} {
		t.Run(map[int]string{512: "sector512", 4096: "sector4096"}[sector], func(t *testing.T) {
			e := startExport(t, 4<<20, sector, Config{}, true)
			// Unaligned 512-byte writes on 4096-byte sectors are
			// read-modify-write in the crypt layer.
			testtool.Run(t, "qemu-io", "--image-opts", "-c", "write -P 0xa5 0 1M",
				"-c", "write -P 0x5a 512 512", "-c", "write -P 0x11 4608 7680",
				"-c", "write -z 1048576 3584", "-c", "aio_write -P 0x22 2M 64k", "-c", "aio_flush",
				"-c", "discard 3M 64k", "-c", "flush",
				"driver=nbd,server.type=unix,server.path="+e.sock)
			out := testtool.Run(t, "qemu-io", "--image-opts", "-c", "read -P 0xa5 0 512",
				"-c", "read -P 0x5a 512 512", "-c", "read -P 0xa5 1024 3584",
				"-c", "read -P 0x11 4608 7680", "-c", "read -P 0xa5 12288 1036288",
				"-c", "read -P 0 1048576 3584", "-c", "read -P 0x22 2M 64k",
				"driver=nbd,server.type=unix,server.path="+e.sock)
			if strings.Contains(out, "Pattern verification failed") || strings.Count(out, "read ") != 7 {
				t.Fatalf("qemu-io reads:\n%s", out)
			}
			e.stop(t)
			pt := e.plaintext(t)
			want := bytes.Repeat([]byte{0xa5}, 1<<20)
			copy(want[512:], bytes.Repeat([]byte{0x5a}, 512))
			copy(want[4608:], bytes.Repeat([]byte{0x11}, 7680))
			if !bytes.Equal(pt[:1<<20], want) || !bytes.Equal(pt[1<<20:1<<20+3584], make([]byte, 3584)) ||
				!bytes.Equal(pt[2<<20:2<<20+65536], bytes.Repeat([]byte{0x22}, 65536)) {
				t.Fatal("the image does not decrypt to what qemu-io wrote")
			}
		})
	}
}

func TestQemuImgConvert(t *testing.T) {
	e := startExport(t, 4<<20, 4096, Config{Name: "vol"}, false)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.raw")
	data := make([]byte, 4<<20)
	rand.Read(data[:3<<20])
	os.WriteFile(src, data, 0o600)
	out := testtool.Run(t, "qemu-img", "info", "--output=json", "--image-opts", "driver=nbd,server.type=unix,export=vol,server.path="+e.sock)
	if !strings.Contains(out, `"virtual-size": 4194304`) {
		t.Fatalf("qemu-img info: %s", out)
	}
	testtool.Run(t, "qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", src, e.uri())
	back := filepath.Join(dir, "back.raw")
	testtool.Run(t, "qemu-img", "convert", "-f", "raw", "-O", "raw", e.uri(), back)
	got, _ := os.ReadFile(back)
	if !bytes.Equal(got, data) {
		t.Fatal("qemu-img convert round trip differs")
	}
	e.stop(t)
	if !bytes.Equal(e.plaintext(t), data) {
		t.Fatal("image does not decrypt to what qemu-img wrote")
	}
}

func TestNbdcopyMultiConn(t *testing.T) {
	e := startExport(t, 16<<20, 4096, Config{}, false)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := make([]byte, 16<<20)
	rand.Read(data)
	os.WriteFile(src, data, 0o600)
	testtool.Run(t, "nbdcopy", "--connections=4", "--requests=16", "--flush", src, e.uri())
	dst := filepath.Join(dir, "dst")
	testtool.Run(t, "nbdcopy", "--connections=4", "--requests=16", e.uri(), dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("nbdcopy round trip differs")
	}
	// Restart the server: the data is in the image.
	e.stop(t)
	if !bytes.Equal(e.plaintext(t), data) {
		t.Fatal("image does not decrypt to what nbdcopy wrote")
	}
	e.serve(t, Config{})
	os.Remove(dst)
	testtool.Run(t, "nbdcopy", e.uri(), dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("data read after a server restart differs")
	}
}

func TestFioVerify(t *testing.T) {
	// 4k blocks, and 512-byte blocks on 4096-byte sectors: 32 writes in
	// flight land in the same sectors and are read-modify-written at once.
	for _, tc := range []struct {
		name string
		bs   string
		size int64
	}{{"bs4k", "4k", 8 << 20}, {"bs512-on-4096-sectors", "512", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startExport(t, 16<<20, 4096, Config{}, false)
			fio := testtool.Need(t, "fio")
			cmd := exec.Command(fio, "--name=verify", "--ioengine=nbd", "--uri="+e.uri(),
				"--rw=randwrite", "--bs="+tc.bs, "--iodepth=32", "--size="+strconv.FormatInt(tc.size, 10),
				"--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--verify_state_save=0", "--output-format=json")
			cmd.Dir = t.TempDir() // fio leaves state files in its working directory
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("fio randwrite+verify: %v\n%s", err, out)
			}
			var res struct {
				Jobs []struct {
					Error int
					Write struct {
						IOBytes int64 `json:"io_bytes"`
					}
					Read struct {
						IOBytes int64 `json:"io_bytes"`
					}
				}
			}
			if i := bytes.IndexByte(out, '{'); i > 0 {
				out = out[i:] // fio may print notes before the JSON
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) != 1 {
				t.Fatalf("fio output: %v\n%s", err, out)
			}
			j := res.Jobs[0]
			if j.Error != 0 || j.Write.IOBytes != tc.size || j.Read.IOBytes != tc.size {
				t.Fatalf("fio: error %d, wrote %d, verified %d bytes (want %d each)", j.Error, j.Write.IOBytes, j.Read.IOBytes, tc.size)
			}
		})
	}
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	e := startExport(t, 1<<20, 512, Config{ReadOnly: true}, false)
	cmd := exec.Command(testtool.Need(t, "qemu-io"), "--image-opts", "-c", "write -P 1 0 4k",
		"driver=nbd,server.type=unix,server.path="+e.sock)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "ermission denied") && !strings.Contains(string(out), "read-only") && !strings.Contains(string(out), "read only") {
		t.Fatalf("qemu-io write to a read-only export: %s", out)
	}
	// At the protocol level the answer is EPERM.
	c := dialGo(t, e.sock, "")
	if code := c.write(t, 0, make([]byte, 512), 0); code != errPerm {
		t.Fatalf("write to a read-only export: error %d, want EPERM", code)
	}
	if code := c.cmd(t, cmdWriteZeroes, 0, 0, 512); code != errPerm {
		t.Fatalf("write zeroes to a read-only export: error %d, want EPERM", code)
	}
	if b, code := c.read(t, 0, 512); code != 0 || len(b) != 512 {
		t.Fatalf("read from a read-only export: %d", code)
	}
}

var _ = net.Dial
