package luks2

import (
	"fmt"
	"slices"
)

// ActivationFlags are the persistent activation flags a LUKS2 header may
// keep in config.flags, in the order cryptsetup 2.6.1 writes them
// (LUKS2_config_set_flags walks its table in this order).
var ActivationFlags = []string{
	"allow-discards",
	"same-cpu-crypt",
	"submit-from-crypt-cpus",
	"no-journal",
	"no-read-workqueue",
	"no-write-workqueue",
}

// SetFlags replaces the persistent activation flags with flags (open
// --persistent): written in cryptsetup's order whatever the order given,
// and an empty list as an empty array, as cryptsetup leaves it. LUKS1
// headers have no flags.
func (h *Header) SetFlags(dev Device, flags []string) error {
	v2, ok := h.v2()
	if !ok {
		return fmt.Errorf("%w: LUKS1 headers have no persistent flags", ErrUnsupported)
	}
	return v2.setFlags(dev, flags)
}

func (h *header) setFlags(dev Device, flags []string) error {
	for _, f := range flags {
		if !slices.Contains(ActivationFlags, f) {
			return fmt.Errorf("unknown activation flag %q", f)
		}
	}
	if err := h.requirementsMet(); err != nil {
		return err
	}
	arr := jArray()
	for _, f := range ActivationFlags {
		if slices.Contains(flags, f) {
			arr.push(jString(f))
		}
	}
	root := h.meta.root.clone()
	root.get("config").set("flags", arr)
	return h.replace(dev, root)
}
