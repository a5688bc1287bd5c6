package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/daemon"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "status",
		Usage:     "show the status of an active volume",
		ArgsUsage: "NAME",
		Action:    statusAction,
	})
}

func statusAction(c *cli.Context) error {
	arg, name, ok, err := volumeArg(c)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Printf("%s is inactive.\n", arg)
		return exitf(exitDevice, "")
	}
	s, err := daemon.Active(name)
	if err != nil {
		return err
	}
	if s == nil {
		// As typed: "/dev/mapper/x is inactive." for /dev/mapper/x.
		fmt.Printf("%s is inactive.\n", arg)
		return exitf(exitDevice, "")
	}
	return writeStatus(os.Stdout, s, blockdev.Busy(s.Device))
}

// writeStatus prints a volume's status in cryptsetup status's layout, with
// the frontend and its kernel block device added.
func writeStatus(w io.Writer, s *daemon.State, inUse bool) error {
	bw := bufio.NewWriter(w)
	if inUse {
		fmt.Fprintf(bw, "%s is active and is in use.\n", s.Name)
	} else {
		fmt.Fprintf(bw, "%s is active.\n", s.Name)
	}
	fmt.Fprintf(bw, "  type:    %s\n", s.Type)
	fmt.Fprintf(bw, "  cipher:  %s\n", s.Cipher)
	fmt.Fprintf(bw, "  keysize: %d bits\n", s.KeySize*8)
	fmt.Fprintf(bw, "  key location: luksd daemon (pid %d)\n", s.PID)
	fmt.Fprintf(bw, "  device:  %s\n", s.Image)
	if s.Header != "" && s.Header != s.Image {
		fmt.Fprintf(bw, "  header:  %s\n", s.Header)
	}
	if s.Claim != "" {
		// The kernel shows dm-crypt's claim under /sys/block/*/holders;
		// luksd's is a process's, so status names it.
		fmt.Fprintf(bw, "  holder:  luksd pid %d, exclusive (%s)\n", s.PID, s.Claim)
	}
	fmt.Fprintf(bw, "  sector size:  %d\n", s.SectorSize)
	fmt.Fprintf(bw, "  offset:  %d sectors\n", s.Offset/512)
	fmt.Fprintf(bw, "  size:    %d sectors\n", s.Size/512)
	if s.Skipped != 0 {
		fmt.Fprintf(bw, "  skipped: %d sectors\n", s.Skipped)
	}
	mode := "read/write"
	if s.ReadOnly {
		mode = "readonly"
	}
	if s.Suspended {
		mode += " (suspended)"
	}
	fmt.Fprintf(bw, "  mode:    %s\n", mode)
	if s.AllowDiscards {
		fmt.Fprintf(bw, "  flags:   discards\n")
	}
	fmt.Fprintf(bw, "  frontend: %s\n", s.Frontend)
	fmt.Fprintf(bw, "  block device: %s\n", s.Device)
	return bw.Flush()
}
