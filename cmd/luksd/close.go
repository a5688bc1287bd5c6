package main

import (
	"fmt"
	"os"

	"github.com/luksd/luksd/daemon"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "close",
		Aliases:   []string{"luksClose", "remove", "plainClose", "loopaesClose", "tcryptClose", "bitlkClose", "fvault2Close"},
		Usage:     "flush, detach and stop an active volume",
		ArgsUsage: "NAME",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "deferred", Usage: "a volume in use closes once it is released"},
			&cli.BoolFlag{Name: "cancel-deferred", Usage: "take back a deferred close"},
		},
		Action: closeAction,
	})
}

func closeAction(c *cli.Context) error {
	arg, name, ok, err := volumeArg(c)
	if err != nil {
		return err
	}
	if !ok {
		return exitf(exitDevice, "Device %s is not active.", arg)
	}
	switch {
	case c.Bool("cancel-deferred"):
		if !daemon.Alive(name) {
			return exitf(exitDevice, "Device %s is not active.", name)
		}
		return daemon.CancelDeferred(name)
	case c.Bool("deferred"):
		return closeDeferred(name)
	}
	return closeVolume(name)
}

// closeDeferred is close --deferred: as device-mapper's deferred removal,
// a volume in use (mounted, held) stays until it is released, then closes.
func closeDeferred(name string) error {
	if !daemon.Alive(name) {
		return closeVolume(name) // cleans up after a dead daemon
	}
	warning, deferred, err := daemon.CloseDeferred(name)
	if warning != "" {
		fmt.Fprintf(os.Stderr, "WARNING: %s: %s\n", name, warning)
	}
	if deferred {
		fmt.Printf("Device %s is still active and scheduled for deferred removal.\n", name)
	}
	return err
}

// closeVolume asks name's daemon to flush, detach and exit, and waits until
// it has; a daemon that died is cleaned up after.
func closeVolume(name string) error {
	if !daemon.Alive(name) {
		if cleanStale(name) {
			return nil
		}
		return exitf(exitDevice, "Device %s is not active.", name)
	}
	warning, err := daemon.Close(name)
	if warning != "" {
		// Closed; writes that failed earlier were never written again.
		fmt.Fprintf(os.Stderr, "WARNING: %s: %s\n", name, warning)
	}
	return err
}

// volumeArg takes status's and close's argument and maps it with
// daemon.ResolveName; arg is the argument as given, for messages.
// Arguments after the first are ignored, as cryptsetup ignores them.
func volumeArg(c *cli.Context) (arg, name string, ok bool, err error) {
	if c.NArg() < 1 {
		return "", "", false, exitf(exitParams, "Command requires device name as argument.")
	}
	arg = c.Args().First()
	name, ok, err = daemon.ResolveName(arg)
	return arg, name, ok, err
}
