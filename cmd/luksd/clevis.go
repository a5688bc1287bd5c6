package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/keyring/clevis"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// clevis is `clevis luks bind|unbind|list` on LUKS2 volumes, with clevis
// 19's getopts syntax, prompts, messages and exit codes (1 for a failure,
// 2 for a usage error), writing the keyslot and token clevis writes: a
// random passphrase of pwmake's length in a PBKDF2 keyslot of 1000
// iterations, sealed to the pin in a "clevis" token naming that keyslot.
// Its short options are clevis's, not cryptsetup's, so its line skips
// luksd's cryptsetup option parser (run).

func init() {
	register(&cli.Command{
		Name:            "clevis",
		Usage:           "bind, unbind and list clevis pins as `clevis luks` does",
		ArgsUsage:       "[luks] bind|unbind|list -d DEV ...",
		SkipFlagParsing: true,
		Action:          clevisAction,
	})
}

// clevisUsage is each subcommand's usage line and getopts option string.
var clevisUsage = map[string][2]string{
	"bind":   {"Usage: luksd clevis bind [-y] [-f] [-s SLT] [-k KEY] [-t TOKEN_ID] -d DEV PIN CFG", "hfyd:s:k:t:e:"},
	"unbind": {"Usage: luksd clevis unbind [-f] -d DEV -s SLT", "d:s:f"},
	"list":   {"Usage: luksd clevis list -d DEV [-s SLT]", "d:s:"},
}

func clevisAction(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) > 0 && args[0] == "luks" {
		args = args[1:]
	}
	if len(args) == 0 || clevisUsage[args[0]][0] == "" {
		return exitf(2, "Usage: luksd clevis bind|unbind|list -d DEV ...")
	}
	sub := args[0]
	opts, rest, err := getopts(clevisUsage[sub][1], args[1:])
	if err == nil && opts['d'] == "" {
		err = keyring.Message("Did not specify a device!")
	}
	if err != nil {
		return exitf(2, "%v (%s)", err, clevisUsage[sub][0])
	}
	switch sub {
	case "bind":
		return bindPin(c, opts, rest)
	case "unbind":
		return unbindPin(c, opts)
	}
	return listPins(c, opts)
}

// getopts parses args as the shell's getopts does with spec (letters, a
// colon after those taking a value): options until the first operand.
func getopts(spec string, args []string) (map[byte]string, []string, error) {
	opts := map[byte]string{}
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		for i := 1; i < len(a); i++ {
			at := strings.IndexByte(spec, a[i])
			switch {
			case at < 0 || a[i] == ':':
				return nil, nil, keyring.Message("Invalid option -" + string(a[i]))
			case at+1 < len(spec) && spec[at+1] == ':':
				v := a[i+1:]
				if v == "" {
					if len(args) == 0 {
						return nil, nil, keyring.Message("Option -" + string(a[i]) + " requires a value")
					}
					v, args = args[0], args[1:]
				}
				opts[a[i]] = v
				i = len(a)
			default:
				opts[a[i]] = "y"
			}
		}
	}
	return opts, args, nil
}

// clevisToken is the part of a "clevis" token that bind, unbind and list
// read.
type clevisToken struct {
	Type     string          `json:"type"`
	Keyslots []string        `json:"keyslots"`
	JWE      json.RawMessage `json:"jwe"`
}

// clevisTokenOf returns the id and contents of the clevis token naming
// slot, -1 when there is none.
func clevisTokenOf(h *luks2.Header, slot int) (int, clevisToken) {
	for _, id := range h.Tokens() {
		js, err := h.Token(id)
		var t clevisToken
		if err == nil && json.Unmarshal(js, &t) == nil && t.Type == "clevis" && slices.Contains(t.Keyslots, strconv.Itoa(slot)) {
			return id, t
		}
	}
	return -1, clevisToken{}
}

