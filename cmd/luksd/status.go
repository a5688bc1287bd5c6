package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/blockdev/s3"
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
		if blockdev.Scheme(arg) == "s3" {
			// Not here: it may be open on another host.
			writeS3Status(os.Stdout, arg, false)
		}
		return exitf(exitDevice, "")
	}
	s, err := daemon.Active(name)
	if err != nil {
		return err
	}
	if s == nil {
		fmt.Printf("%s is inactive.\n", statusPath(arg))
		return exitf(exitDevice, "")
	}
	return writeStatus(os.Stdout, statusPath(arg), s, blockdev.Busy(s.BusyPath()))
}

// statusPath is how status names the volume in its first line, as
// cryptsetup does: a path as given, a bare name under /dev/mapper.
func statusPath(arg string) string {
	if strings.Contains(arg, "/") {
		return arg
	}
	return "/dev/mapper/" + arg
}

// writeStatus prints a volume's status in cryptsetup status's layout and
// words (2.6.1, checked against a dm-crypt mapping of the same volume in
// the VM), then luksd's own lines: the header device, the claim, the
// frontend, its kernel block device and how /dev/mapper/NAME is made.
func writeStatus(w io.Writer, path string, s *daemon.State, inUse bool) error {
	bw := bufio.NewWriter(w)
	if inUse {
		fmt.Fprintf(bw, "%s is active and is in use.\n", path)
	} else {
		fmt.Fprintf(bw, "%s is active.\n", path)
	}
	fmt.Fprintf(bw, "  type:    %s\n", s.Type)
	if s.Reencryption != "" {
		fmt.Fprintf(bw, "  reencryption:  %s\n", s.Reencryption) // sic: two spaces, as cryptsetup
	}
	fmt.Fprintf(bw, "  cipher:  %s\n", s.Cipher)
	fmt.Fprintf(bw, "  keysize: %d bits\n", s.KeySize*8)
	fmt.Fprintf(bw, "  key location: luksd daemon (pid %d)\n", s.PID)
	fmt.Fprintf(bw, "  device:  %s\n", s.Image)
	if file := loopBackingFile(s.Image); file != "" {
		fmt.Fprintf(bw, "  loop:    %s\n", file)
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
		fmt.Fprintf(bw, "  flags:   discards \n") // sic: cryptsetup ends each flag with a space
	}
	if s.Header != "" && s.Header != s.Image {
		fmt.Fprintf(bw, "  header:  %s\n", s.Header)
	}
	if s.Reencryption != "" {
		writeReencryptProgress(bw, s) // reencrypt_online.go
	}
	if s.Failed {
		// luksd's own line: dm-crypt has no such state.
		fmt.Fprintf(bw, "  failed:  a request's handling panicked; writes fail with EIO until the volume is closed and opened again\n")
	}
	if s.Claim != "" {
		// The kernel shows dm-crypt's claim under /sys/block/*/holders;
		// luksd's is a process's, so status names it.
		fmt.Fprintf(bw, "  holder:  luksd pid %d, exclusive (%s)\n", s.PID, s.Claim)
	}
	if blockdev.Scheme(s.Image) == "s3" {
		writeS3Status(bw, s.Image, true)
	}
	fmt.Fprintf(bw, "  frontend: %s\n", s.Frontend)
	if s.Frontend == "serve" { // a named serve: an NBD export, no block device
		fmt.Fprintf(bw, "  export:  %s\n", s.Device)
	} else {
		fmt.Fprintf(bw, "  block device: %s\n", s.Device)
	}
	switch s.MapperKind {
	case "dm":
		fmt.Fprintf(bw, "  mapping: %s, device-mapper linear over %s\n", s.Mapper, s.Device)
	case "symlink":
		fmt.Fprintf(bw, "  mapping: %s, symlink to %s\n", s.Mapper, s.Device)
	}
	return bw.Flush()
}

// statusStoreTimeout bounds status's requests to a store: status answers
// at once, as cryptsetup's, rather than wait out a store that is down.
const statusStoreTimeout = 5 * time.Second

// writeS3Status prints what an S3 volume's store records: its chunk
// size (for an active volume) and who holds its lease until when, or why
// the store could not say.
func writeS3Status(w io.Writer, location string, active bool) {
	st, err := s3.Connect(location)
	if err != nil {
		fmt.Fprintf(w, "  store:   %v\n", err)
		return
	}
	st.Timeout = statusStoreTimeout
	if active {
		if m, err := s3.ReadManifest(st); err == nil {
			fmt.Fprintf(w, "  chunk size: %d bytes\n", m.ChunkSize)
		}
	}
	holder, until, err := s3.Lease(st)
	switch {
	case err != nil:
		fmt.Fprintf(w, "  lease:   unknown (%v)\n", err)
	case holder != "":
		fmt.Fprintf(w, "  lease:   %s until %s\n", holder, until.Local().Format(time.RFC3339))
	}
}

// loopBackingFile returns the file behind a loop device, as cryptsetup
// status shows it, or "".
func loopBackingFile(dev string) string {
	if !strings.HasPrefix(dev, "/dev/loop") {
		return ""
	}
	b, err := os.ReadFile("/sys/block/" + strings.TrimPrefix(dev, "/dev/") + "/loop/backing_file")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
