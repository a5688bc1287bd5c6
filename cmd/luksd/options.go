package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// cryptsetup parses its options with popt before it looks at the action:
// every option of every action is known on every command line, and the
// action then refuses the ones it does not take ("Option --label is not
// allowed with luksDump action.") or ignores them (luksDump --cipher).
// Scripts pass such options freely, so luksd knows cryptsetup 2.6.1's whole
// option table, not just the flags its verbs use.

// flagKind is what an option takes.
type flagKind int

const (
	flagNone   flagKind = iota // a switch
	flagText                   // a string
	flagUint32                 // CRYPT_ARG_UINT32
	flagInt32                  // CRYPT_ARG_INT32 (key slots, token ids)
	flagUint64                 // CRYPT_ARG_UINT64
	flagSize                   // CRYPT_ARG_UINT64 with unit suffixes (--luks2-*-size, --device-size)
)

// csOption is one option of cryptsetup 2.6.1.
type csOption struct {
	kind  flagKind
	short byte
	// actions, when not nil, are the only actions (of those luksd has)
	// that accept the option; the others refuse it.
	actions []string
}

// cryptsetupOptions is cryptsetup 2.6.1's option table (`cryptsetup
// --usage`), with the actions that accept each restricted option as
// `cryptsetup --test-args ACTION --OPTION` reports them.
var cryptsetupOptions = map[string]csOption{
	"active-name":                 {kind: flagText},
	"align-payload":               {kind: flagUint32, actions: []string{"luksFormat"}},
	"allow-discards":              {kind: flagNone, actions: []string{"open"}},
	"batch-mode":                  {kind: flagNone, short: 'q'},
	"block-size":                  {kind: flagUint32, short: 'B'},
	"cancel-deferred":             {kind: flagNone, actions: []string{"close"}},
	"cipher":                      {kind: flagText, short: 'c'},
	"debug":                       {kind: flagNone},
	"debug-json":                  {kind: flagNone},
	"decrypt":                     {kind: flagNone},
	"deferred":                    {kind: flagNone, actions: []string{"close"}},
	"device-size":                 {kind: flagSize, actions: []string{"open"}},
	"disable-external-tokens":     {kind: flagNone},
	"disable-keyring":             {kind: flagNone},
	"disable-locks":               {kind: flagNone},
	"disable-veracrypt":           {kind: flagNone, actions: []string{"open"}},
	"dump-json-metadata":          {kind: flagNone},
	"dump-master-key":             {kind: flagNone},
	"dump-volume-key":             {kind: flagNone},
	"encrypt":                     {kind: flagNone},
	"force-offline-reencrypt":     {kind: flagNone, actions: []string{}},
	"force-password":              {kind: flagNone},
	"hash":                        {kind: flagText, short: 'h'},
	"header":                      {kind: flagText},
	"header-backup-file":          {kind: flagText},
	"hotzone-size":                {kind: flagSize, actions: []string{}},
	"init-only":                   {kind: flagNone},
	"integrity":                   {kind: flagText, short: 'I', actions: []string{"luksFormat"}},
	"integrity-legacy-padding":    {kind: flagNone},
	"integrity-no-journal":        {kind: flagNone},
	"integrity-no-wipe":           {kind: flagNone, actions: []string{"luksFormat"}},
	"iter-time":                   {kind: flagUint32, short: 'i', actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "benchmark"}},
	"iv-large-sectors":            {kind: flagNone, actions: []string{"open"}},
	"json-file":                   {kind: flagText},
	"keep-key":                    {kind: flagNone, actions: []string{}},
	"key-description":             {kind: flagText},
	"key-file":                    {kind: flagText, short: 'd'},
	"key-size":                    {kind: flagUint32, short: 's', actions: []string{"luksFormat", "open", "luksAddKey", "benchmark"}},
	"key-slot":                    {kind: flagInt32, short: 'S', actions: []string{"luksFormat", "open", "luksDump", "luksAddKey", "luksChangeKey", "config", "token", "luksConvertKey"}},
	"keyfile-offset":              {kind: flagUint64},
	"keyfile-size":                {kind: flagUint32, short: 'l'},
	"keyslot-cipher":              {kind: flagText, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey"}},
	"keyslot-key-size":            {kind: flagUint32, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey"}},
	"label":                       {kind: flagText, actions: []string{"luksFormat", "config"}},
	"luks2-keyslots-size":         {kind: flagSize, actions: []string{"luksFormat"}},
	"luks2-metadata-size":         {kind: flagSize, actions: []string{"luksFormat"}},
	"master-key-file":             {kind: flagText},
	"new":                         {kind: flagNone, short: 'N'},
	"new-key-slot":                {kind: flagInt32, actions: []string{"luksAddKey"}},
	"new-keyfile":                 {kind: flagText, actions: []string{"luksAddKey"}},
	"new-keyfile-offset":          {kind: flagUint64},
	"new-keyfile-size":            {kind: flagUint32},
	"new-token-id":                {kind: flagInt32, actions: []string{"luksAddKey"}},
	"offset":                      {kind: flagUint64, short: 'o', actions: []string{"luksFormat", "open"}},
	"pbkdf":                       {kind: flagText, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "benchmark"}},
	"pbkdf-force-iterations":      {kind: flagUint32, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey"}},
	"pbkdf-memory":                {kind: flagUint32},
	"pbkdf-parallel":              {kind: flagUint32},
	"perf-no_read_workqueue":      {kind: flagNone},
	"perf-no_write_workqueue":     {kind: flagNone},
	"perf-same_cpu_crypt":         {kind: flagNone},
	"perf-submit_from_crypt_cpus": {kind: flagNone},
	"persistent":                  {kind: flagNone, actions: []string{"open"}},
	"priority":                    {kind: flagText, actions: []string{"config"}},
	"progress-frequency":          {kind: flagUint32},
	"progress-json":               {kind: flagNone, actions: []string{"luksFormat"}},
	"readonly":                    {kind: flagNone, short: 'r'},
	"reduce-device-size":          {kind: flagSize},
	"refresh":                     {kind: flagNone, actions: []string{"open"}},
	"resilience":                  {kind: flagText},
	"resilience-hash":             {kind: flagText},
	"resume-only":                 {kind: flagNone},
	"sector-size":                 {kind: flagUint32, actions: []string{"luksFormat", "open"}},
	"serialize-memory-hard-pbkdf": {kind: flagNone, actions: []string{"open"}},
	"shared":                      {kind: flagNone, actions: []string{"open"}},
	"size":                        {kind: flagUint64, short: 'b', actions: []string{"open"}},
	"skip":                        {kind: flagUint64, short: 'p', actions: []string{"open"}},
	"subsystem":                   {kind: flagText, actions: []string{"luksFormat", "config"}},
	"tcrypt-backup":               {kind: flagNone, actions: []string{"open"}},
	"tcrypt-hidden":               {kind: flagNone, actions: []string{"open"}},
	"tcrypt-system":               {kind: flagNone, actions: []string{"open"}},
	"test-args":                   {kind: flagNone},
	"test-passphrase":             {kind: flagNone, actions: []string{"open"}},
	"timeout":                     {kind: flagUint32, short: 't'},
	"token-id":                    {kind: flagInt32},
	"token-only":                  {kind: flagNone},
	"token-replace":               {kind: flagNone, actions: []string{"token"}},
	"token-type":                  {kind: flagText},
	"tries":                       {kind: flagUint32, short: 'T'},
	"type":                        {kind: flagText, short: 'M'},
	"unbound":                     {kind: flagNone, actions: []string{"open", "luksDump", "luksAddKey", "token"}},
	"use-directio":                {kind: flagNone},
	"use-fsync":                   {kind: flagNone},
	"use-random":                  {kind: flagNone, actions: []string{"luksFormat"}},
	"use-urandom":                 {kind: flagNone, actions: []string{"luksFormat"}},
	"uuid":                        {kind: flagText, actions: []string{"luksFormat", "luksUUID"}},
	"veracrypt":                   {kind: flagNone},
	"veracrypt-pim":               {kind: flagUint32, actions: []string{"open"}},
	"veracrypt-query-pim":         {kind: flagNone},
	"verbose":                     {kind: flagNone, short: 'v'},
	"verify-passphrase":           {kind: flagNone, short: 'y'},
	"volume-key-file":             {kind: flagText},
	"write-log":                   {kind: flagNone},
}

// optionAliases are cryptsetup's old option names.
var optionAliases = map[string]string{
	"dump-master-key": "dump-volume-key",
	"master-key-file": "volume-key-file",
}

// otherActions are cryptsetup 2.6.1's actions (and old names) luksd does
// not have: a script that uses one learns why it failed.
var otherActions = []string{
	"repair", "reencrypt", "resize", "luksSuspend", "luksResume", "convert",
	"tcryptDump", "bitlkDump", "fvault2Dump", "create", "plainOpen", "loopaesOpen", "tcryptOpen",
	"bitlkOpen", "fvault2Open", "remove", "plainClose", "loopaesClose", "tcryptClose", "bitlkClose",
	"fvault2Close",
}

// verbAliases are cryptsetup's old action names; messages name the action.
var verbAliases = map[string]string{
	"luksOpen":  "open",
	"luksClose": "close",
	"luksErase": "erase",
}

// verbArgs are the positional arguments each action requires, in
// cryptsetup's words ("luksDump: requires <device> as arguments"). open
// also checks for its name itself (open.go): cryptsetup says something else
// when only the name is missing.
var verbArgs = map[string]struct {
	min   int
	usage string
}{
	"luksFormat":        {1, "<device> [<new key file>]"},
	"luksDump":          {1, "<device>"},
	"isLuks":            {1, "<device>"},
	"luksUUID":          {1, "<device>"},
	"luksAddKey":        {1, "<device> [<new key file>]"},
	"luksRemoveKey":     {1, "<device> [<key file>]"},
	"luksChangeKey":     {1, "<device> [<key file>]"},
	"luksKillSlot":      {2, "<device> <key slot>"},
	"erase":             {1, "<device>"},
	"config":            {1, "<device>"},
	"luksHeaderBackup":  {1, "<device>"},
	"luksHeaderRestore": {1, "<device>"},
	"open":              {1, "<device> [--type <type>] [<name>]"},
	"close":             {1, "<name>"},
	"status":            {1, "<name>"},
	"token":             {2, "<add|remove|import|export> <device>"},
	"luksConvertKey":    {1, "<device> [<key file>]"},
}

// refusesOptions reports whether action is one of cryptsetup's, whose
// option restrictions apply; luksd's own verbs (serve, version) take what
// they define.
func refusesOptions(action string) bool {
	_, ok := verbArgs[action]
	return ok || action == "benchmark"
}

// luksdExtensions are options luksd takes on a cryptsetup action that
// cryptsetup 2.6.1 refuses there.
var luksdExtensions = map[string][]string{
	"benchmark": {"sector-size"}, // luksd measures 4096-byte sectors too
	// A remote volume is created with its size (refused for a local one).
	"luksFormat": {"device-size"},
}

// unsupported are options cryptsetup uses on an action and luksd cannot
// honour there: ignoring them would do something else than asked, so they
// are refused. An option leaves this list by the verb defining the flag.
// Messages are cryptsetup's where it refuses the option for LUKS too.
var unsupported = map[string]map[string]string{
	"luksFormat": {
		"integrity":         "",
		"integrity-no-wipe": "Option --integrity-no-wipe can be used only for format action with integrity extension.",
		"keyslot-cipher":    "",
		"keyslot-key-size":  "",
	},
	"open": {
		"device-size":       "",
		"persistent":        "",
		"refresh":           "",
		"size":              "",
		"volume-key-file":   "",
		"token-only":        "",
		"offset":            "Option --offset with open action is only supported for plain and loopaes devices.",
		"skip":              "Option --skip is supported only for open of plain and loopaes devices.",
		"shared":            "Option --shared is allowed only for open of plain device.",
		"sector-size":       "Sector size option with open action is supported only for plain devices.",
		"iv-large-sectors":  "Large IV sectors option is supported only for opening plain type device with sector size larger than 512 bytes.",
		"tcrypt-hidden":     "Option --tcrypt-hidden, --tcrypt-system or --tcrypt-backup is supported only for TCRYPT device.",
		"tcrypt-system":     "Option --tcrypt-hidden, --tcrypt-system or --tcrypt-backup is supported only for TCRYPT device.",
		"tcrypt-backup":     "Option --tcrypt-hidden, --tcrypt-system or --tcrypt-backup is supported only for TCRYPT device.",
		"veracrypt":         "Option --veracrypt or --disable-veracrypt is supported only for TCRYPT device type.",
		"disable-veracrypt": "Option --veracrypt or --disable-veracrypt is supported only for TCRYPT device type.",
	},
	// Deferred removal is a device-mapper feature; a luksd volume closes
	// when asked or not at all.
	"close":          {"deferred": "", "cancel-deferred": ""},
	"luksAddKey":     {"keyslot-cipher": "", "keyslot-key-size": "", "new-token-id": "", "token-only": ""},
	"luksChangeKey":  {"keyslot-cipher": "", "keyslot-key-size": ""},
	"luksConvertKey": {"keyslot-cipher": "", "keyslot-key-size": ""},
}

// Every other option of cryptsetup's table that a verb does not define is
// accepted and ignored, because it changes nothing for luksd:
//   - --debug-json, --disable-external-tokens, --disable-keyring,
//     --use-directio, --use-fsync: luksd has no token plugins or kernel
//     keyring use, and syncs its header writes anyway;
//   - --perf-*, --serialize-memory-hard-pbkdf: dm-crypt workqueue and
//     OOM tuning; luksd runs its crypto on the request's goroutine;
//   - --use-random, --use-urandom: luksd takes volume keys from the
//     kernel's CSPRNG (getrandom), which is what both mean today;
//   - --force-password, --timeout, --key-description, --token-id,
//     --token-type (but on token): no password quality library, no
//     token unlocking; a prompt without a timeout only waits;
//   - options of actions luksd does not have (reencrypt, tcrypt,
//     resize), and options an action takes but does not use for LUKS
//     (open --cipher, luksDump --cipher, luksUUID --key-file), which
//     cryptsetup ignores as well.

// parsedLine is a command line in popt's reading.
type parsedLine struct {
	args    []string // for urfave/cli: luksd, verb, --flag=value..., --, positionals
	verb    string   // the action as typed ("" when none)
	special string   // "help", "usage" or "version": print it and exit 0
	testRun bool     // --test-args: check the line, run nothing
	verbose bool     // -v: end with cryptsetup's status line
}

// flagInfo is what the parser knows about one option name.
type flagInfo struct {
	kind flagKind
	cs   bool // in cryptsetup's table
}

// knownFlags merges cryptsetup's options with the flags luksd's verbs
// define (serve's --socket, open's --frontend, ...): names, and short
// letters to names.
func knownFlags(app *cli.App) (map[string]flagInfo, map[byte]string) {
	names := map[string]flagInfo{}
	shorts := map[byte]string{}
	for n, o := range cryptsetupOptions {
		names[n] = flagInfo{kind: o.kind, cs: true}
		if o.short != 0 {
			shorts[o.short] = n
		}
	}
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			fn := f.Names()
			for _, n := range fn {
				if len(n) == 1 {
					if _, ok := shorts[n[0]]; !ok {
						shorts[n[0]] = fn[0]
					}
					continue
				}
				if _, ok := names[n]; ok {
					continue
				}
				kind := flagText
				if _, isBool := f.(*cli.BoolFlag); isBool {
					kind = flagNone
				}
				names[n] = flagInfo{kind: kind}
			}
		}
	}
	return names, shorts
}

