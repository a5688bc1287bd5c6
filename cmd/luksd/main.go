// Command luksd is a userspace dm-crypt/LUKS2 device daemon with
// cryptsetup's command-line language. Each verb group lives in its own file
// and registers its commands from init.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/luksd/luksd/daemon"
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
	// usage: cryptsetup reports it through its usage() ("cryptsetup:
	// MESSAGE" after the usage text), which exits before -v's status line.
	usage bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitf returns an error that makes luksd print the message and exit with code.
func exitf(code int, format string, a ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, a...)}
}

// usageErrorf returns a wrong-parameters error (exit 1) that cryptsetup
// reports as a usage error: no "Command failed" line follows with -v.
func usageErrorf(format string, a ...any) error {
	return &exitError{code: exitParams, err: fmt.Errorf(format, a...), usage: true}
}

// isUsageError reports whether err is one usageErrorf made.
func isUsageError(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.usage
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
	&cli.BoolFlag{Name: "disable-locks", Usage: "do not take cryptsetup's metadata locks (and do not repair a damaged header copy)"},
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

// usageError turns a flag parsing error into cryptsetup's exit code 1
// (popt has already checked the line; this is for luksd's own flags).
func usageError(_ *cli.Context, err error, _ bool) error {
	if strings.HasPrefix(err.Error(), "invalid value") {
		return exitf(exitParams, "invalid numeric value")
	}
	return exitf(exitParams, "%v", err)
}

func newApp() *cli.App {
	// cryptsetup's -h is --hash; help stays reachable as --help and -?.
	cli.HelpFlag = &cli.BoolFlag{Name: "help", Usage: "show help"}
	return &cli.App{
		Name:                 "luksd",
		Usage:                "userspace dm-crypt/LUKS2 volumes served over NBD and ublk",
		Commands:             commands,
		HideHelpCommand:      true,
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
	if filepath.Base(args[0]) == generatorName {
		return runGenerator(args[1:])
	}
	app := newApp()
	if len(args) > 1 && args[1] == "clevis" {
		// clevis's getopts syntax, not cryptsetup's (clevis.go).
		return report(app.Run(args))
	}
	line, err := popt(app, args)
	if err != nil {
		// Like cryptsetup, a line that does not parse ends without the
		// -v status line.
		return report(err)
	}
	switch {
	case line.special != "":
		return printSpecial(app, line, args[0])
	case line.testRun:
		fmt.Println("No action taken. Invoked with --test-args option.")
		return exitOK
	}
	stopProfile := startProfile()
	err = app.Run(line.args)
	stopProfile()
	code := report(err)
	if (verboseFlag || line.verbose) && !isUsageError(err) {
		// cryptsetup -v ends every command with its status on stdout.
		if code == exitOK {
			fmt.Println("Command successful.")
		} else {
			fmt.Printf("Command failed with code -%d (%s).\n", code, exitReasons[code])
		}
	}
	return code
}

// report prints err's message (one line) and returns its exit code.
func report(err error) int {
	if err == nil {
		return exitOK
	}
	if msg := strings.TrimSpace(err.Error()); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	return exitCodeOf(err)
}

// exitCodeOf is err's exit code: an exitError's own, the one a daemon
// reported, or the one cryptsetup gives a daemon failure of its kind;
// exitParams for anything else.
func exitCodeOf(err error) int {
	var ee *exitError
	var se *daemon.StartError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &se):
		return se.Code
	case errors.Is(err, daemon.ErrExists), errors.Is(err, daemon.ErrBusy):
		return exitBusy
	case errors.Is(err, daemon.ErrNotActive), errors.Is(err, daemon.ErrNoDevice):
		return exitDevice
	}
	return exitParams
}

// printSpecial answers --version/-V, --help/-? and --usage, which popt
// handles as it meets them: exit 0 whatever else the line holds.
func printSpecial(app *cli.App, line parsedLine, prog string) int {
	switch line.special {
	case "version":
		fmt.Printf("luksd %s\n", version)
	case "usage":
		// cryptsetup prints its usage on standard error.
		fmt.Fprintln(os.Stderr, "Usage: luksd [-?Vqrvy] [-?|--help] [--usage] [-V|--version] [OPTION...] <action> <action-specific>")
	case "help":
		fmt.Printf("luksd %s\n", version)
		helpArgs := []string{prog, "--help"}
		if cmd := findCommand(app, line.verb); cmd != nil && !cmd.Hidden {
			helpArgs = []string{prog, cmd.Name, "--help"}
		}
		if err := app.Run(helpArgs); err != nil {
			return report(err)
		}
		if len(helpArgs) == 2 {
			writeCompiledDefaults(os.Stdout)
		}
	}
	return exitOK
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
