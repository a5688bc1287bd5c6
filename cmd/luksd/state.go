package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// runDir holds one folder per active volume: /run/luksd/NAME/ with the
// state file and the daemon's control socket. LUKSD_RUN_DIR moves it (tests,
// unprivileged experiments).
func runDir() string {
	if d := os.Getenv("LUKSD_RUN_DIR"); d != "" {
		return d
	}
	return "/run/luksd"
}

func stateDir(name string) string    { return filepath.Join(runDir(), name) }
func stateFile(name string) string   { return filepath.Join(stateDir(name), "state") }
func controlPath(name string) string { return filepath.Join(stateDir(name), "control") }

// validName checks a mapping name as dm does: no slash, not "." or "..",
// at most 127 bytes, printable.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 127 || strings.ContainsAny(name, "/") {
		return exitf(exitParams, "Invalid device name %q.", name)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return exitf(exitParams, "Invalid device name %q.", name)
		}
	}
	return nil
}

// volumeState is what an active volume's daemon records in its state file,
// for status, close and the operator: key=value lines.
type volumeState struct {
	Name          string
	Device        string // the kernel block device, /dev/nbdN or /dev/ublkbN
	Frontend      string
	PID           int
	Image         string // the data device or image file
	Header        string // the header device (Image unless --header)
	Type          string // LUKS2 or LUKS1
	UUID          string
	Cipher        string
	KeySize       int // bytes
	KeySlot       int
	SectorSize    int
	Offset        int64 // bytes into Image
	Size          int64 // bytes of plaintext
	ReadOnly      bool
	AllowDiscards bool
	IOFlusher     bool   // PR_GET_IO_FLUSHER read 1
	MemoryLocked  bool   // the key schedule and I/O buffers are locked (see lockedMemory)
	Claim         string // how Image is held: "O_EXCL" or "OFD lock" (blockdev.File.Claim)
	Started       time.Time
	Extra         map[string]string // the frontend's own lines (attachment.State)
}

// stateKeys are the fixed keys, in file order.
var stateKeys = []string{"name", "device", "frontend", "pid", "image", "header", "type", "uuid",
	"cipher", "key-size", "key-slot", "sector-size", "offset", "size", "mode", "discards",
	"io-flusher", "memory-locked", "claim", "started"}

func (s *volumeState) fields() map[string]string {
	mode := "read/write"
	if s.ReadOnly {
		mode = "readonly"
	}
	return map[string]string{
		"name": s.Name, "device": s.Device, "frontend": s.Frontend, "pid": strconv.Itoa(s.PID),
		"image": s.Image, "header": s.Header, "type": s.Type, "uuid": s.UUID, "cipher": s.Cipher,
		"key-size": strconv.Itoa(s.KeySize), "key-slot": strconv.Itoa(s.KeySlot),
		"sector-size": strconv.Itoa(s.SectorSize), "offset": strconv.FormatInt(s.Offset, 10),
		"size": strconv.FormatInt(s.Size, 10), "mode": mode, "discards": strconv.FormatBool(s.AllowDiscards),
		"io-flusher": strconv.FormatBool(s.IOFlusher), "memory-locked": strconv.FormatBool(s.MemoryLocked),
		"claim":   s.Claim,
		"started": s.Started.UTC().Format(time.RFC3339),
	}
}

// marshal writes the state as key=value lines, the frontend's extra keys
// last (sorted).
func (s *volumeState) marshal() ([]byte, error) {
	var b bytes.Buffer
	line := func(k, v string) error {
		if strings.ContainsAny(v, "\n\r") || strings.ContainsAny(k, "=\n\r") || k == "" {
			return fmt.Errorf("state: %q=%q cannot be stored on one line", k, v)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
		return nil
	}
	f := s.fields()
	for _, k := range stateKeys {
		if err := line(k, f[k]); err != nil {
			return nil, err
		}
	}
	var extra []string
	for k := range s.Extra {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		if _, fixed := f[k]; fixed {
			return nil, fmt.Errorf("state: frontend key %q clashes with a fixed key", k)
		}
		if err := line(k, s.Extra[k]); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// parseState reads what marshal wrote.
func parseState(data []byte) (*volumeState, error) {
	s := &volumeState{}
	known := map[string]bool{}
	for _, k := range stateKeys {
		known[k] = true
	}
	var err error
	num := func(k, v string) int64 {
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("state: %s=%q is not a number", k, v)
		}
		return n
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("state: malformed line %q", line)
		}
		switch k {
		case "name":
			s.Name = v
		case "device":
			s.Device = v
		case "frontend":
			s.Frontend = v
		case "pid":
			s.PID = int(num(k, v))
		case "image":
			s.Image = v
		case "header":
			s.Header = v
		case "type":
			s.Type = v
		case "uuid":
			s.UUID = v
		case "cipher":
			s.Cipher = v
		case "key-size":
			s.KeySize = int(num(k, v))
		case "key-slot":
			s.KeySlot = int(num(k, v))
		case "sector-size":
			s.SectorSize = int(num(k, v))
		case "offset":
			s.Offset = num(k, v)
		case "size":
			s.Size = num(k, v)
		case "mode":
			s.ReadOnly = v == "readonly"
		case "discards":
			s.AllowDiscards = v == "true"
		case "io-flusher":
			s.IOFlusher = v == "true"
		case "memory-locked":
			s.MemoryLocked = v == "true"
		case "claim":
			s.Claim = v
		case "started":
			s.Started, _ = time.Parse(time.RFC3339, v)
		default:
			if s.Extra == nil {
				s.Extra = map[string]string{}
			}
			s.Extra[k] = v
		}
	}
	if err == nil {
		err = sc.Err()
	}
	if err != nil {
		return nil, err
	}
	if s.Name == "" || s.PID <= 0 {
		return nil, errors.New("state: name or pid missing")
	}
	return s, nil
}

// writeState replaces the state file atomically.
func writeState(s *volumeState) error {
	data, err := s.marshal()
	if err != nil {
		return err
	}
	tmp := stateFile(s.Name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, stateFile(s.Name))
}

// readState returns the recorded state of name; an error satisfying
// errors.Is(err, os.ErrNotExist) when there is none.
func readState(name string) (*volumeState, error) {
	data, err := os.ReadFile(stateFile(name))
	if err != nil {
		return nil, err
	}
	return parseState(data)
}

// The daemon holds an open-file-description write lock on NAME/lock for
// its whole life; the kernel drops it when the daemon dies, so a held lock
// means active, whatever files a crashed daemon left behind.
func lockPath(name string) string { return filepath.Join(stateDir(name), "lock") }

var wholeFile = unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}

