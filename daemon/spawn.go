package daemon

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/luksd/luksd/keyring"
	"golang.org/x/sys/unix"
)

// Exe is the program a daemon is started as: this one (tests point it at
// a built luksd).
var Exe = "/proc/self/exe"

// ChildVerb is the hidden verb Spawn and Exec run Exe with:
// `luksd __daemon --config-fd N [--ready-fd M]`. The program answers it by
// calling RunChild.
const ChildVerb = "__daemon"

// handover is what the parent writes on the config pipe (as JSON, after
// its length), followed by KeyLen bytes of volume key.
type handover struct {
	Spec   Spec
	KeyLen int
}

// writeSpec writes the spec and then the volume key.
func writeSpec(w io.Writer, spec Spec, key []byte) error {
	js, err := json.Marshal(handover{Spec: spec, KeyLen: len(key)})
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(js)))
	if _, err := w.Write(append(n[:], js...)); err != nil {
		return err
	}
	_, err = w.Write(key)
	return err
}

// readSpec reads what writeSpec wrote; the key lands in locked memory.
func readSpec(r io.Reader) (Spec, *keyring.Secret, error) {
	var h handover
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return h.Spec, nil, fmt.Errorf("reading the daemon's configuration: %v", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return h.Spec, nil, errors.New("daemon configuration too large")
	}
	js := make([]byte, size)
	if _, err := io.ReadFull(r, js); err != nil {
		return h.Spec, nil, fmt.Errorf("reading the daemon's configuration: %v", err)
	}
	if err := json.Unmarshal(js, &h); err != nil {
		return h.Spec, nil, fmt.Errorf("daemon configuration: %v", err)
	}
	if h.KeyLen <= 0 || h.KeyLen > 1024 {
		return h.Spec, nil, fmt.Errorf("daemon configuration: bad key length %d", h.KeyLen)
	}
	key, err := keyring.NewSecret(h.KeyLen)
	if err != nil {
		return h.Spec, nil, err
	}
	if _, err := io.ReadFull(r, key.Bytes()); err != nil {
		key.Wipe()
		return h.Spec, nil, fmt.Errorf("reading the volume key: %v", err)
	}
	return h.Spec, key, nil
}

// Spawn starts spec's daemon in the background: a new session running Exe
// ChildVerb, the spec and key over one inherited pipe, readiness or
// failure back over another. It wipes key once the daemon has it, and
// returns the kernel block device. A daemon that fails before its device
// is ready reports why (StartError).
func Spawn(spec Spec, key *keyring.Secret) (string, error) {
	defer key.Wipe()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer cfgW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		return "", err
	}
	defer readyR.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer devnull.Close()

	cmd := exec.Command(Exe, ChildVerb, "--config-fd", "3", "--ready-fd", "4")
	cmd.Args[0] = "luksd"
	cmd.ExtraFiles = []*os.File{cfgR, readyW}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = startAsIOFlusher(cmd.Start)
	cfgR.Close()
	readyW.Close()
	if err != nil {
		return "", err
	}
	// The pipe holds the key only until the daemon reads it.
	if err := writeSpec(cfgW, spec, key.Bytes()); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return "", fmt.Errorf("handing the volume to the daemon: %v", err)
	}
	cfgW.Close()
	key.Wipe()

	line, _ := bufio.NewReader(readyR).ReadString('\n')
	dev, code, msg := parseReady(line)
	if dev != "" {
		cmd.Process.Release()
		return dev, nil
	}
	if msg == "" {
		werr := cmd.Wait()
		return "", fmt.Errorf("the luksd daemon exited before %s was ready (%v)", spec.Name, werr)
	}
	return "", &StartError{Code: code, Msg: msg}
}

// The daemon reports on the ready pipe: "ok DEVICE", or "error CODE
// MESSAGE" with the exit code its CLI chose for the error.
func formatReady(dev string, code int, err error) string {
	if err == nil {
		return "ok " + dev + "\n"
	}
	return fmt.Sprintf("error %d %s\n", code, oneLine(err))
}

func parseReady(line string) (dev string, code int, msg string) {
	line = strings.TrimSuffix(line, "\n")
	if d, ok := strings.CutPrefix(line, "ok "); ok && d != "" {
		return d, 0, ""
	}
	rest, ok := strings.CutPrefix(line, "error ")
	if !ok {
		return "", 0, ""
	}
	c, m, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(c)
	if err != nil || code <= 0 || code > 255 {
		code = 1
	}
	if m == "" {
		m = "the luksd daemon failed"
	}
	return "", code, m
}

// Exec replaces this process with spec's daemon (same pid, so systemd
// keeps tracking it), handing the spec and key over a pipe. It wipes key,
// and returns only when the exec failed.
func Exec(spec Spec, key *keyring.Secret) error {
	defer key.Wipe()
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // no CLOEXEC: the daemon inherits the read end
		return err
	}
	w := os.NewFile(uintptr(p[1]), "config")
	// The spec and a key are far below the pipe's 64 KiB buffer.
	err := writeSpec(w, spec, key.Bytes())
	w.Close()
	key.Wipe()
	if err != nil {
		unix.Close(p[0])
		return err
	}
	argv := []string{"luksd", ChildVerb, "--config-fd", strconv.Itoa(p[0])}
	err = startAsIOFlusher(func() error {
		return syscall.Exec(Exe, argv, os.Environ())
	})
	unix.Close(p[0])
	return fmt.Errorf("cannot start the daemon: %v", err)
}

// RunChild is the daemon process that Spawn or Exec started: it reads its
// spec and key from configFD and runs the volume (Run, in the kernel's
// I/O path) until it is closed. Spawned (readyFD open), it logs to its log
// file and reports readiness or failure, with exitCode's code for the
// error, on readyFD; after a failure so reported it returns ErrReported.
// Exec'd (readyFD < 0), it prints the device on standard output and tells
// systemd (sd_notify READY=1) once ready.
func RunChild(configFD, readyFD int, exitCode func(error) int) error {
	cfg := os.NewFile(uintptr(configFD), "config")
	unix.CloseOnExec(configFD)
	spec, key, err := readSpec(cfg)
	cfg.Close()
	var ready *os.File
	if readyFD >= 3 {
		unix.CloseOnExec(readyFD)
		ready = os.NewFile(uintptr(readyFD), "ready")
		if err == nil {
			err = logToFile(spec.Name)
		}
	}
	reported := false
	report := func(dev string, err error) {
		reported = true
		if ready != nil {
			code := 0
			if err != nil {
				code = exitCode(err)
			}
			io.WriteString(ready, formatReady(dev, code, err))
			ready.Close()
			return
		}
		if err == nil {
			fmt.Println(dev)
			sdNotify("READY=1")
		}
	}
	if err == nil {
		err = Run(spec, key, RunOptions{KernelIO: true, Ready: func(dev string) { report(dev, nil) }})
	} else if key != nil {
		key.Wipe()
	}
	if err != nil && !reported {
		report("", err)
		if ready != nil {
			return ErrReported // told the parent already
		}
	}
	return err
}

// sdNotify tells systemd (Type=notify) that the daemon is ready.
func sdNotify(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	c, err := net.Dial("unixgram", addr)
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