// option is one option as found on the line.
type option struct {
	name  string // long name
	typed string // as typed, for messages
	value string
	set   bool // value present
}

// popt reads args the way cryptsetup's popt does: options anywhere, before
// the action or after the device; long options as --name value or
// --name=value; short ones clustered (-qv) or with the value attached
// (-S5, -S=5). It checks every option against cryptsetup's table and the
// action, and returns the line urfave/cli should run: the verb, the
// options that verb defines as --name=value, then -- and the positionals.
func popt(app *cli.App, args []string) (parsedLine, error) {
	names, shorts := knownFlags(app)
	sc := scanner{names: names, shorts: shorts}
	var line parsedLine
	special, after, err := sc.scan(args[1:])
	if err != nil {
		return line, err
	}
	if special != "" {
		line.special = special
		return line.withVerb(app, sc.pos, after), nil
	}
	if len(sc.pos) == 0 {
		return line, exitf(exitParams, "Argument <action> missing.")
	}
	line.verb = sc.pos[0]
	pos := sc.pos[1:]
	cmd, err := findAction(app, line.verb, len(pos))
	if err != nil {
		return line, err
	}
	out, err := line.actionOptions(cmd, sc.opts, names)
	if err != nil {
		return line, err
	}
	line.args = append([]string{args[0], line.verb}, out...)
	if len(pos) > 0 {
		line.args = append(append(line.args, "--"), pos...)
	}
	return line, nil
}

