package main

import (
	"strings"

	"github.com/luksd/luksd/daemon"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "luksSuspend",
		Usage:     "stop all I/O to an active LUKS volume and wipe its key from the daemon's memory",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{headerFlag},
		Action:    luksSuspend,
	}, &cli.Command{
		Name:      "luksResume",
		Usage:     "unlock a suspended volume again (passphrase or token) and let its I/O go on",
		ArgsUsage: "NAME",
		Flags:     flagSet(typeFlags, keyFlags, tokenFlags),
		Action:    luksResume,
	})
}

// activeLUKS returns the state of the active LUKS volume c names, with
// cryptsetup's answers for one that is not active (exit 4) or not LUKS.
func activeLUKS(c *cli.Context, notLUKS string) (*daemon.State, error) {
	_, name, ok, err := volumeArg(c)
	if err != nil {
		return nil, err
	}
	var st *daemon.State
	if ok {
		if st, err = daemon.Active(name); err != nil {
			return nil, err
		}
	}
	if st == nil {
		return nil, exitf(exitDevice, "Device %s is not active.", c.Args().First())
	}
	if !strings.HasPrefix(st.Type, "LUKS") {
		return nil, exitf(exitParams, notLUKS, st.Name)
	}
	return st, nil
}

// luksSuspend is cryptsetup luksSuspend NAME: the daemon lets requests
// under way finish, holds new ones and wipes the volume key; a mounted
// filesystem just waits.
func luksSuspend(c *cli.Context) error {
	st, err := activeLUKS(c, "This operation is supported only for LUKS device.")
	if err != nil {
		return err
	}
	return daemon.Suspend(st.Name)
}

// luksResume is cryptsetup luksResume NAME: the header is unlocked again
// (tokens first, then the passphrase) and the volume key handed back to
// the daemon, which checks it is the volume's before I/O goes on.
func luksResume(c *cli.Context) error {
	st, err := activeLUKS(c, "%s is not active LUKS device name or header is missing.")
	if err != nil {
		return err
	}
	if t := c.String("type"); t != "" && !typeAdmits(t, int(st.Type[len(st.Type)-1]-'0')) {
		return exitf(exitParams, "%s is not active %s device name.", st.Name, t)
	}
	if !st.Suspended {
		return exitf(exitParams, "Volume %s is not suspended.", st.Name)
	}
	header := st.Header
	if header == "" {
		header = st.Image
	}
	v, err := unlockKeyslot(c, header, true, c.Int("key-slot"), true, true)
	if err != nil {
		return err
	}
	defer v.Close()
	return daemon.Resume(st.Name, v.Key)
}
