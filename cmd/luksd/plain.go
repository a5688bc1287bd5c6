package main

import (
	"errors"
	"fmt"

	"github.com/luksd/luksd/daemon"
	"github.com/luksd/luksd/dmcrypt"
	"github.com/luksd/luksd/keyring"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// Plain dm-crypt (open --type plain, plainOpen, create): no header, the
// volume key made from the passphrase each time, the layout given on the
// command line. Defaults are cryptsetup 2.6.1's (`cryptsetup --help`).
const (
	plainCipher  = "aes-cbc-essiv:sha256"
	plainKeyBits = 256
	plainHash    = "ripemd160"
)

// plainFlags are open's options that only plain mode uses (verifyLine
// refuses them for other types, as cryptsetup does).
var plainFlags = []cli.Flag{
	&cli.StringFlag{Name: "cipher", Aliases: []string{"c"}, Usage: "plain: cipher `SPEC` (" + plainCipher + ")"},
	&cli.StringFlag{Name: "hash", Aliases: []string{"h"}, Usage: "plain: passphrase hash `NAME[:BYTES]`, or plain for none (" + plainHash + ")"},
	&cli.Uint64Flag{Name: "key-size", Aliases: []string{"s"}, Usage: "plain: key size in `BITS` (256)"},
	&cli.Uint64Flag{Name: "offset", Aliases: []string{"o"}, Usage: "plain: data start on the device, in 512-byte `SECTORS`"},
	&cli.Uint64Flag{Name: "skip", Aliases: []string{"p"}, Usage: "plain: IV sector of the first sector, in 512-byte `SECTORS`"},
	&cli.Uint64Flag{Name: "size", Aliases: []string{"b"}, Usage: "plain: volume size in 512-byte `SECTORS`"},
	&cli.Uint64Flag{Name: "device-size", Usage: "plain: volume size in `BYTES` (units as cryptsetup's)"},
	&cli.IntFlag{Name: "sector-size", Value: 512, Usage: "plain: encryption sector size in `BYTES`"},
	&cli.BoolFlag{Name: "iv-large-sectors", Usage: "plain: count IVs in sector-size units"},
}

// plainAlias gives the options cryptsetup's other names for open imply:
// --type plain for plainOpen and create (which takes NAME before DEVICE),
// --refresh for refresh.
func plainAlias(verb string, pos []string) (extra []string) {
	switch verb {
	case "create":
		if len(pos) >= 2 {
			pos[0], pos[1] = pos[1], pos[0]
		}
		fallthrough
	case "plainOpen":
		return []string{"--type=plain"}
	case "refresh":
		return []string{"--refresh"} // open --refresh, as in cryptsetup
	}
	return nil
}

// plainSegment is the data area plain mode's options describe on image.
func plainSegment(c *cli.Context, image string) (daemon.Segment, error) {
	seg := daemon.Segment{
		Cipher:         c.String("cipher"),
		Offset:         int64(c.Uint64("offset")) * 512,
		IVOffset:       c.Uint64("skip"),
		SectorSize:     c.Int("sector-size"),
		IVLargeSectors: c.Bool("iv-large-sectors"),
		KeySize:        plainKeyBits / 8,
	}
	if seg.Cipher == "" {
		seg.Cipher = plainCipher
	}
	if c.IsSet("key-size") {
		seg.KeySize = int(c.Uint64("key-size") / 8)
	}
	sp, err := dmcrypt.ParseSpec(seg.Cipher)
	if err != nil {
		return seg, exitf(exitParams, "No known cipher specification pattern detected.")
	}
	if err := sp.CheckKeySize(seg.KeySize); err != nil {
		return seg, exitf(exitParams, "Cipher %s (key size %d bits) is not available.", seg.Cipher, seg.KeySize*8)
	}
	seg.Size = lineSize(c)
	f, real, err := openDevice(image, false)
	if err != nil {
		return seg, err
	}
	f.Close()
	// cryptsetup's device_block_adjust.
	switch {
	case seg.Offset >= real:
		return seg, exitf(exitParams, "Requested offset is beyond real size of device %s.", image)
	case seg.Size > real-seg.Offset:
		return seg, exitf(exitParams, "Device %s is too small.", image)
	}
	size := seg.Size
	if size == 0 {
		size = real - seg.Offset
	}
	if size%int64(seg.SectorSize) != 0 {
		return seg, exitf(exitParams, "Device size is not aligned to requested sector size.")
	}
	return seg, nil
}

// plainKey makes plain mode's volume key of n bytes as cryptsetup does:
// a key file (not standard input) is the key itself, n bytes at
// --keyfile-offset; a passphrase is hashed with --hash (ripemd160), or
// with --hash plain taken as it is, cut or zero-padded to n bytes.
func plainKey(c *cli.Context, image string, n int) (*keyring.Secret, error) {
	hash := c.String("hash")
	if hash == "" {
		hash = plainHash
	}
	src := keySource(c)
	if src.KeyFile != "" && src.KeyFile != "-" {
		hash = "plain"
	}
	if hash == "plain" && src.KeyFile != "" {
		// Unhashed from a key file or standard input: exactly the key.
		src.Size = int64(n)
	}
	pass, err := readPassphrase(src, fmt.Sprintf("Enter passphrase for %s: ", image), c.Bool("verify-passphrase"))
	if err != nil {
		return nil, err
	}
	defer pass.Wipe()
	key, err := keyring.NewSecret(n)
	if err != nil {
		return nil, withCode(exitMemory, err)
	}
	if hash == "plain" {
		copy(key.Bytes(), pass.Bytes()) // process_key without a hash
		return key, nil
	}
	switch err := luks2.PlainKey(hash, key.Bytes(), pass.Bytes()); {
	case errors.Is(err, luks2.ErrUnsupported):
		key.Wipe()
		return nil, exitf(exitParams, "Hash algorithm %s not supported.", hash)
	case err != nil:
		key.Wipe()
		return nil, exitf(exitParams, "Key processing error (using hash %s).", hash)
	}
	return key, nil
}

// plainSpec is the daemon's description of a plain mapping.
func plainSpec(name, image string, seg daemon.Segment, opts daemon.Options) daemon.Spec {
	return daemon.Spec{Name: name, Location: image, Type: "PLAIN", KeySlot: -1, Segment: seg, Options: opts}
}
