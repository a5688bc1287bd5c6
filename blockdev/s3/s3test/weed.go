// Package s3test runs a real object store for the S3 backend's tests:
// SeaweedFS's `weed server` with its S3 gateway, on loopback only, in a
// temporary folder, stopped when the test ends. weed is built once into a
// cache by contrib/s3/seaweedfs.sh (`make deps`); a test that cannot find
// it skips, or fails in CI.
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/luksd/luksd/internal/testtool"
)

// The credentials a server started here accepts, and no others; the
// ReadOnly pair may read and list, not write.
const (
	AccessKey         = "luksd-test"
	SecretKey         = "luksd-test-secret"
	ReadOnlyAccessKey = "luksd-test-reader"
	ReadOnlySecretKey = "luksd-test-reader-secret"
	Region            = "us-east-1"
)

// Server is one running weed server.
type Server struct {
	// Endpoint is the S3 gateway's URL, http://127.0.0.1:PORT.
	Endpoint string
	// TLSEndpoint is the same gateway over TLS, https://127.0.0.1:PORT,
	// with a certificate from a CA of the test's own, in the PEM file
	// CAFile.
	TLSEndpoint, CAFile string

	t     testing.TB
	weed  string
	dir   string // weed's data
	certs string // the TLS port's certificates (testtool.CA.ServerDir)
	ports []int  // the ports of args, kept across restarts

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	buckets int
	sockets map[string]uint64 // weed's gRPC sockets in /tmp: path, inode
}

// Start starts a weed server for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, weed: Weed(t), dir: t.TempDir()}
	s.certs = testtool.NewCA(t, "luksd S3 test CA").ServerDir(t)
	s.CAFile = filepath.Join(s.certs, "ca-cert.pem")
	var err error
	for try := 0; try < 3; try++ {
		// Another process may take a free port between our probe and
		// weed's bind: then try other ports.
		if s.ports, err = freePorts(len(portFlags)); err != nil {
			t.Fatal(err)
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		s.removeSockets()
	})
	return s
}

// Weed returns the path of the cached weed binary, or skips (fails in CI).
func Weed(t testing.TB) string {
	t.Helper()
	script := filepath.Join(testtool.RepoRoot(t), "contrib", "s3", "seaweedfs.sh")
	out, err := exec.Command(script, "--cached").Output()
	if err != nil {
		testtool.Missing(t, "SeaweedFS's weed is not built: run contrib/s3/seaweedfs.sh (make deps)")
	}
	return strings.TrimSpace(string(out))
}

// portFlags are weed's listening ports; each gets a free one, so that
// servers of tests running at once do not meet.
var portFlags = []string{"s3.port", "s3.port.grpc", "master.port", "master.port.grpc",
	"volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc", "s3.port.https"}

func (s *Server) args() []string {
	args := []string{"server", "-dir", s.dir, "-ip", "127.0.0.1", "-ip.bind", "127.0.0.1", "-s3",
		// Nothing leaves the machine, and nothing listens that the tests
		// do not use.
		"-master.telemetry=false", "-s3.port.iceberg", "0", "-s3.port.lance", "0",
		"-filer.localSocket", filepath.Join(s.dir, "filer.sock"),
		"-s3.localSocket", filepath.Join(s.dir, "s3.sock"),
		"-master.volumeSizeLimitMB", "64", "-volume.max", "0",
		"-s3.config", filepath.Join(s.dir, "s3.json"),
		"-s3.cert.file", filepath.Join(s.certs, "server-cert.pem"), "-s3.key.file", filepath.Join(s.certs, "server-key.pem")}
	for i, f := range portFlags {
		args = append(args, "-"+f, strconv.Itoa(s.ports[i]))
	}
	return args
}

