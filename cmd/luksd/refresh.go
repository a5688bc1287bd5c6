package main

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/keyring"
	"github.com/urfave/cli/v2"
)

// refreshVolume is open --refresh (cryptsetup refresh NAME): the key is
// asked for again and must be the active volume's, as cryptsetup reloads
// the mapping with it, and the volume takes the discard setting of the
// line (--allow-discards, or the header's persistent flag) while it runs,
// and the size of its device now (a segment of dynamic size), as dm-crypt
// does after the reload. --readonly changes nothing, as in
// cryptsetup, which keeps the active mapping's read-only flag; --perf-*
// change nothing for luksd.
func refreshVolume(c *cli.Context) error {
	arg := c.Args().Get(c.NArg() - 1) // NAME, after DEVICE when both are given
	name, ok, err := daemon.ResolveName(arg)
	if err != nil {
		return err
	}
	var st *daemon.State
	if ok {
		if st, err = daemon.Active(name); err != nil {
			return err
		}
	}
	if st == nil {
		return exitf(exitDevice, "Device %s is not active.", arg)
	}
	key, discards, size, err := refreshKey(c, st)
	if err != nil {
		return err
	}
	defer key.Wipe()
	err = daemon.CheckKey(name, key)
	if errors.Is(err, daemon.ErrInvalid) {
		return exitf(exitPermission, "No key available with this passphrase.")
	}
	if err != nil {
		return err
	}
	// dm-crypt's reload measures the device again: a dynamic segment
	// takes what the device now holds past the offset.
	if err := daemon.Resize(name, size); err != nil {
		return err
	}
	if discards != st.AllowDiscards {
		if err := daemon.SetDiscards(name, discards); err != nil {
			return err
		}
	}
	if strings.HasPrefix(st.Type, "LUKS") { // plain mode keeps no flags
		storeFlags(c, cmp.Or(st.Header, st.Image))
	}
	return nil
}

// refreshKey unlocks the key of the active volume st as open would, and
// says whether discards are asked for (the option, or a LUKS2 header's
// persistent flag) and the volume's size: the segment's, or the line's
// for plain mode, 0 meaning to the end of the device.
func refreshKey(c *cli.Context, st *daemon.State) (*keyring.Secret, bool, int64, error) {
	if !strings.HasPrefix(st.Type, "LUKS") {
		key, err := plainKey(c, st.Image, st.KeySize)
		return key, c.Bool("allow-discards"), lineSize(c), err
	}
	header := st.Header
	if header == "" {
		header = st.Image
	}
	v, err := unlockKeyslot(c, header, true, c.Int("key-slot"), true, true)
	if err != nil {
		return nil, false, 0, err
	}
	return v.Key, c.Bool("allow-discards") || slices.Contains(v.Header.Flags(), "allow-discards"), v.Segment.Size, nil
}
