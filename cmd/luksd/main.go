// Command luksd is a userspace dm-crypt/LUKS2 device daemon with
// cryptsetup's command-line language. Each verb group lives in its own file
// and registers its commands from init.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// cryptsetup's exit codes.
const (
	exitOK         = 0
	exitParams     = 1 // wrong parameters
	exitPermission = 2 // no permission, bad passphrase
	exitMemory     = 3 // out of memory
	exitDevice     = 4 // wrong device specified
	exitBusy       = 5 // device already exists or is busy
)

// exitError carries a cryptsetup exit code with a one-line message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitf returns an error that makes luksd print the message and exit with code.
func exitf(code int, format string, a ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, a...)}
}

// withCode wraps err so that luksd exits with code; nil stays nil.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: code, err: err}
}

var commands []*cli.Command

// globalFlags are accepted by every verb, as cryptsetup accepts them anywhere.
var globalFlags = []cli.Flag{
	&cli.BoolFlag{Name: "batch-mode", Aliases: []string{"q"}, Usage: "do not ask for confirmation"},
	&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "show more detailed messages"},
	&cli.BoolFlag{Name: "debug", Usage: "show debug messages"},
}

// register adds verbs to the CLI; the global flags are appended to each.
func register(cmds ...*cli.Command) {
	for _, c := range cmds {
		c.Flags = append(c.Flags, globalFlags...)
		// One line and exit 1 for a bad flag, not the verb's help page.
		c.OnUsageError = usageError
		// -qv is -q -v, as with popt.
		c.UseShortOptionHandling = true
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			verboseFlag = ctx.Bool("verbose")
			if before != nil {
				return before(ctx)
			}
			return nil
		}
		commands = append(commands, c)
	}
}

// usageError turns a flag parsing error into cryptsetup's exit code 1.
func usageError(_ *cli.Context, err error, _ bool) error {
	return exitf(exitParams, "%v", err)
}

func newApp() *cli.App {
	// cryptsetup's -h is --hash; help stays reachable as --help.
	cli.HelpFlag = &cli.BoolFlag{Name: "help", Usage: "show help"}
	return &cli.App{
		Name:            "luksd",
		Usage:           "userspace dm-crypt/LUKS2 volumes served over NBD and ublk",
		Commands:        commands,
		HideHelpCommand: true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return exitf(exitParams, "Unknown action.")
			}
			return cli.ShowAppHelp(c)
		},
		EnableBashCompletion: false,
		ExitErrHandler:       func(*cli.Context, error) {},
		OnUsageError:         usageError,
	}
}

func main() {
	os.Exit(run(os.Args))
}

// run executes the CLI and maps errors to cryptsetup's exit codes, printing
// exactly one line on stderr for a failure.
func run(args []string) int {
	app := newApp()
	args = popt(app, args)
	err := app.Run(args)
	code := exitOK
	if err != nil {
		code = exitParams
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if msg := strings.TrimSpace(err.Error()); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
	}
	if verboseFlag || verbose(args) {
		// cryptsetup -v ends every command with its status on stdout.
		if code == exitOK {
			fmt.Println("Command successful.")
		} else {
			fmt.Printf("Command failed with code -%d (%s).\n", code, exitReasons[code])
		}
	}
	return code
}

// exitReasons are cryptsetup's texts for its exit codes.
var exitReasons = map[int]string{
	exitParams:     "wrong or missing parameters",
	exitPermission: "no permission or bad passphrase",
	exitMemory:     "out of memory",
	exitDevice:     "wrong device or file specified",
	exitBusy:       "device already exists or device is busy",
}

// verboseFlag is the parsed -v of the verb that ran.
var verboseFlag bool

// verbose reports whether -v/--verbose is among the options (for runs
// whose options did not parse).
func verbose(args []string) bool {
	for _, a := range args[1:] {
		switch a {
		case "--":
			return false
		case "-v", "--verbose", "-v=true", "--verbose=true":
			return true
		}
	}
	return false
}

// popt rearranges args the way cryptsetup's popt accepts them: options may
// stand anywhere, before the verb or after the device. The result has the
// verb first, then every option, then the positional arguments in order, so
// urfave/cli (which stops at the first positional) sees them all.
func popt(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	takesValue := map[string]bool{}
	byVerb := map[string]*cli.Command{}
	for _, c := range app.Commands {
		byVerb[c.Name] = c
		for _, a := range c.Aliases {
			byVerb[a] = c
		}
		for _, f := range c.Flags {
			_, isBool := f.(*cli.BoolFlag)
			for _, n := range f.Names() {
				takesValue[n] = !isBool
			}
		}
	}
	var flags, pos []string
	verb := ""
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			name := strings.TrimLeft(a, "-")
			if len(a) > 2 && a[1] != '-' && takesValue[a[1:2]] {
				if _, known := takesValue[name]; !known {
					// popt's -S5: a short option with its value attached.
					flags = append(flags, a[:2], a[2:])
					continue
				}
			}
			flags = append(flags, a)
			if !strings.Contains(name, "=") && takesValue[name] {
				if i+1 == len(rest) {
					// A value option without its value: leave the line
					// as it is, so the verb reports it.
					return args
				}
				i++
				flags = append(flags, rest[i])
			}
			continue
		}
		if verb == "" {
			if _, ok := byVerb[a]; ok {
				verb = a
				continue
			}
		}
		pos = append(pos, a)
	}
	if verb == "" {
		return args
	}
	out := []string{args[0], verb}
	out = append(out, flags...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}