// scanner collects a command line's options and positionals.
type scanner struct {
	names  map[string]flagInfo
	shorts map[byte]string
	opts   []option
	pos    []string
}

// scan reads args left to right. A help, usage or version option ends it
// (special names it; after is what follows it); an unknown or malformed
// option is an error there and then, as popt stops at it.
func (sc *scanner) scan(args []string) (special string, after []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			sc.pos = append(sc.pos, args[i+1:]...)
			return "", nil, nil
		case strings.HasPrefix(a, "--"):
			special, i, err = sc.long(args, i)
		case len(a) > 1 && a[0] == '-':
			special, i, err = sc.cluster(args, i)
		default:
			sc.pos = append(sc.pos, a)
		}
		if err != nil || special != "" {
			return special, args[i+1:], err
		}
	}
	return "", nil, nil
}

// long reads the long option args[i] and its value (the next argument
// unless given with =); it returns the index of the last argument used.
func (sc *scanner) long(args []string, i int) (special string, last int, err error) {
	a := args[i]
	name, value, hasValue := strings.Cut(a[2:], "=")
	switch name {
	case "help", "usage", "version":
		return name, i, nil
	}
	info, ok := sc.names[name]
	if !ok {
		return "", i, exitf(exitParams, "%s: unknown option", a)
	}
	o := option{name: name, typed: "--" + name, value: value, set: hasValue}
	if info.kind == flagNone && hasValue {
		return "", i, exitf(exitParams, "%s: option does not take an argument", a)
	}
	if info.kind != flagNone && !hasValue {
		if i+1 == len(args) {
			return "", i, exitf(exitParams, "%s: missing argument", a)
		}
		i++
		o.value, o.set = args[i], true
	}
	if err := checkAtOnce(&o, info.kind); err != nil {
		return "", i, err
	}
	sc.opts = append(sc.opts, o)
	return "", i, nil
}

