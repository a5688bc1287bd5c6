package main

import (
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "config",
		Usage:     "set persistent LUKS2 header attributes (--label, --subsystem)",
		ArgsUsage: "<device>",
		Flags: flagSet(typeFlags, []cli.Flag{
			&cli.StringFlag{Name: "label", Usage: "new `LABEL`"},
			&cli.StringFlag{Name: "subsystem", Usage: "new `SUBSYSTEM`"},
			&cli.StringFlag{Name: "header", Usage: "detached header `FILE`"},
		}),
		Action: config,
	})
}

func config(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	var label, subsystem *string
	if c.IsSet("label") {
		s := c.String("label")
		label = &s
	}
	if c.IsSet("subsystem") {
		s := c.String("subsystem")
		subsystem = &s
	}
	hp := headerPath(c, dev)
	d, _, err := openDevice(hp, false)
	if err != nil {
		return err
	}
	isLUKS := luks2.IsLUKS(d)
	d.Close()
	if !isLUKS {
		return exitf(exitParams, "Device %s is not a valid LUKS2 device.", hp)
	}
	h, f, err := readHeaderOfType(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if h.Version() != 2 {
		return exitf(exitParams, "Device %s is not a valid LUKS2 device.", headerPath(c, dev))
	}
	if label == nil && subsystem == nil {
		return nil
	}
	if err := h.SetLabel(f, label, subsystem); err != nil {
		return headerError(headerPath(c, dev), err)
	}
	return syncHeader(f)
}
