package main

import (
	"strconv"
	"strings"

	"github.com/luksd/luksd/internal/cmdline"
)

// After popt has read the line and the action has refused the options it
// does not take, cryptsetup's main() makes a last round of usage checks,
// then stops there with --test-args or runs the action. verifyLine is that
// round, in cryptsetup 2.6.1's order, so --test-args answers what the real
// run would, and a real run refuses the line before it asks for anything.

// lineOptions are the options of a line by name (old names resolved), the
// last value winning, as popt stores them.
type lineOptions struct {
	values   map[string]string
	keyFiles int // every --key-file/-d counts, as cryptsetup's callback counts them
}

func newLineOptions(opts []cmdline.Option) lineOptions {
	lo := lineOptions{values: map[string]string{}}
	for _, o := range opts {
		name := o.Name
		if alias, ok := optionAliases[name]; ok {
			name = alias
		}
		if name == "key-file" {
			lo.keyFiles++
		}
		lo.values[name] = o.Value
	}
	return lo
}

func (lo lineOptions) set(name string) bool { _, ok := lo.values[name]; return ok }

// number is a numeric option's value (popt's callback has made it plain
// decimal), 0 when unset.
func (lo lineOptions) number(name string) int64 {
	n, _ := strconv.ParseInt(lo.values[name], 10, 64)
	return n
}

// deviceType is cryptsetup's device_type for verb: what an old action
// name implies, else --type, else "luks"; none ("") with --refresh, which
// asks the device.
func deviceType(verb string, lo lineOptions) string {
	implied := map[string]string{
		"plainOpen": "plain", "create": "plain", "luksOpen": "luks", "loopaesOpen": "loopaes",
		"tcryptOpen": "tcrypt", "bitlkOpen": "bitlk", "fvault2Open": "fvault2",
		"tcryptDump": "tcrypt", "bitlkDump": "bitlk", "fvault2Dump": "fvault2",
		"luksErase": "luks", "luksConfig": "luks2",
	}
	if lo.set("refresh") || verb == "refresh" {
		return ""
	}
	if t, ok := implied[verb]; ok {
		return t
	}
	if t, ok := lo.values["type"]; ok {
		return t
	}
	return "luks"
}

// verifyLine makes cryptsetup's checks between the option table and the
// action (main() and the action's verify function).
func verifyLine(verb string, lo lineOptions) error {
	if verb == "refresh" {
		lo.values["refresh"] = "" // cryptsetup's refresh is open --refresh
	}
	dt := deviceType(verb, lo)
	if lo.keyFiles > 1 && dt != "tcrypt" {
		return usageErrorf("Only one --key-file argument is allowed.")
	}
	if lo.set("pbkdf") && !validPBKDF(lo.values["pbkdf"]) {
		return usageErrorf("Password-based key derivation function (PBKDF) can be only pbkdf2 or argon2i/argon2id.")
	}
	if lo.set("pbkdf-force-iterations") && lo.set("iter-time") {
		return usageErrorf("PBKDF forced iterations cannot be combined with iteration time option.")
	}
	if lo.set("keyslot-cipher") != lo.set("keyslot-key-size") {
		return usageErrorf("Options --keyslot-cipher and --keyslot-key-size must be used together.")
	}
	var msg string
	switch canonicalVerb(verb) {
	case "open", "plainOpen", "create":
		msg = verifyOpen(dt, lo)
	case "close":
		if lo.set("cancel-deferred") && lo.set("deferred") {
			msg = "Options --cancel-deferred and --deferred cannot be used at the same time."
		}
	case "config":
		if lo.set("priority") && !lo.set("key-slot") {
			msg = "Keyslot specification is required."
		}
	case "luksFormat":
		msg = verifyFormat(lo)
	case "luksAddKey":
		if lo.set("unbound") && lo.number("key-size") == 0 {
			msg = "Key size is required with --unbound option."
		}
	case "resize":
		if lo.set("device-size") && lo.set("size") {
			msg = "Options --device-size and --size cannot be combined."
		}
	case "reencrypt":
		switch {
		case lo.set("reduce-device-size") && lo.set("device-size"):
			msg = "Options --reduce-device-size and --data-size cannot be combined." // sic
		case lo.set("active-name") && (dt == "luks1" || dt == "LUKS1"):
			msg = "Option --active-name can be set only for LUKS2 device."
		case lo.set("active-name") && lo.set("force-offline-reencrypt"):
			msg = "Options --active-name and --force-offline-reencrypt cannot be combined."
		}
	case "luksDump":
		if lo.set("unbound") && !lo.set("key-slot") {
			msg = "Keyslot specification is required."
		}
	}
	if msg != "" {
		return usageErrorf("%s", msg)
	}
	return nil
}

