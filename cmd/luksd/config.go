package main

import (
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "config",
		Aliases:   []string{"luksConfig"},
		Usage:     "set persistent LUKS2 header attributes (--label, --subsystem, --priority with --key-slot)",
		ArgsUsage: "<device>",
		Flags: flagSet(typeFlags, []cli.Flag{
			&cli.StringFlag{Name: "label", Usage: "new `LABEL`"},
			&cli.StringFlag{Name: "subsystem", Usage: "new `SUBSYSTEM`"},
			&cli.StringFlag{Name: "priority", Usage: "keyslot priority: `ignore`, normal or prefer"},
			&cli.IntFlag{Name: "key-slot", Aliases: []string{"S"}, Value: -1, Usage: "the keyslot `NUM` whose priority is set"},
			headerFlag,
		}),
		Action: config,
	})
}

// priorities are config --priority's words.
var priorities = map[string]luks2.Priority{
	"ignore": luks2.PriorityIgnore,
	"normal": luks2.PriorityNormal,
	"prefer": luks2.PriorityPrefer,
}

func config(c *cli.Context) error {
	dev, err := oneDevice(c)
	if err != nil {
		return err
	}
	// Its words, and that -S comes with it, were checked with the line.
	prio, setPrio := priorities[c.String("priority")]
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
	// cryptsetup loads the header as LUKS2 whatever --type says.
	h, f, err := readLUKS2Header(c, dev, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if !setPrio && label == nil && subsystem == nil {
		return exitf(exitParams, "Option --priority, --label or --subsystem is missing.")
	}
	if setPrio {
		if err := checkSlot(h, c.Int("key-slot"), true); err != nil {
			return err
		}
	}
	return f.edit(func() error {
		if setPrio {
			if err := h.SetPriority(f, c.Int("key-slot"), prio); err != nil {
				return headerError(hp, err)
			}
		}
		if label != nil || subsystem != nil {
			return headerErrorOrNil(hp, h.SetLabel(f, label, subsystem))
		}
		return nil
	})
}
