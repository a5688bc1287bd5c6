package daemon

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

	"github.com/luksd/luksd/blockdev"
	"golang.org/x/sys/unix"
)

// RunDir holds one folder per active volume: /run/luksd/NAME/ with the
// state file and the daemon's control socket. LUKSD_RUN_DIR moves it (tests,
// unprivileged experiments).
func RunDir() string {
	if d := os.Getenv("LUKSD_RUN_DIR"); d != "" {
		return d
	}
	return "/run/luksd"
}

func stateDir(name string) string    { return filepath.Join(RunDir(), name) }
func stateFile(name string) string   { return filepath.Join(stateDir(name), "state") }
func controlPath(name string) string { return filepath.Join(stateDir(name), "control") }

// ValidName checks a mapping name as dm does: no slash, not "." or "..",
// at most 127 bytes, printable (ErrInvalid).
func ValidName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 127 || strings.ContainsAny(name, "/") {
		return errorf(ErrInvalid, "Invalid device name %q.", name)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return errorf(ErrInvalid, "Invalid device name %q.", name)
		}
	}
	return nil
}

// State is what an active volume's daemon records in its state file, for
// status, close and the operator: key=value lines.
type State struct {
	Name          string
	Device        string // the kernel block device, /dev/nbdN or /dev/ublkbN
	Mapper        string // the volume's name in MapperDir: /dev/mapper/NAME
	MapperKind    string // how Mapper was made: "dm" (a linear mapping) or "symlink"
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
	Skipped       int64 // IV offset in 512-byte sectors (plain --skip)
	Suspended     bool  // luksSuspend: I/O stopped, key wiped
	Failed        bool  // a request's handling panicked: writes fail (frontend.Failer)
	ReadOnly      bool
	AllowDiscards bool
	Reencryption  string // "in-progress" while mapped in reencryption segments, else ""
	// ReencryptRunning: an online reencryption job runs (reencrypt_online.go);
	// ReencryptDone of ReencryptTotal bytes are in the new cipher (0, 0: unknown).
	ReencryptRunning              bool
	ReencryptDone, ReencryptTotal int64
	IOFlusher                     bool   // PR_GET_IO_FLUSHER read 1
	MemoryLocked                  bool   // the key schedule and I/O buffers are locked (see lockedMemory)
	Claim                         string // how Image is held: "O_EXCL" or "OFD lock" (blockdev.File.Claim)
	Started                       time.Time
	Extra                         map[string]string // the frontend's own lines (frontend.Attachment.State)
}

// stateKeys are the fixed keys, in file order.
var stateKeys = []string{"name", "device", "mapper", "mapper-kind", "frontend", "pid", "image", "header", "type", "uuid",
	"cipher", "key-size", "key-slot", "sector-size", "offset", "size", "skipped", "suspended", "failed", "mode", "discards",
	"reencryption", "reencrypt-running", "reencrypt-done", "reencrypt-total", "io-flusher", "memory-locked", "claim", "started"}

func (s *State) fields() map[string]string {
	mode := "read/write"
	if s.ReadOnly {
		mode = "readonly"
	}
	return map[string]string{
		"name": s.Name, "device": s.Device, "mapper": s.Mapper, "mapper-kind": s.MapperKind, "frontend": s.Frontend, "pid": strconv.Itoa(s.PID),
		"image": s.Image, "header": s.Header, "type": s.Type, "uuid": s.UUID, "cipher": s.Cipher,
		"key-size": strconv.Itoa(s.KeySize), "key-slot": strconv.Itoa(s.KeySlot),
		"sector-size": strconv.Itoa(s.SectorSize), "offset": strconv.FormatInt(s.Offset, 10),
		"size": strconv.FormatInt(s.Size, 10), "skipped": strconv.FormatInt(s.Skipped, 10), "suspended": strconv.FormatBool(s.Suspended), "failed": strconv.FormatBool(s.Failed), "mode": mode, "discards": strconv.FormatBool(s.AllowDiscards),
		"reencryption": s.Reencryption, "reencrypt-running": strconv.FormatBool(s.ReencryptRunning),
		"reencrypt-done": strconv.FormatInt(s.ReencryptDone, 10), "reencrypt-total": strconv.FormatInt(s.ReencryptTotal, 10),
		"io-flusher": strconv.FormatBool(s.IOFlusher), "memory-locked": strconv.FormatBool(s.MemoryLocked),
		"claim":   s.Claim,
		"started": s.Started.UTC().Format(time.RFC3339),
	}
}