// start runs weed and waits until an object can be written.
func (s *Server) start() error {
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s.ports[0])
	// weed without identities would accept any credentials.
	identity := fmt.Sprintf(`{"identities":[{"name":"luksd","credentials":[{"accessKey":%q,"secretKey":%q}],`+
		`"actions":["Admin","Read","List","Tagging","Write"]},`+
		`{"name":"reader","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Read","List"]}]}`,
		AccessKey, SecretKey, ReadOnlyAccessKey, ReadOnlySecretKey)
	if err := os.WriteFile(filepath.Join(s.dir, "s3.json"), []byte(identity), 0o600); err != nil {
		return err
	}
	s.TLSEndpoint = fmt.Sprintf("https://127.0.0.1:%d", s.ports[len(s.ports)-1])
	log, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(s.weed, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.waitReady(exited); err != nil {
		s.Kill()
		return fmt.Errorf("weed server did not start: %w\n%s", err, s.LogTail())
	}
	s.noteSockets()
	return nil
}

// grpcServices are the services whose gRPC ports weed server also
// serves on a Unix socket, /tmp/seaweedfs-NAME-grpc-PORT.sock: a path
// weed builds in, with no flag to move it and no removal at exit.
var grpcServices = map[string]string{"master": "master.port.grpc", "volume": "volume.port.grpc",
	"filer": "filer.port.grpc", "s3": "s3.port.grpc"}

// noteSockets records the inodes of this server's gRPC sockets, so that
// removeSockets removes these files and not another server's that took
// the same port since.
func (s *Server) noteSockets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sockets = map[string]uint64{}
	for name, flag := range grpcServices {
		port := s.ports[slices.Index(portFlags, flag)]
		path := fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", name, port)
		var st syscall.Stat_t
		if syscall.Stat(path, &st) == nil {
			s.sockets[path] = st.Ino
		}
	}
}

// removeSockets removes the gRPC sockets noteSockets recorded, once
// the server has exited.
func (s *Server) removeSockets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for path, ino := range s.sockets {
		var st syscall.Stat_t
		if syscall.Stat(path, &st) == nil && st.Ino == ino {
			os.Remove(path)
		}
	}
	s.sockets = nil
}

// waitReady polls until a bucket can be made and an object written (the
// S3 gateway answers before a volume server has registered).
func (s *Server) waitReady(exited chan struct{}) error {
	c := s.Client()
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("weed exited")
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = ready(ctx, c)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

func ready(ctx context.Context, c *s3.Client) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("luksd-ready")})
	var owned interface{ ErrorCode() string }
	if err != nil && !(errors.As(err, &owned) && strings.HasPrefix(owned.ErrorCode(), "BucketAlready")) {
		return err
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("luksd-ready"), Key: aws.String("probe"),
		Body: strings.NewReader("ok")})
	return err
}

// Client returns an SDK client for the server, path-style, with the
// test credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		UsePathStyle: true,
		HTTPClient:   http.DefaultClient,
	})
}

// Bucket creates a new, empty bucket and returns its name.
func (s *Server) Bucket() string {
	s.t.Helper()
	s.mu.Lock()
	s.buckets++
	name := fmt.Sprintf("vol%d", s.buckets)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		s.t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// Env is the environment that points the AWS SDK's standard sources at
// the server: a luksd run with it reaches this store.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + Region,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Setenv points the AWS SDK's standard sources of t's process, and of
// every process it starts, at the server (Env, with t.Setenv).
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL)
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	if !s.signal(syscall.SIGTERM) {
		return
	}
	s.Resume() // a paused server takes the SIGTERM once it runs
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		s.Kill()
	}
}

// Pause stops the server's process where it is (SIGSTOP): it takes
// connections (the kernel's backlog) but answers nothing, as a store that
// stalls. Resume lets it go on.
//
// A stop signal takes effect as each of weed's threads next runs: Pause
// returns once all of them are stopped, or a request sent right after
// could still be served.
func (s *Server) Pause() {
	if !s.signal(syscall.SIGSTOP) {
		return
	}
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); !allStopped(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("weed (pid %d) did not stop within 10 s of SIGSTOP", pid)
		}
	}
}

// allStopped reports whether every thread of process pid is stopped.
func allStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' && b[i+2] != 't' {
			return false
		}
	}
	return true
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Restart starts the server again on the same ports and data after Kill
// or Stop.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// signal sends sig and, for SIGKILL, waits for the exit. It reports
// whether the server was running.
func (s *Server) signal(sig syscall.Signal) bool {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
	}
	cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		<-exited
	}
	return true
}

// LogTail is the end of weed's log, for a failure message.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// freePorts returns n ports nobody listens on now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