// cluster reads the short options of args[i] (-qv, -S5, -S 5): a value
// option ends the cluster, taking the rest of it (without a leading '=')
// or else the next argument.
func (sc *scanner) cluster(args []string, i int) (special string, last int, err error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		switch a[j] {
		case '?':
			return "help", i, nil
		case 'V':
			return "version", i, nil
		}
		name, ok := sc.shorts[a[j]]
		if !ok {
			return "", i, exitf(exitParams, "%s: unknown option", a)
		}
		o := option{name: name, typed: "-" + a[j:j+1]}
		kind := sc.names[name].kind
		if kind == flagNone {
			sc.opts = append(sc.opts, o)
			continue
		}
		if v := a[j+1:]; v != "" {
			o.value, o.set = strings.TrimPrefix(v, "="), true
		} else if i+1 < len(args) {
			i++
			o.value, o.set = args[i], true
		} else {
			return "", i, exitf(exitParams, "%s: missing argument", o.typed)
		}
		if err := checkAtOnce(&o, kind); err != nil {
			return "", i, err
		}
		sc.opts = append(sc.opts, o)
		break
	}
	return "", i, nil
}

// findAction returns the command for verb, which has nargs arguments:
// cryptsetup checks for an action it knows and the arguments' count before
// it looks at the options.
func findAction(app *cli.App, verb string, nargs int) (*cli.Command, error) {
	cmd := findCommand(app, verb)
	if cmd == nil {
		if contains(otherActions, verb) {
			return nil, exitf(exitParams, "Action %s is not supported by luksd.", verb)
		}
		return nil, exitf(exitParams, "Unknown action.")
	}
	action := canonicalVerb(verb)
	if want, ok := verbArgs[action]; ok && nargs < want.min {
		return nil, exitf(exitParams, "%s: requires %s as arguments", action, want.usage)
	}
	return cmd, nil
}