func bindPin(c *cli.Context, opts map[byte]string, rest []string) error {
	dev := opts['d']
	if len(rest) == 0 {
		return exitf(2, "Did not specify a pin! (%s)", clevisUsage["bind"][0])
	}
	pin := rest[0]
	if pin != "tang" && pin != "sss" {
		return exitf(2, "'%s' is not a valid pin! (%s)", pin, clevisUsage["bind"][0])
	}
	if len(rest) < 2 || rest[1] == "" {
		return exitf(2, "Did not specify a pin config! (%s)", clevisUsage["bind"][0])
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal([]byte(rest[1]), &cfg) != nil {
		return exitf(1, "Configuration is malformed; it should be valid JSON")
	}
	if opts['e'] != "" {
		return exitf(1, "Existing token ID (-e) is not supported by luksd; give the passphrase or -k KEY")
	}
	src := keyring.Source{}
	if k := opts['k']; k != "" && k != "-" {
		if f, err := os.Open(k); err != nil {
			return exitf(1, "Cannot read key file '%s'", k)
		} else {
			f.Close()
		}
		src.KeyFile = k
	}
	h, f, err := readHeader(c, dev, true)
	if err != nil {
		return exitf(1, "%s is not a supported LUKS device", dev)
	}
	defer f.Close()
	if h.Version() != 2 {
		return exitf(1, "%s is a LUKS1 device; luksd binds clevis pins to LUKS2 tokens only", dev)
	}
	// One line: clevis's last ("Error adding new binding"), then why.
	failed := func(why string) error {
		return exitf(1, "Error adding new binding to %s: %s", dev, why)
	}
	slot, tokenID := -1, -1
	if s := opts['s']; s != "" {
		if slot, err = strconv.Atoi(s); err != nil || h.KeyslotStatus(slot) == luks2.KeyslotInvalid {
			return failed("Unable to find a free slot in " + dev)
		}
		if h.KeyslotStatus(slot) != luks2.KeyslotInactive {
			return failed("Unable to save/update key slot; operation cancelled")
		}
	}
	if t := opts['t']; t != "" {
		if tokenID, err = strconv.Atoi(t); err != nil || tokenID < 0 {
			return failed("Unable to update metadata; operation cancelled")
		}
	}

	vk, _, err := unlockWith(c, h, f, src, "Enter existing LUKS password: ", -1, false)
	if err != nil {
		return failed(strings.TrimSuffix(err.Error(), "."))
	}
	defer vk.Wipe()
	pass, err := clevisPassphrase(min(256, 8*len(vk.Bytes())))
	if err != nil {
		return failed("Unable to generate a new key")
	}
	defer pass.Wipe()
	enc := &clevis.Encrypter{}
	if opts['y'] == "" {
		enc.Trust = trustOnTTY
	}
	jwe, err := enc.Encrypt(context.Background(), pin, []byte(rest[1]), pass.Bytes())
	if err != nil {
		return failed(fmt.Sprintf("Unable to perform encryption with PIN '%s': %s", pin, clevisMessage(err)))
	}
	flat, err := clevis.Flattened(jwe)
	if err != nil {
		return failed(err.Error())
	}
	return f.edit(func() error {
		slot, err = h.AddKey(f, vk.Bytes(), pass.Bytes(), slot, luks2.PBKDF{Type: "pbkdf2", Hash: "sha256", Iterations: 1000})
		if err != nil {
			return failed("Unable to save/update key slot; operation cancelled")
		}
		js, _ := json.Marshal(clevisToken{Type: "clevis", Keyslots: []string{strconv.Itoa(slot)}, JWE: flat})
		if _, err := h.SetToken(f, tokenID, js, false); err != nil {
			// clevis restores the header it saved; luksd takes the new
			// keyslot away again.
			_ = h.KillSlot(f, slot)
			return failed("Unable to update metadata; operation cancelled")
		}
		return nil
	})
}

// clevisMessage is a clevis error as a sentence: its message without the
// package's prefix, capitalised.
func clevisMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "clevis: ")
	msg = strings.TrimPrefix(msg, "bad pin configuration: ")
	return strings.ToUpper(msg[:1]) + msg[1:]
}

