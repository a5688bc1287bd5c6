package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// stdinIsTerminal reports whether standard input is a terminal.
func stdinIsTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}

// confirm is cryptsetup's yes dialog: on a terminal, unless --batch-mode,
// it prints a WARNING! banner, msg and "Are you sure? (Type 'yes' in
// capital letters): " on standard output and accepts only "YES". Without a terminal it does not ask
// (cryptsetup's behaviour, which scripts rely on).
func confirm(c *cli.Context, msg string) bool {
	if c.Bool("batch-mode") || !stdinIsTerminal() {
		return true
	}
	fmt.Printf("\nWARNING!\n========\n%s\n\nAre you sure? (Type 'yes' in capital letters): ", msg)
	return readLine(os.Stdin) == "YES"
}

// readLine reads one line bytewise (so a passphrase typed next stays
// unread) and returns it without the newline.
func readLine(f *os.File) string {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 4096 {
		n, err := f.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		if err != nil {
			break
		}
	}
	return string(line)
}

// errAborted is what a declined dialog returns, with cryptsetup's exit
// code and text (which differ between verbs; "" prints nothing).
func errAborted(code int, what string) error {
	return exitf(code, "%s", what)
}
