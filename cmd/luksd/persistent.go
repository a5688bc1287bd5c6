package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// lineFlags maps open's options to the LUKS2 activation flags they stand
// for. luksd itself honours only --allow-discards (the --perf-* options
// tune dm-crypt's workqueues); all are stored, so that cryptsetup and the
// kernel apply them when they open the volume.
var lineFlags = []struct{ option, flag string }{
	{"allow-discards", "allow-discards"},
	{"perf-same_cpu_crypt", "same-cpu-crypt"},
	{"perf-submit_from_crypt_cpus", "submit-from-crypt-cpus"},
	{"perf-no_read_workqueue", "no-read-workqueue"},
	{"perf-no_write_workqueue", "no-write-workqueue"},
}

// perfFlags are the --perf-* options, defined on open so that --persistent
// can store them; they change nothing else.
func perfFlags() []cli.Flag {
	var fs []cli.Flag
	for _, f := range lineFlags[1:] {
		fs = append(fs, &cli.BoolFlag{Name: f.option, Hidden: true})
	}
	return fs
}

// storeFlags is open --persistent (and refresh --persistent) once the
// volume is active: the header's activation flags become those of the
// line, replacing what it had, so a line without any clears them. As in
// cryptsetup 2.6.1, a failure is reported after the activation it does
// not undo, and the command still succeeds.
func storeFlags(c *cli.Context, image string) {
	if !c.Bool("persistent") {
		return
	}
	var flags []string
	for _, f := range lineFlags {
		if c.Bool(f.option) {
			flags = append(flags, f.flag)
		}
	}
	err := writeFlags(c, image, flags)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, "Device activated but cannot make flags persistent.")
	}
}

func writeFlags(c *cli.Context, image string, flags []string) error {
	h, f, err := readHeaderOfType(c, image, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if h.Version() != 2 {
		return exitf(exitParams, "This operation is supported only for LUKS2 device.")
	}
	return f.edit(func() error { return headerErrorOrNil(headerPath(c, image), h.SetFlags(f, flags)) })
}