// actionOptions checks opts against the action's: each one the verb's
// command defines becomes --name or --name=value for urfave/cli; one
// cryptsetup refuses for the action, or luksd cannot honour, is refused
// in cryptsetup's words; the others are accepted and ignored (see above).
// -v and --test-args are noted in l.
func (l *parsedLine) actionOptions(cmd *cli.Command, opts []option, names map[string]flagInfo) ([]string, error) {
	action := canonicalVerb(l.verb)
	defined := map[string]bool{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			defined[n] = true
		}
	}
	var out []string
	for _, o := range opts {
		name := o.name
		if alias, ok := optionAliases[name]; ok {
			name = alias
		}
		switch name {
		case "test-args":
			l.testRun = true
			continue
		case "verbose":
			l.verbose = true
		}
		cs, isCS := cryptsetupOptions[name]
		if isCS && cs.actions != nil && !contains(cs.actions, action) && refusesOptions(action) && !contains(luksdExtensions[action], name) {
			// luksd defines it (the flag set is shared) but cryptsetup
			// refuses it here: luksKillSlot -S, luksChangeKey --new-keyfile.
			return nil, exitf(exitParams, "Option --%s is not allowed with %s action.", name, action)
		}
		if defined[name] {
			if names[name].kind == flagNone {
				out = append(out, "--"+name)
			} else {
				out = append(out, "--"+name+"="+o.value)
			}
			continue
		}
		if !isCS || cs.actions != nil && !contains(cs.actions, action) {
			return nil, exitf(exitParams, "Option --%s is not allowed with %s action.", name, action)
		}
		if msg, ok := unsupported[action][name]; ok {
			if msg == "" {
				msg = fmt.Sprintf("Option --%s is not supported by luksd.", name)
			}
			return nil, exitf(exitParams, "%s", msg)
		}
		// Accepted and ignored: see the list above.
	}
	return out, nil
}

