package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/luksd/luksd/nbd"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// selfExe is the binary the daemon runs (tests point it at a built luksd).
var selfExe = "/proc/self/exe"

// daemonVerb is the hidden verb `luksd open` re-executes itself as.
const daemonVerb = "__daemon"

func init() {
	openFlags := []cli.Flag{
		&cli.StringFlag{Name: "type", Aliases: []string{"M"}, Value: "luks", Usage: "device `TYPE`: luks, luks2 or luks1"},
		&cli.BoolFlag{Name: "readonly", Aliases: []string{"r"}, Usage: "activate read-only"},
		&cli.BoolFlag{Name: "allow-discards", Usage: "pass discards (TRIM) down to the image"},
		&cli.StringFlag{Name: "frontend", Value: "auto", Usage: "kernel block device: `nbd`, ublk or auto (ublk when available)"},
		&cli.StringFlag{Name: "nbd-device", Usage: "use `/dev/nbdN` instead of a free one"},
		&cli.StringFlag{Name: "ublk-device", Usage: "use `/dev/ublkbN` instead of a free one"},
		&cli.BoolFlag{Name: "foreground", Usage: "stay in the foreground (for systemd); ready once the device exists"},
		&cli.BoolFlag{Name: "recover", Usage: "take over the kernel device of a daemon that died (needs --nbd-device for nbd)"},
		&cli.UintFlag{Name: "io-timeout", Usage: "fail a request the disk has not carried out in `SECONDS` with EIO, the device stays (0: wait as long as it takes, as dm-crypt)"},
		&cli.BoolFlag{Name: "test-passphrase", Usage: "only check that the passphrase unlocks a keyslot"},
		&cli.BoolFlag{Name: "unbound", Usage: "with --test-passphrase: unbound keyslots count too"},
	}
	register(&cli.Command{
		Name:      "open",
		Aliases:   []string{"luksOpen"},
		Usage:     "unlock a LUKS volume and attach it as a kernel block device",
		ArgsUsage: "IMAGE NAME",
		Flags:     append(openFlags, keyFlags...),
		Action:    openAction,
	}, &cli.Command{
		Name:   daemonVerb,
		Hidden: true,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "config-fd", Value: -1},
			&cli.IntFlag{Name: "ready-fd", Value: -1},
		},
		Action: daemonAction,
	})
}

// daemonSpec is what the parent hands its daemon over the config pipe,
// followed by KeyLen bytes of volume key.
type daemonSpec struct {
	Name          string
	Image         string
	Header        string
	Frontend      string
	Device        string
	ReadOnly      bool
	AllowDiscards bool
	Recover       bool
	IOTimeout     time.Duration
	Slot          int
	KeyLen        int
}

func openAction(c *cli.Context) error {
	if err := checkOpenOptions(c); err != nil {
		return err
	}
	if c.Bool("test-passphrase") {
		return testPassphrase(c)
	}
	if c.NArg() != 2 {
		return exitf(exitParams, "Command requires device and mapped name as arguments.")
	}
	image, name := c.Args().Get(0), c.Args().Get(1)
	if err := validName(name); err != nil {
		return err
	}
	spec := daemonSpec{
		Name:          name,
		Image:         image,
		Header:        headerPath(c, image),
		ReadOnly:      c.Bool("readonly"),
		AllowDiscards: c.Bool("allow-discards"),
		Recover:       c.Bool("recover"),
		IOTimeout:     time.Duration(min(c.Uint("io-timeout"), math.MaxInt32)) * time.Second,
	}
	if err := checkOpenType(c.String("type"), false); err != nil {
		return err
	}
	frontendName, err := deviceWish(c, &spec)
	if err != nil {
		return err
	}
	if daemonAlive(name) && !lockReleasedByDyingDaemon(name) {
		return exitf(exitBusy, "Device %s already exists.", name)
	}
	// A device in use is refused before the passphrase is asked; the
	// daemon's claim is what keeps it so.
	if activeUserOf(image) != "" {
		return inUse(image, nil)
	}
	if err := checkNotInUse(image, spec.ReadOnly); err != nil {
		return err
	}
	// Check the header and its --type before asking for a passphrase.
	_, f, err := readHeaderOfType(c, image, false)
	if err != nil {
		return err
	}
	f.Close()
	fe, err := pickFrontend(frontendName)
	if err != nil {
		return withCode(exitParams, err)
	}
	spec.Frontend = fe.Name()
	if spec.Recover && spec.Device == "" {
		// Take over the device the dead daemon recorded.
		if st, err := readState(name); err == nil && st.Frontend == spec.Frontend {
			spec.Device = st.Device
		}
	}
	if !spec.Recover {
		// A fresh start: release what a dead daemon of NAME left behind
		// (its /dev/nbdN would otherwise stay configured forever).
		cleanStale(name)
	}

	v, err := unlockVolume(c, image, spec.ReadOnly)
	if err != nil {
		return err
	}
	defer v.Close()
	spec.Slot = v.Slot
	spec.KeyLen = v.Key.Len()
	if c.Bool("foreground") {
		return execDaemon(spec, v)
	}
	dev, err := spawnDaemon(spec, v)
	if err != nil {
		return err
	}
	fmt.Println(dev)
	return nil
}