// clevisPassphrase is a random passphrase of the length pwmake gives for
// bits of entropy (about 4.7 bits a character: 54 characters for 256),
// drawn from 64 characters, so it holds more than bits.
func clevisPassphrase(bits int) (*keyring.Secret, error) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789@#"
	n := (bits*54 + 255) / 256
	p := make([]byte, n)
	defer clear(p)
	for i := range p {
		r, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return nil, err
		}
		p[i] = alphabet[r.Int64()]
	}
	return keyring.FromBytes(p)
}

// trustOnTTY is clevis's trust-on-first-use dialog, on the terminal.
func trustOnTTY(_ string, thumbprints []string) bool {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer tty.Close()
	fmt.Fprintf(os.Stderr, "The advertisement contains the following signing keys:\n\n%s\n\n", strings.Join(thumbprints, "\n"))
	fmt.Fprint(tty, "Do you wish to trust these keys? [ynYN] ")
	ans := readLine(tty)
	return ans == "y" || ans == "Y"
}

func unbindPin(c *cli.Context, opts map[byte]string) error {
	dev, s := opts['d'], opts['s']
	if s == "" {
		return exitf(2, "Did not specify a slot! (%s)", clevisUsage["unbind"][0])
	}
	h, f, err := readHeader(c, dev, true)
	if err != nil {
		return exitf(1, "%s is not a LUKS device!", dev)
	}
	defer f.Close()
	slot, err := strconv.Atoi(s)
	id := -1
	if err == nil && h.Version() == 2 {
		id, _ = clevisTokenOf(h, slot)
	}
	if id < 0 {
		return exitf(1, "No clevis slot detected on device %s:%s!", dev, s)
	}
	if opts['f'] == "" {
		fmt.Fprintln(os.Stderr, "The unbind operation will wipe a slot. This operation is unrecoverable.")
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return exitf(1, "Cannot ask for confirmation without a terminal; use -f")
		}
		fmt.Fprintf(tty, "Do you wish to erase LUKS slot %d on %s? [ynYN] ", slot, dev)
		ans := readLine(tty)
		tty.Close()
		if ans != "y" && ans != "Y" {
			return nil
		}
		// cryptsetup luksKillSlot without -q: a remaining passphrase.
		last := h.KeyslotStatus(slot) == luks2.KeyslotActiveLast
		if err := verifyRemaining(c, h, f, keyring.Source{}, slot, last); err != nil {
			return err
		}
	}
	return f.edit(func() error {
		if h.KeyslotStatus(slot) != luks2.KeyslotInactive {
			if err := h.KillSlot(f, slot); err != nil {
				return exitf(1, "LUKS slot %d for device %s couldn't be deleted", slot, dev)
			}
		}
		if err := h.RemoveToken(f, id); err != nil {
			return exitf(1, "Error while removing token %d from LUKS device %s!", id, dev)
		}
		return nil
	})
}

func listPins(c *cli.Context, opts map[byte]string) error {
	dev := opts['d']
	h, f, err := readHeader(c, dev, false)
	if err != nil {
		return exitf(1, "%s is not a supported LUKS device!", dev)
	}
	f.Close()
	slots := h.ActiveKeyslots()
	if s := opts['s']; s != "" {
		slot, err := strconv.Atoi(s)
		if err != nil || !slices.Contains(slots, slot) {
			return exitf(1, "")
		}
		slots = []int{slot}
	} else if len(slots) == 0 {
		return exitf(1, "No used slots detected for device %s!", dev)
	}
	listed := 0
	for _, slot := range slots {
		if id, t := clevisTokenOf(h, slot); id >= 0 {
			if d, err := clevis.Describe(t.JWE); err == nil {
				fmt.Printf("%d: %s\n", slot, d)
				listed++
			}
		}
	}
	if opts['s'] != "" && listed == 0 {
		return exitf(1, "")
	}
	return nil
}