// withVerb notes the verb (for --help VERB) among the positionals before
// and the arguments after a help or version option.
func (l parsedLine) withVerb(app *cli.App, before, after []string) parsedLine {
	for _, a := range append(append([]string(nil), before...), after...) {
		if findCommand(app, a) != nil {
			l.verb = a
			break
		}
	}
	return l
}

// checkAtOnce is what cryptsetup's option callback (basic_options_cb)
// does as it meets an option, before the rest of the line is read: a
// number is read as its type is (tools_parse_arg_value) and handed on in
// plain decimal, then a few values are refused as usage errors.
func checkAtOnce(o *option, kind flagKind) error {
	if o.name == "priority" {
		if _, ok := priorities[o.value]; !ok {
			return usageErrorf("Option --priority can be only ignore/normal/prefer.")
		}
		return nil
	}
	if kind == flagNone || kind == flagText {
		return nil
	}
	v, err := parseNumber(kind, o.value, o.name)
	if err != nil {
		return err
	}
	o.value = v
	n, _ := strconv.ParseUint(v, 10, 64)
	bad := usageErrorf("invalid numeric value")
	switch o.name {
	case "key-slot":
		if strings.HasPrefix(v, "-") {
			return usageErrorf("Key slot is invalid.")
		}
	case "device-size":
		if n == 0 {
			return bad
		}
		if n%512 != 0 {
			return usageErrorf("Device size must be multiple of 512 bytes sector.")
		}
	case "hotzone-size":
		if n == 0 {
			return usageErrorf("Invalid max reencryption hotzone size specification.")
		}
	case "key-size", "keyslot-key-size":
		if o.name == "keyslot-key-size" && n == 0 {
			return bad
		}
		if n%8 != 0 {
			return usageErrorf("Key size must be a multiple of 8 bits")
		}
	case "reduce-device-size":
		if n > 1<<30 {
			return usageErrorf("Maximum device reduce size is 1 GiB.")
		}
		if n%512 != 0 {
			return usageErrorf("Reduce size must be multiple of 512 bytes sector.")
		}
	case "sector-size":
		if !luks2.ValidSectorSize(2, int(n)) {
			return usageErrorf("Unsupported encryption sector size.")
		}
	}
	return nil
}