// daemonAlive reports whether a daemon holds name's lock.
func daemonAlive(name string) bool {
	f, err := os.Open(lockPath(name))
	if err != nil {
		return false
	}
	defer f.Close()
	lk := wholeFile
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// claimName takes name's lock for this process, removing what a dead
// daemon left. The returned file holds the lock until it is closed; release
// it with releaseName. A live daemon makes it fail with exit code 5.
func claimName(name string) (*os.File, error) {
	for range 10 {
		if err := os.MkdirAll(stateDir(name), 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", stateDir(name), err)
		}
		f, err := os.OpenFile(lockPath(name), os.O_RDWR|os.O_CREATE, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed by a daemon that was exiting
		}
		if err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", lockPath(name), err)
		}
		lk := wholeFile
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			f.Close()
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
				return nil, exitf(exitBusy, "Device %s already exists.", name)
			}
			return nil, fmt.Errorf("cannot lock %s: %w", lockPath(name), err)
		}
		// The lock counts only if the path still names the file we locked:
		// an exiting daemon unlinks it before unlocking.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(lockPath(name), &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
			f.Close()
			continue
		}
		for _, p := range []string{stateFile(name), controlPath(name)} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				f.Close()
				return nil, err
			}
		}
		return f, nil
	}
	return nil, exitf(exitBusy, "Device %s is being activated or deactivated, try again.", name)
}

// releaseName removes name's folder and then drops the lock.
func releaseName(name string, lock *os.File) {
	os.Remove(stateFile(name))
	os.Remove(stateFile(name) + ".tmp")
	os.Remove(controlPath(name))
	os.Remove(lockPath(name))
	os.Remove(stateDir(name))
	lock.Close()
}

// activeState returns the state of a volume whose daemon is alive, or nil
// when name is inactive. It changes nothing on disk.
func activeState(name string) (*volumeState, error) {
	if !daemonAlive(name) {
		return nil, nil
	}
	s, err := readState(name)
	if errors.Is(err, os.ErrNotExist) {
		// The daemon is starting and has not attached yet.
		return nil, exitf(exitBusy, "Device %s is being activated.", name)
	}
	return s, err
}

// volumeArg takes status's and close's argument and maps it with
// volumeName; arg is the argument as given, for messages. Arguments after
// the first are ignored, as cryptsetup ignores them.
func volumeArg(c *cli.Context) (arg, name string, ok bool, err error) {
	if c.NArg() < 1 {
		return "", "", false, exitf(exitParams, "Command requires device name as argument.")
	}
	arg = c.Args().First()
	name, ok, err = volumeName(arg)
	return arg, name, ok, err
}

// volumeName maps what status and close are given to a NAME: the NAME
// itself, /dev/mapper/NAME (cryptsetup's spelling), or the kernel block
// device of an active volume (/dev/nbd0). ok is false for a device no
// active volume uses.
func volumeName(arg string) (name string, ok bool, err error) {
	if n, found := strings.CutPrefix(arg, "/dev/mapper/"); found {
		return n, true, validName(n)
	}
	if !strings.HasPrefix(arg, "/dev/") {
		return arg, true, validName(arg)
	}
	ents, _ := os.ReadDir(runDir())
	for _, e := range ents {
		if validName(e.Name()) != nil {
			continue
		}
		if s, err := activeState(e.Name()); err == nil && s != nil && s.Device == arg {
			return s.Name, true, nil
		}
	}
	return "", false, nil
}