// validPBKDF is crypt_parse_pbkdf's list (case does not matter).
func validPBKDF(name string) bool {
	for _, p := range []string{"pbkdf2", "argon2i", "argon2id"} {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

func verifyFormat(lo lineOptions) string {
	switch {
	case lo.set("align-payload") && lo.set("offset"):
		return "Options --align-payload and --offset cannot be combined."
	case lo.set("integrity-no-wipe") && !lo.set("integrity"):
		return "Option --integrity-no-wipe can be used only for format action with integrity extension."
	case lo.set("use-random") && lo.set("use-urandom"):
		return "Only one of --use-[u]random options is allowed."
	}
	return ""
}

// verifyOpen is cryptsetup's verify_open for device type dt ("" when
// none was given).
func verifyOpen(dt string, lo lineOptions) string {
	plainOrLoopAES := dt == "plain" || dt == "loopaes"
	switch {
	case lo.set("persistent") && lo.set("test-passphrase"):
		return "Option --persistent is not allowed with --test-passphrase."
	case lo.set("refresh") && lo.set("test-passphrase"):
		return "Options --refresh and --test-passphrase are mutually exclusive."
	case lo.set("shared") && dt != "plain":
		return "Option --shared is allowed only for open of plain device."
	case lo.set("skip") && !plainOrLoopAES:
		return "Option --skip is supported only for open of plain and loopaes devices."
	case lo.set("offset") && !plainOrLoopAES:
		return "Option --offset with open action is only supported for plain and loopaes devices."
	case lo.set("tcrypt-hidden") && lo.set("allow-discards"):
		return "Option --tcrypt-hidden cannot be combined with --allow-discards."
	case lo.set("sector-size") && dt != "plain":
		return "Sector size option with open action is supported only for plain devices."
	case lo.set("iv-large-sectors") && (dt != "plain" || lo.number("sector-size") <= 512):
		return "Large IV sectors option is supported only for opening plain type device with sector size larger than 512 bytes."
	case lo.set("test-passphrase") && !keyslotType(dt):
		return "Option --test-passphrase is allowed only for open of LUKS, TCRYPT, BITLK and FVAULT2 devices."
	case lo.set("device-size") && lo.set("size"):
		return "Options --device-size and --size cannot be combined."
	case lo.set("unbound") && dt != "" && !strings.HasPrefix(dt, "luks"):
		return "Option --unbound is allowed only for open of luks device."
	case lo.set("unbound") && !lo.set("test-passphrase"):
		return "Option --unbound cannot be used without --test-passphrase."
	}
	return verifyTCRYPTOptions(dt, lo)
}

// verifyTCRYPTOptions is cryptsetup's verify_tcryptdump, which open shares.
func verifyTCRYPTOptions(dt string, lo lineOptions) string {
	switch {
	case (lo.set("tcrypt-hidden") || lo.set("tcrypt-system") || lo.set("tcrypt-backup")) && dt != "tcrypt":
		return "Option --tcrypt-hidden, --tcrypt-system or --tcrypt-backup is supported only for TCRYPT device."
	case (lo.set("veracrypt") || lo.set("disable-veracrypt")) && dt != "tcrypt":
		return "Option --veracrypt or --disable-veracrypt is supported only for TCRYPT device type."
	case lo.set("veracrypt-pim") && lo.set("disable-veracrypt"):
		return "Option --veracrypt-pim is supported only for VeraCrypt compatible devices."
	case lo.set("veracrypt-query-pim") && lo.set("disable-veracrypt"):
		return "Option --veracrypt-query-pim is supported only for VeraCrypt compatible devices."
	case lo.set("veracrypt-query-pim") && lo.set("veracrypt-pim"):
		return "The options --veracrypt-pim and --veracrypt-query-pim are mutually exclusive."
	}
	return ""
}

// otherTypes are the device types cryptsetup opens and luksd does not (a
// type cryptsetup does not know either passes --test-args in both).
var otherTypes = []string{"tcrypt", "bitlk", "fvault2", "loopaes"}

// typeRefusal is what luksd cannot honour for the device type on the
// line, past cryptsetup's checks: a type luksd does not open, a partial
// mapping of a LUKS device.
func typeRefusal(verb string, lo lineOptions) error {
	if canonicalVerb(verb) != "open" {
		return nil
	}
	dt := deviceType(verb, lo)
	if contains(otherTypes, dt) {
		return checkOpenType(dt, lo.set("test-passphrase"))
	}
	if dt == "plain" || lo.set("test-passphrase") {
		return nil
	}
	for _, name := range []string{"device-size", "size"} {
		if lo.set(name) {
			return exitf(exitParams, "Option --%s is not supported by luksd for LUKS devices.", name)
		}
	}
	return nil
}