// marshal writes the state as key=value lines, the frontend's extra keys
// last (sorted).
func (s *State) marshal() ([]byte, error) {
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
func parseState(data []byte) (*State, error) {
	s := &State{}
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
		if err := s.set(k, v); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if s.Name == "" || s.PID <= 0 {
		return nil, errors.New("state: name or pid missing")
	}
	return s, nil
}

// set sets the field that the state file's key k names to v; a key of no
// field is the frontend's (Extra).
func (s *State) set(k, v string) error {
	strs := map[string]*string{"name": &s.Name, "device": &s.Device, "mapper": &s.Mapper, "mapper-kind": &s.MapperKind, "frontend": &s.Frontend, "image": &s.Image,
		"header": &s.Header, "type": &s.Type, "uuid": &s.UUID, "cipher": &s.Cipher, "claim": &s.Claim, "reencryption": &s.Reencryption}
	ints := map[string]*int{"pid": &s.PID, "key-size": &s.KeySize, "key-slot": &s.KeySlot, "sector-size": &s.SectorSize}
	int64s := map[string]*int64{"offset": &s.Offset, "size": &s.Size, "skipped": &s.Skipped,
		"reencrypt-done": &s.ReencryptDone, "reencrypt-total": &s.ReencryptTotal}
	bools := map[string]*bool{"reencrypt-running": &s.ReencryptRunning, "suspended": &s.Suspended, "failed": &s.Failed, "discards": &s.AllowDiscards, "io-flusher": &s.IOFlusher, "memory-locked": &s.MemoryLocked}
	switch {
	case strs[k] != nil:
		*strs[k] = v
	case ints[k] != nil || int64s[k] != nil:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("state: %s=%q is not a number", k, v)
		}
		if p := ints[k]; p != nil {
			*p = int(n)
		} else {
			*int64s[k] = n
		}
	case bools[k] != nil:
		*bools[k] = v == "true"
	case k == "mode":
		s.ReadOnly = v == "readonly"
	case k == "started":
		s.Started, _ = time.Parse(time.RFC3339, v)
	default:
		if s.Extra == nil {
			s.Extra = map[string]string{}
		}
		s.Extra[k] = v
	}
	return nil
}

// writeState replaces the state file atomically.
func writeState(s *State) error {
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
func readState(name string) (*State, error) {
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

// Alive reports whether a daemon holds name's lock: name is active, or
// being activated or deactivated.
func Alive(name string) bool {
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
// it with releaseName. A live daemon makes it fail (ErrExists).
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
				return nil, errorf(ErrExists, "Device %s already exists.", name)
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
	return nil, errorf(ErrBusy, "Device %s is being activated or deactivated, try again.", name)
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

// Active returns the state of a volume whose daemon is alive, or nil when
// name is inactive. It changes nothing on disk.
func Active(name string) (*State, error) {
	if !Alive(name) {
		return nil, nil
	}
	s, err := readState(name)
	if errors.Is(err, os.ErrNotExist) {
		// The daemon is starting and has not attached yet.
		return nil, errorf(ErrBusy, "Device %s is being activated.", name)
	}
	return s, err
}

// ResolveName maps what status and close are given to a NAME: the NAME
// itself, /dev/mapper/NAME (cryptsetup's spelling), the kernel block
// device of an active volume (/dev/nbd0), or the remote location it
// serves (s3://BUCKET/PREFIX). ok is false for a device or location no
// active volume uses.
func ResolveName(arg string) (name string, ok bool, err error) {
	if blockdev.Scheme(arg) != "" {
		name = UserOf(arg)
		return name, name != "", nil
	}
	if n, found := strings.CutPrefix(arg, "/dev/mapper/"); found {
		return n, true, ValidName(n)
	}
	if !strings.HasPrefix(arg, "/dev/") {
		return arg, true, ValidName(arg)
	}
	for _, s := range activeStates() {
		if s.Device == arg {
			return s.Name, true, nil
		}
	}
	return "", false, nil
}

// UserOf returns the name of an active volume whose data device is path
// (through any link to it), or "". A remote location (s3://, nbd://...)
// is compared as the daemon recorded it, a trailing slash ignored: two
// daemons on one host writing one remote volume lose each other's writes.
func UserOf(path string) string {
	if blockdev.Scheme(path) != "" {
		want := strings.TrimSuffix(path, "/")
		for _, s := range activeStates() {
			if strings.TrimSuffix(s.Image, "/") == want {
				return s.Name
			}
		}
		return ""
	}
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	for _, s := range activeStates() {
		if got, err := filepath.EvalSymlinks(s.Image); err == nil && got == want {
			return s.Name
		}
	}
	return ""
}

// ActiveByUUID returns the name of an active volume whose LUKS header has
// UUID uuid (any case), or "".
func ActiveByUUID(uuid string) string {
	for _, s := range activeStates() {
		if s.UUID != "" && strings.EqualFold(s.UUID, uuid) {
			return s.Name
		}
	}
	return ""
}

// activeStates returns the states of the active volumes.
func activeStates() []*State {
	var all []*State
	ents, _ := os.ReadDir(RunDir())
	for _, e := range ents {
		if !e.IsDir() || ValidName(e.Name()) != nil {
			continue
		}
		if s, err := Active(e.Name()); err == nil && s != nil {
			all = append(all, s)
		}
	}
	return all
}

// RecordedDevice returns the kernel device the last daemon of name
// recorded, when it used frontend fe: what `open --recover` takes over.
func RecordedDevice(name, fe string) string {
	if st, err := readState(name); err == nil && st.Frontend == fe {
		return st.Device
	}
	return ""
}