// lockReleasedByDyingDaemon waits a little for name's lock when the daemon
// holding it is already dead (a zombie whose last threads are still
// exiting, e.g. right after SIGKILL), and reports whether it was released.
func lockReleasedByDyingDaemon(name string) bool {
	st, err := readState(name)
	if err != nil || st.PID <= 0 || processRunning(st.PID) {
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if !daemonAlive(name) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// deviceWish applies --nbd-device or --ublk-device to spec and returns the
// frontend they imply (or --frontend).
func deviceWish(c *cli.Context, spec *daemonSpec) (string, error) {
	fe := c.String("frontend")
	nbdDev, ublkDev := c.String("nbd-device"), c.String("ublk-device")
	switch {
	case nbdDev != "" && ublkDev != "":
		return "", exitf(exitParams, "--nbd-device and --ublk-device exclude each other.")
	case nbdDev != "":
		if fe == "auto" {
			fe = "nbd"
		}
		if fe != "nbd" {
			return "", exitf(exitParams, "--nbd-device needs --frontend nbd.")
		}
		if _, err := nbd.ParseDevicePath(nbdDev); err != nil {
			return "", exitf(exitParams, "%v", err)
		}
		spec.Device = nbdDev
	case ublkDev != "":
		if fe == "auto" {
			fe = "ublk"
		}
		if fe != "ublk" {
			return "", exitf(exitParams, "--ublk-device needs --frontend ublk.")
		}
		spec.Device = ublkDev
	}
	return fe, nil
}

// activeUserOf returns the name of an active volume whose image is path.
func activeUserOf(path string) string {
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	ents, _ := os.ReadDir(runDir())
	for _, e := range ents {
		if !e.IsDir() || validName(e.Name()) != nil {
			continue
		}
		s, err := activeState(e.Name())
		if err != nil || s == nil {
			continue
		}
		if got, err := filepath.EvalSymlinks(s.Image); err == nil && got == want {
			return s.Name
		}
	}
	return ""
}

// writeSpec writes the spec and then the volume key.
func writeSpec(w io.Writer, spec daemonSpec, key []byte) error {
	js, err := json.Marshal(spec)
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
func readSpec(r io.Reader) (daemonSpec, *keyring.Secret, error) {
	var spec daemonSpec
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return spec, nil, fmt.Errorf("reading the daemon's configuration: %v", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return spec, nil, errors.New("daemon configuration too large")
	}
	js := make([]byte, size)
	if _, err := io.ReadFull(r, js); err != nil {
		return spec, nil, fmt.Errorf("reading the daemon's configuration: %v", err)
	}
	if err := json.Unmarshal(js, &spec); err != nil {
		return spec, nil, fmt.Errorf("daemon configuration: %v", err)
	}
	if spec.KeyLen <= 0 || spec.KeyLen > 1024 {
		return spec, nil, fmt.Errorf("daemon configuration: bad key length %d", spec.KeyLen)
	}
	key, err := keyring.NewSecret(spec.KeyLen)
	if err != nil {
		return spec, nil, err
	}
	if _, err := io.ReadFull(r, key.Bytes()); err != nil {
		key.Wipe()
		return spec, nil, fmt.Errorf("reading the volume key: %v", err)
	}
	return spec, key, nil
}

// spawnDaemon starts the daemon in the background: a new session running
// this binary as `luksd __daemon`, the spec and key over one inherited pipe,
// readiness or failure back over another. It returns the device path.
func spawnDaemon(spec daemonSpec, v *volume) (string, error) {
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

	cmd := exec.Command(selfExe, daemonVerb, "--config-fd", "3", "--ready-fd", "4")
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
	if err := writeSpec(cfgW, spec, v.Key.Bytes()); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return "", fmt.Errorf("handing the volume to the daemon: %v", err)
	}
	cfgW.Close()
	v.Close()

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
	return "", exitf(code, "%s", msg)
}

// The daemon reports on the ready pipe: "ok DEVICE" or "error CODE MESSAGE".
func formatReady(dev string, err error) string {
	if err == nil {
		return "ok " + dev + "\n"
	}
	code := exitParams
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
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
		code = exitParams
	}
	if m == "" {
		m = "the luksd daemon failed"
	}
	return "", code, m
}

// execDaemon replaces this process with the daemon (same pid, so systemd
// keeps tracking it), handing the spec and key over a pipe.
func execDaemon(spec daemonSpec, v *volume) error {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // no CLOEXEC: the daemon inherits the read end
		return err
	}
	w := os.NewFile(uintptr(p[1]), "config")
	// The spec and a key are far below the pipe's 64 KiB buffer.
	err := writeSpec(w, spec, v.Key.Bytes())
	w.Close()
	v.Close()
	if err != nil {
		unix.Close(p[0])
		return err
	}
	argv := []string{"luksd", daemonVerb, "--config-fd", strconv.Itoa(p[0])}
	err = startAsIOFlusher(func() error {
		return syscall.Exec(selfExe, argv, os.Environ())
	})
	unix.Close(p[0])
	return fmt.Errorf("cannot start the daemon: %v", err)
}