// parseNumber reads a numeric option's value as cryptsetup 2.6.1 does:
// strtoll/strtoull in base 10 that must take the whole (non-empty) value
// and fit the type (uint32, int32, uint64, where strtoull lets "-1" wrap),
// or a size with unit suffixes (tools_string_to_size). It returns the
// value in decimal.
func parseNumber(kind flagKind, v, name string) (string, error) {
	bad := exitf(exitParams, "invalid numeric value")
	switch kind {
	case flagSize:
		n, ok := parseSize(v)
		if !ok {
			return "", exitf(exitParams, "Invalid size specification in parameter --%s.", name)
		}
		return strconv.FormatUint(n, 10), nil
	case flagInt32:
		n, ok := cStrtoll(v)
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return "", bad
		}
		return strconv.FormatInt(n, 10), nil
	}
	n, ok := cStrtoull(v)
	if !ok || kind == flagUint32 && n > math.MaxUint32 {
		return "", bad
	}
	return strconv.FormatUint(n, 10), nil
}

// cStrtoull is strtoull(v, &end, 10) that must end at the end of v:
// leading white space, a sign ('-' negates modulo 2^64), digits; false on
// anything else or overflow.
func cStrtoull(v string) (uint64, bool) {
	neg, digits, ok := cNumber(v)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// cStrtoll is cStrtoull for strtoll: int64 range, overflow refused.
func cStrtoll(v string) (int64, bool) {
	neg, digits, ok := cNumber(v)
	if !ok {
		return 0, false
	}
	if neg {
		digits = "-" + digits
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// cNumber splits v into strtol's parts: white space, sign, digits (all of
// the rest).
func cNumber(v string) (neg bool, digits string, ok bool) {
	t := strings.TrimLeft(v, " \t\n\v\f\r")
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	if t == "" || strings.Trim(t, "0123456789") != "" {
		return false, "", false
	}
	return neg, t, true
}

// parseSize is cryptsetup's tools_string_to_size: digits first, then an
// optional unit: s/S (512 bytes); k, m, g, t (any case) alone or with
// "iB" (1024 based), or with "B" (1000 based); no overflow.
func parseSize(v string) (uint64, bool) {
	end := len(v) - len(strings.TrimLeft(v, "0123456789"))
	if end == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:end], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := v[end:]
	if unit == "" {
		return n, true
	}
	base := uint64(1024)
	switch {
	case len(unit) == 2 && unit[1] == 'B':
		base = 1000
	case len(unit) == 3 && unit[1:] == "iB", len(unit) == 1:
	default:
		return 0, false
	}
	var mult uint64
	switch unit[0] {
	case 's', 'S':
		mult = 512
	case 'k', 'K':
		mult = base
	case 'm', 'M':
		mult = base * base
	case 'g', 'G':
		mult = base * base * base
	case 't', 'T':
		mult = base * base * base * base
	default:
		return 0, false
	}
	if n != 0 && n*mult/n != mult {
		return 0, false
	}
	return n * mult, true
}

// findCommand returns the command named (or aliased) verb, hidden ones
// included.
func findCommand(app *cli.App, verb string) *cli.Command {
	for _, c := range app.Commands {
		if c.Name == verb || contains(c.Aliases, verb) {
			return c
		}
	}
	return nil
}

// canonicalVerb is the action name cryptsetup uses in messages.
func canonicalVerb(verb string) string {
	if v, ok := verbAliases[verb]; ok {
		return v
	}
	return verb
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
