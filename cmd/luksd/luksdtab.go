package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/luksd/luksd/daemon"
)

// /etc/luksdtab lists the volumes luksd opens at boot, in crypttab(5)'s
// format: NAME DEVICE [KEYFILE [OPTIONS]], one a line, '#' comments. It is
// a file of its own so that systemd-cryptsetup does not act on the same
// lines. KEYFILE "none", "-" or absent asks for the passphrase
// (systemd-ask-password). OPTIONS, comma-separated: discard, readonly (or
// read-only), tries=N, timeout=SECONDS, _netdev, keyfile-offset=N,
// keyfile-size=N, noauto, nofail, luks, and luksd's frontend=nbd|ublk|auto;
// an option crypttab knows that luksd cannot honour is an error, so that a
// volume never opens other than asked.
const defaultLuksdtab = "/etc/luksdtab"

// tabEntry is one line of a luksdtab.
type tabEntry struct {
	Line          int
	Name          string
	Device        string
	KeyFile       string // "" asks for the passphrase
	Discard       bool
	ReadOnly      bool
	Tries         int // 0: cryptsetup's default (3)
	Timeout       int // seconds for the passphrase prompt, 0: none
	NetDev        bool
	KeyFileOffset int64
	KeyFileSize   int64
	NoAuto        bool
	NoFail        bool
	Frontend      string
}

// parseLuksdtab reads a luksdtab; errors name the line.
func parseLuksdtab(r io.Reader) ([]tabEntry, error) {
	var entries []tabEntry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseTabLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		e.Line = n
		entries = append(entries, e)
	}
	return entries, sc.Err()
}

func parseTabLine(line string) (tabEntry, error) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f) > 4 {
		return tabEntry{}, fmt.Errorf("want NAME DEVICE [KEYFILE [OPTIONS]], got %d fields", len(f))
	}
	e := tabEntry{Name: f[0], Device: f[1], Frontend: "auto"}
	if err := daemon.ValidName(e.Name); err != nil {
		return e, err
	}
	if len(f) > 2 && f[2] != "none" && f[2] != "-" {
		e.KeyFile = f[2]
	}
	if len(f) > 3 {
		for _, opt := range strings.Split(f[3], ",") {
			if err := e.setOption(opt); err != nil {
				return e, err
			}
		}
	}
	return e, nil
}

// setOption applies one OPTIONS word.
func (e *tabEntry) setOption(opt string) error {
	key, val, hasVal := strings.Cut(opt, "=")
	number := func() (int64, error) {
		n, err := strconv.ParseInt(val, 10, 64)
		if !hasVal || err != nil || n < 0 {
			return 0, fmt.Errorf("option %s needs a number", key)
		}
		return n, nil
	}
	var err error
	var n int64
	switch key {
	case "", "luks", "defaults":
	case "discard":
		e.Discard = true
	case "readonly", "read-only":
		e.ReadOnly = true
	case "_netdev":
		e.NetDev = true
	case "noauto":
		e.NoAuto = true
	case "nofail":
		e.NoFail = true
	case "tries":
		n, err = number()
		e.Tries = int(min(n, 1000))
	case "timeout":
		n, err = number()
		e.Timeout = int(min(n, 1<<31-1))
	case "keyfile-offset":
		e.KeyFileOffset, err = number()
	case "keyfile-size":
		e.KeyFileSize, err = number()
	case "frontend":
		if val != "nbd" && val != "ublk" && val != "auto" {
			return fmt.Errorf("frontend=%s: want nbd, ublk or auto", val)
		}
		e.Frontend = val
	default:
		return fmt.Errorf("option %q is not supported by luksd", opt)
	}
	return err
}