// startAsIOFlusher runs start (a fork or exec) on a thread marked
// PR_SET_IO_FLUSHER, so the daemon and all its threads inherit the mark.
// The thread stays locked: it is not handed back to other goroutines.
func startAsIOFlusher(start func() error) error {
	runtime.LockOSThread()
	if err := setIOFlusher(); err != nil {
		return err
	}
	return start()
}

// daemonAction is the daemon process: it reads its spec and key, then runs
// the volume until it is closed.
func daemonAction(c *cli.Context) error {
	fd := c.Int("config-fd")
	if fd < 3 {
		return exitf(exitParams, "%s is luksd's internal daemon verb; use `luksd open`.", daemonVerb)
	}
	cfg := os.NewFile(uintptr(fd), "config")
	unix.CloseOnExec(fd)
	spec, key, err := readSpec(cfg)
	cfg.Close()
	var ready *os.File
	if rfd := c.Int("ready-fd"); rfd >= 3 {
		unix.CloseOnExec(rfd)
		ready = os.NewFile(uintptr(rfd), "ready")
		if err == nil {
			err = logToFile(spec.Name)
		}
	}
	reported := false
	report := func(dev string, err error) {
		reported = true
		if ready != nil {
			io.WriteString(ready, formatReady(dev, err))
			ready.Close()
			return
		}
		if err == nil {
			fmt.Println(dev)
			sdNotify("READY=1")
		}
	}
	if err == nil {
		err = runVolume(spec, key, true, func(dev string) { report(dev, nil) })
	}
	if err != nil && !reported {
		report("", err)
		if ready != nil {
			return exitf(exitParams, "") // told the parent already
		}
	}
	return err
}

// runVolume opens the volume spec describes with key (which it wipes) and
// runs its daemon in this process.
func runVolume(spec daemonSpec, key *keyring.Secret, kernelIO bool, ready func(string)) error {
	v := &volume{Path: spec.Image, HeaderPath: spec.Header, Key: key, Slot: spec.Slot}
	defer v.Close()
	fe, ok := frontends[spec.Frontend]
	if !ok {
		return fmt.Errorf("unknown frontend %q", spec.Frontend)
	}
	hf, size, err := openDevice(spec.Header, false)
	if err != nil {
		return err
	}
	v.Header, err = luks2.Read(hf, size)
	hf.Close()
	if err != nil {
		return headerError(spec.Header, err)
	}
	if v.Segment, err = v.Header.Segment(); err != nil {
		return withCode(exitParams, err)
	}
	discards := spec.AllowDiscards || slices.Contains(v.Header.Flags(), "allow-discards")
	seg := v.Segment
	return runDaemon(daemonConfig{
		Frontend: fe,
		Attach: attachOptions{
			Name:          spec.Name,
			ReadOnly:      spec.ReadOnly,
			AllowDiscards: discards,
			BlockSize:     seg.SectorSize,
			Device:        spec.Device,
			Recover:       spec.Recover,
			IOTimeout:     spec.IOTimeout,
		},
		State: volumeState{
			Image:         spec.Image,
			Header:        spec.Header,
			Type:          fmt.Sprintf("LUKS%d", v.Header.Version()),
			UUID:          v.Header.UUID(),
			Cipher:        seg.Cipher,
			KeySize:       seg.KeySize,
			KeySlot:       spec.Slot,
			SectorSize:    seg.SectorSize,
			Offset:        seg.Offset,
			ReadOnly:      spec.ReadOnly,
			AllowDiscards: discards,
		},
		Open: func() (blockdev.Device, error) {
			d, keysLocked, err := openCryptDevice(v, spec.ReadOnly, discards)
			v.Close() // the crypt layer keeps its own expanded keys
			if err == nil && kernelIO && !keysLocked {
				d.Close()
				return nil, errors.New("cannot lock the volume's key schedule in memory (mlock; RLIMIT_MEMLOCK too low?)")
			}
			return d, err
		},
		KernelIO: kernelIO,
		Ready:    ready,
	})
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
