package daemon

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
)

// Suspend, resume and refresh (cryptsetup luksSuspend, luksResume,
// refresh): the daemon
// stops I/O and wipes the volume's key schedule; the CLI later unlocks
// the header again and hands the volume key back on the control socket
// ("resume N", then N bytes of key), never in the command line. The
// daemon keeps only a keyed hash of the key, to refuse a key that is not
// the volume's.

// keyControl suspends and resumes one running volume.
type keyControl struct {
	dev       *dmcrypt.Device
	newCipher func(key []byte) (dmcrypt.SectorCipher, error)
	salt      [32]byte
	check     []byte // HMAC-SHA256(salt, volume key)

	mu sync.Mutex
	// saveState records the suspension in the state file, for status.
	saveState func(suspended bool) error
}

// newKeyControl remembers how to check and rebuild key for dev.
func newKeyControl(dev *dmcrypt.Device, seg Segment, key []byte) (*keyControl, error) {
	k := &keyControl{dev: dev, newCipher: func(key []byte) (dmcrypt.SectorCipher, error) { return sectorCipher(seg, key) }}
	if _, err := rand.Read(k.salt[:]); err != nil {
		return nil, err
	}
	k.check = k.sum(key)
	return k, nil
}

// rekey makes key, for segment seg, the one resume and check take: the
// volume's key after an online reencryption ended.
func (k *keyControl) rekey(seg Segment, key []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.check = k.sum(key)
	k.newCipher = func(key []byte) (dmcrypt.SectorCipher, error) { return sectorCipher(seg, key) }
}

func (k *keyControl) sum(key []byte) []byte {
	m := hmac.New(sha256.New, k.salt[:])
	m.Write(key)
	return m.Sum(nil)
}

func (k *keyControl) suspended() bool { return k != nil && k.dev.Suspended() }

// suspend stops I/O and wipes the key schedule.
func (k *keyControl) suspend() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.dev.Suspend(); err != nil {
		return err
	}
	return k.record(true)
}

// resume checks key and restarts I/O with it.
func (k *keyControl) resume(key []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dev.Suspended() {
		return dmcrypt.ErrSuspended
	}
	if err := k.matches(key); err != nil {
		return err
	}
	c, err := k.newCipher(key)
	if err != nil {
		return err
	}
	if err := k.dev.Resume(c); err != nil {
		c.Wipe()
		return err
	}
	return k.record(false)
}

func (k *keyControl) record(suspended bool) error {
	if k.saveState == nil {
		return nil
	}
	if err := k.saveState(suspended); err != nil {
		return fmt.Errorf("cannot write the state file: %v", err)
	}
	return nil
}

var errWrongKey = errors.New("wrong volume key")

// ctlWrongKey is resume's reply to a key that is not the volume's.
const ctlWrongKey = "error: wrong volume key"

// answerKeyCommand answers "suspend" and "resume N" on conn; it reports
// whether line was one of them.
func (k *keyControl) answerKeyCommand(conn net.Conn, r *bufio.Reader, line string) bool {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "suspend":
		fmt.Fprintln(conn, keyReply(k.suspend()))
	case "resume":
		fmt.Fprintln(conn, keyReply(k.readKey(r, arg, k.resume)))
	case "check":
		fmt.Fprintln(conn, keyReply(k.readKey(r, arg, k.matches)))
	default:
		return false
	}
	conn.Close()
	return true
}

// readKey reads the n-byte key that follows "resume n" or "check n" into
// locked memory and hands it to use.
func (k *keyControl) readKey(r io.Reader, arg string, use func([]byte) error) error {
	n, err := strconv.Atoi(arg)
	if err != nil || n <= 0 || n > 1024 {
		return fmt.Errorf("bad key length %q", arg)
	}
	key, err := keyring.NewSecret(n)
	if err != nil {
		return err
	}
	defer key.Wipe()
	if _, err := io.ReadFull(r, key.Bytes()); err != nil {
		return fmt.Errorf("reading the key: %v", err)
	}
	return use(key.Bytes())
}

// matches reports errWrongKey unless key is the volume's (refresh).
func (k *keyControl) matches(key []byte) error {
	if !hmac.Equal(k.sum(key), k.check) {
		return errWrongKey
	}
	return nil
}

func keyReply(err error) string {
	switch {
	case err == nil:
		return ctlOK
	case errors.Is(err, dmcrypt.ErrSuspended):
		return "error: " + err.Error()
	case errors.Is(err, errWrongKey):
		return ctlWrongKey
	}
	return "error: " + oneLine(err)
}

// Suspend asks name's daemon to stop I/O and wipe the volume key
// (ErrNotActive without a daemon; ErrInvalid when already suspended).
func Suspend(name string) error {
	return askKeyCommand(name, "suspend", nil, "Volume %s is already suspended.")
}

// Resume hands key to name's suspended daemon, which checks that it is
// the volume's and restarts I/O.
func Resume(name string, key *keyring.Secret) error {
	return askKeyCommand(name, fmt.Sprintf("resume %d", key.Len()), key.Bytes(), "Volume %s is not suspended.")
}

// CheckKey asks name's daemon whether key is its volume's key (refresh).
func CheckKey(name string, key *keyring.Secret) error {
	return askKeyCommand(name, fmt.Sprintf("check %d", key.Len()), key.Bytes(), "")
}

// askKeyCommand sends a suspend or resume command and maps the daemon's
// reply: wrongState is cryptsetup's message when the volume is already in
// the state asked for.
func askKeyCommand(name, cmd string, payload []byte, wrongState string) error {
	if !Alive(name) {
		return errorf(ErrNotActive, "Device %s is not active.", name)
	}
	verb, _, _ := strings.Cut(cmd, " ")
	reply, err := askDaemonWith(name, cmd, payload)
	switch {
	case err != nil:
		return fmt.Errorf("cannot reach the daemon of %s: %v", name, err)
	case reply == ctlOK:
		return nil
	case reply == "error: "+dmcrypt.ErrSuspended.Error():
		return errorf(ErrInvalid, wrongState, name)
	case reply == ctlWrongKey:
		return errorf(ErrInvalid, "The key does not open volume %s.", name)
	}
	return fmt.Errorf("%s %s: %s", verb, name, strings.TrimPrefix(reply, "error: "))
}
