package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/luksd/luksd/internal/cmdline"
	"github.com/luksd/luksd/luks2"
	"github.com/urfave/cli/v2"
)

// cryptsetup parses its options with popt before it looks at the action:
// every option of every action is known on every command line, and the
// action then refuses the ones it does not take ("Option --label is not
// allowed with luksDump action.") or ignores them (luksDump --cipher).
// Scripts pass such options freely, so luksd knows cryptsetup 2.6.1's whole
// option table, not just the flags its verbs use.

// csOption is one option of cryptsetup 2.6.1.
type csOption struct {
	kind  cmdline.Kind
	short byte
	// actions, when not nil, are the only actions (of those luksd has)
	// that accept the option; the others refuse it.
	actions []string
}

// cryptsetupOptions is cryptsetup 2.6.1's option table (`cryptsetup
// --usage`), with the actions that accept each restricted option as
// `cryptsetup --test-args ACTION --OPTION` reports them.
var cryptsetupOptions = map[string]csOption{
	"active-name":                 {kind: cmdline.Text},
	"align-payload":               {kind: cmdline.Uint32, actions: []string{"luksFormat"}},
	"allow-discards":              {kind: cmdline.None, actions: []string{"open"}},
	"batch-mode":                  {kind: cmdline.None, short: 'q'},
	"block-size":                  {kind: cmdline.Uint32, short: 'B'},
	"cancel-deferred":             {kind: cmdline.None, actions: []string{"close"}},
	"cipher":                      {kind: cmdline.Text, short: 'c'},
	"debug":                       {kind: cmdline.None},
	"debug-json":                  {kind: cmdline.None},
	"decrypt":                     {kind: cmdline.None},
	"deferred":                    {kind: cmdline.None, actions: []string{"close"}},
	"device-size":                 {kind: cmdline.Size, actions: []string{"open", "resize", "reencrypt"}},
	"disable-external-tokens":     {kind: cmdline.None},
	"disable-keyring":             {kind: cmdline.None},
	"disable-locks":               {kind: cmdline.None},
	"disable-veracrypt":           {kind: cmdline.None, actions: []string{"open"}},
	"dump-json-metadata":          {kind: cmdline.None},
	"dump-master-key":             {kind: cmdline.None},
	"dump-volume-key":             {kind: cmdline.None},
	"encrypt":                     {kind: cmdline.None},
	"force-offline-reencrypt":     {kind: cmdline.None, actions: []string{"reencrypt"}},
	"force-password":              {kind: cmdline.None},
	"hash":                        {kind: cmdline.Text, short: 'h'},
	"header":                      {kind: cmdline.Text},
	"header-backup-file":          {kind: cmdline.Text},
	"hotzone-size":                {kind: cmdline.Size, actions: []string{"reencrypt"}},
	"init-only":                   {kind: cmdline.None},
	"integrity":                   {kind: cmdline.Text, short: 'I', actions: []string{"luksFormat"}},
	"integrity-legacy-padding":    {kind: cmdline.None},
	"integrity-no-journal":        {kind: cmdline.None},
	"integrity-no-wipe":           {kind: cmdline.None, actions: []string{"luksFormat"}},
	"iter-time":                   {kind: cmdline.Uint32, short: 'i', actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "benchmark", "reencrypt"}},
	"iv-large-sectors":            {kind: cmdline.None, actions: []string{"open"}},
	"json-file":                   {kind: cmdline.Text},
	"keep-key":                    {kind: cmdline.None, actions: []string{"reencrypt"}},
	"key-description":             {kind: cmdline.Text},
	"key-file":                    {kind: cmdline.Text, short: 'd'},
	"key-size":                    {kind: cmdline.Uint32, short: 's', actions: []string{"luksFormat", "open", "luksAddKey", "benchmark", "reencrypt"}},
	"key-slot":                    {kind: cmdline.Int32, short: 'S', actions: []string{"luksFormat", "open", "luksDump", "luksAddKey", "luksChangeKey", "config", "token", "luksConvertKey", "luksResume", "reencrypt"}},
	"keyfile-offset":              {kind: cmdline.Uint64},
	"keyfile-size":                {kind: cmdline.Uint32, short: 'l'},
	"keyslot-cipher":              {kind: cmdline.Text, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "reencrypt"}},
	"keyslot-key-size":            {kind: cmdline.Uint32, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "reencrypt"}},
	"label":                       {kind: cmdline.Text, actions: []string{"luksFormat", "config", "reencrypt"}},
	"luks2-keyslots-size":         {kind: cmdline.Size, actions: []string{"luksFormat", "reencrypt"}},
	"luks2-metadata-size":         {kind: cmdline.Size, actions: []string{"luksFormat", "reencrypt"}},
	"master-key-file":             {kind: cmdline.Text},
	"new":                         {kind: cmdline.None, short: 'N'},
	"new-key-slot":                {kind: cmdline.Int32, actions: []string{"luksAddKey"}},
	"new-keyfile":                 {kind: cmdline.Text, actions: []string{"luksAddKey"}},
	"new-keyfile-offset":          {kind: cmdline.Uint64},
	"new-keyfile-size":            {kind: cmdline.Uint32},
	"new-token-id":                {kind: cmdline.Int32, actions: []string{"luksAddKey"}},
	"offset":                      {kind: cmdline.Uint64, short: 'o', actions: []string{"luksFormat", "open", "reencrypt"}},
	"pbkdf":                       {kind: cmdline.Text, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "benchmark", "reencrypt"}},
	"pbkdf-force-iterations":      {kind: cmdline.Uint32, actions: []string{"luksFormat", "luksAddKey", "luksChangeKey", "luksConvertKey", "reencrypt"}},
	"pbkdf-memory":                {kind: cmdline.Uint32},
	"pbkdf-parallel":              {kind: cmdline.Uint32},
	"perf-no_read_workqueue":      {kind: cmdline.None},
	"perf-no_write_workqueue":     {kind: cmdline.None},
	"perf-same_cpu_crypt":         {kind: cmdline.None},
	"perf-submit_from_crypt_cpus": {kind: cmdline.None},
	"persistent":                  {kind: cmdline.None, actions: []string{"open"}},
	"priority":                    {kind: cmdline.Text, actions: []string{"config"}},
	"progress-frequency":          {kind: cmdline.Uint32},
	"progress-json":               {kind: cmdline.None, actions: []string{"luksFormat", "reencrypt"}},
	"readonly":                    {kind: cmdline.None, short: 'r'},
	"reduce-device-size":          {kind: cmdline.Size},
	"refresh":                     {kind: cmdline.None, actions: []string{"open"}},
	"resilience":                  {kind: cmdline.Text},
	"resilience-hash":             {kind: cmdline.Text},
	"resume-only":                 {kind: cmdline.None},
	"sector-size":                 {kind: cmdline.Uint32, actions: []string{"luksFormat", "open", "reencrypt"}},
	"serialize-memory-hard-pbkdf": {kind: cmdline.None, actions: []string{"open"}},
	"shared":                      {kind: cmdline.None, actions: []string{"open"}},
	"size":                        {kind: cmdline.Uint64, short: 'b', actions: []string{"open", "resize"}},
	"skip":                        {kind: cmdline.Uint64, short: 'p', actions: []string{"open"}},
	"subsystem":                   {kind: cmdline.Text, actions: []string{"luksFormat", "config", "reencrypt"}},
	"tcrypt-backup":               {kind: cmdline.None, actions: []string{"open"}},
	"tcrypt-hidden":               {kind: cmdline.None, actions: []string{"open"}},
	"tcrypt-system":               {kind: cmdline.None, actions: []string{"open"}},
	"test-args":                   {kind: cmdline.None},
	"test-passphrase":             {kind: cmdline.None, actions: []string{"open"}},
	"timeout":                     {kind: cmdline.Uint32, short: 't'},
	"token-id":                    {kind: cmdline.Int32},
	"token-only":                  {kind: cmdline.None},
	"token-replace":               {kind: cmdline.None, actions: []string{"token"}},
	"token-type":                  {kind: cmdline.Text},
	"tries":                       {kind: cmdline.Uint32, short: 'T'},
	"type":                        {kind: cmdline.Text, short: 'M'},
	"unbound":                     {kind: cmdline.None, actions: []string{"open", "luksDump", "luksAddKey", "token"}},
	"use-directio":                {kind: cmdline.None},
	"use-fsync":                   {kind: cmdline.None},
	"use-random":                  {kind: cmdline.None, actions: []string{"luksFormat"}},
	"use-urandom":                 {kind: cmdline.None, actions: []string{"luksFormat"}},
	"uuid":                        {kind: cmdline.Text, actions: []string{"luksFormat", "luksUUID", "reencrypt"}},
	"veracrypt":                   {kind: cmdline.None},
	"veracrypt-pim":               {kind: cmdline.Uint32, actions: []string{"open"}},
	"veracrypt-query-pim":         {kind: cmdline.None},
	"verbose":                     {kind: cmdline.None, short: 'v'},
	"verify-passphrase":           {kind: cmdline.None, short: 'y'},
	"volume-key-file":             {kind: cmdline.Text},
	"write-log":                   {kind: cmdline.None},
}

// optionAliases are cryptsetup's old option names.
var optionAliases = map[string]string{
	"dump-master-key": "dump-volume-key",
	"master-key-file": "volume-key-file",
}

// otherActions are cryptsetup 2.6.1's actions (and old names) luksd does
// not have: a script that uses one learns why it failed.
var otherActions = []string{
	"tcryptDump", "bitlkDump", "fvault2Dump", "loopaesOpen", "tcryptOpen", "bitlkOpen", "fvault2Open",
}

// verbAliases are cryptsetup's old action names; messages name the action.
var verbAliases = map[string]string{
	"luksOpen":     "open",
	"luksClose":    "close",
	"luksErase":    "erase",
	"luksConfig":   "config",
	"plainOpen":    "open",
	"create":       "open",
	"refresh":      "open",
	"remove":       "close",
	"plainClose":   "close",
	"loopaesClose": "close",
	"tcryptClose":  "close",
	"bitlkClose":   "close",
	"fvault2Close": "close",
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
	"luksSuspend":       {1, "<device>"},
	"luksResume":        {1, "<device>"},
	"resize":            {1, "<name>"},
	"reencrypt":         {1, "<device>"},
	"convert":           {1, "<device>"},
	"repair":            {1, "<device>"},
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
// Messages are cryptsetup's where it refuses the option for LUKS too;
// cryptsetup's refusals by device type are verifyLine's.
var unsupported = map[string]map[string]string{
	"luksFormat": {
		"integrity":         "",
		"integrity-no-wipe": "",
	},
	"open": {
		"volume-key-file":   "",
		"tcrypt-hidden":     "",
		"tcrypt-system":     "",
		"tcrypt-backup":     "",
		"veracrypt":         "",
		"disable-veracrypt": "",
	},
	"luksAddKey": {"new-token-id": ""},
}

// Every other option of cryptsetup's table that a verb does not define is
// accepted and ignored, because it changes nothing for luksd:
//   - --debug-json, --disable-keyring, --use-directio, --use-fsync:
//     luksd keeps no volume keys in the kernel keyring, and syncs its
//     header writes anyway;
//   - --perf-*, --serialize-memory-hard-pbkdf: dm-crypt workqueue and
//     OOM tuning; luksd runs its crypto on the request's goroutine;
//   - --use-random, --use-urandom: luksd takes volume keys from the
//     kernel's CSPRNG (getrandom), which is what both mean today;
//   - --force-password, --key-description (but on token), and the
//     token options on verbs that do not unlock by token: no password
//     quality library; --timeout only bounds terminal prompts, so verbs
//     that never prompt ignore it;
//   - options of actions luksd does not have (tcrypt), and options an action takes but does not use for LUKS
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

// knownFlags merges cryptsetup's options with the flags luksd's verbs
// define (serve's --socket, open's --frontend, ...): names, and short
// letters to names.
func knownFlags(app *cli.App) (map[string]cmdline.Kind, map[byte]string) {
	names := map[string]cmdline.Kind{}
	shorts := map[byte]string{}
	for n, o := range cryptsetupOptions {
		names[n] = o.kind
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
				kind := cmdline.Text
				if _, isBool := f.(*cli.BoolFlag); isBool {
					kind = cmdline.None
				}
				names[n] = kind
			}
		}
	}
	return names, shorts
}

// popt reads args the way cryptsetup's popt does: options anywhere, before
// the action or after the device; long options as --name value or
// --name=value; short ones clustered (-qv) or with the value attached
// (-S5, -S=5). It checks every option against cryptsetup's table and the
// action, and returns the line urfave/cli should run: the verb, the
// options that verb defines as --name=value, then -- and the positionals.
func popt(app *cli.App, args []string) (parsedLine, error) {
	names, shorts := knownFlags(app)
	sc := cmdline.Scanner{Names: names, Shorts: shorts, Check: checkAtOnce}
	var line parsedLine
	special, after, err := sc.Scan(args[1:])
	if err != nil {
		return line, withCode(exitParams, err)
	}
	if special != "" {
		line.special = special
		return line.withVerb(app, sc.Pos, after), nil
	}
	if len(sc.Pos) == 0 {
		return line, exitf(exitParams, "Argument <action> missing.")
	}
	line.verb = sc.Pos[0]
	pos := sc.Pos[1:]
	typeArg := plainAlias(line.verb, pos)
	cmd, err := findAction(app, line.verb, len(pos))
	if err != nil {
		return line, err
	}
	out, refusal, err := line.actionOptions(cmd, sc.Opts, names)
	if err != nil {
		return line, err
	}
	lo := newLineOptions(sc.Opts)
	if err := verifyLine(line.verb, lo); err != nil {
		return line, err
	}
	if refusal == nil {
		refusal = typeRefusal(line.verb, lo)
	}
	if refusal != nil {
		// What luksd cannot honour is said once cryptsetup's own checks
		// have passed: --test-args too, a script asking learns it.
		return line, refusal
	}
	line.args = append(append([]string{args[0], line.verb}, typeArg...), out...)
	if len(pos) > 0 {
		line.args = append(append(line.args, "--"), pos...)
	}
	return line, nil
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
		if near := nearestAction(app, verb); near != "" {
			return nil, exitf(exitParams, "Unknown action. Did you mean %s?", near)
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
// in cryptsetup's words; one luksd cannot honour is the refusal, reported
// after cryptsetup's later checks (verifyLine); the others are accepted
// and ignored (see above). -v and --test-args are noted in l.
func (l *parsedLine) actionOptions(cmd *cli.Command, opts []cmdline.Option, names map[string]cmdline.Kind) (out []string, refusal, err error) {
	action := canonicalVerb(l.verb)
	defined := map[string]bool{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			defined[n] = true
		}
	}
	var notAllowed []string
	for _, o := range opts {
		name := o.Name
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
			notAllowed = append(notAllowed, name)
			continue
		}
		if defined[name] {
			if names[name] == cmdline.None {
				out = append(out, "--"+name)
			} else {
				out = append(out, "--"+name+"="+o.Value)
			}
			continue
		}
		if !isCS || cs.actions != nil && !contains(cs.actions, action) {
			notAllowed = append(notAllowed, name)
			continue
		}
		if msg, ok := unsupported[action][name]; ok && refusal == nil {
			if msg == "" {
				msg = fmt.Sprintf("Option --%s is not supported by luksd.", name)
			}
			refusal = exitf(exitParams, "%s", msg)
		}
		// Accepted and ignored: see the list above.
	}
	if len(notAllowed) > 0 {
		// cryptsetup names the first in its option table's order.
		first := slices.MinFunc(notAllowed, func(a, b string) int { return optionRank(a) - optionRank(b) })
		return nil, nil, exitf(exitParams, "Option --%s is not allowed with %s action.", first, action)
	}
	return out, refusal, nil
}

// optionOrder is cryptsetup 2.6.1's option table in its own order
// (src/cryptsetup_arg_list.h), in which tools_check_args looks for an
// option the action refuses.
var optionOrder = strings.Fields(`active-name align-payload allow-discards batch-mode cancel-deferred
	cipher debug debug-json deferred device-size decrypt disable-external-tokens disable-keyring
	disable-locks disable-veracrypt dump-json-metadata dump-volume-key encrypt force-password
	force-offline-reencrypt hash header header-backup-file hotzone-size init-only integrity
	integrity-legacy-padding integrity-no-journal integrity-no-wipe iter-time iv-large-sectors
	json-file keep-key key-description key-file key-size key-slot keyfile-offset keyfile-size
	keyslot-cipher keyslot-key-size label luks2-keyslots-size luks2-metadata-size volume-key-file
	new-keyfile new-key-slot new-keyfile-offset new-keyfile-size new-token-id offset pbkdf
	pbkdf-force-iterations pbkdf-memory pbkdf-parallel perf-no_read_workqueue
	perf-no_write_workqueue perf-same_cpu_crypt perf-submit_from_crypt_cpus persistent priority
	progress-json progress-frequency readonly reduce-device-size refresh resilience
	resilience-hash resume-only sector-size serialize-memory-hard-pbkdf shared size skip
	subsystem tcrypt-backup tcrypt-hidden tcrypt-system test-args test-passphrase timeout
	token-id token-only token-replace token-type tries type unbound use-random use-urandom uuid
	veracrypt veracrypt-pim veracrypt-query-pim verbose verify-passphrase block-size new
	use-directio use-fsync write-log`)

// optionRank is name's place in optionOrder; luksd's own options come
// after cryptsetup's.
func optionRank(name string) int {
	if i := slices.Index(optionOrder, name); i >= 0 {
		return i
	}
	return len(optionOrder)
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
func checkAtOnce(o *cmdline.Option, kind cmdline.Kind) error {
	if o.Name == "priority" {
		if _, ok := priorities[o.Value]; !ok {
			return usageErrorf("Option --priority can be only ignore/normal/prefer.")
		}
		return nil
	}
	if kind == cmdline.None || kind == cmdline.Text {
		return nil
	}
	v, err := cmdline.ParseNumber(kind, o.Value, o.Name)
	if err != nil {
		return withCode(exitParams, err)
	}
	o.Value = v
	n, _ := strconv.ParseUint(v, 10, 64)
	bad := usageErrorf("invalid numeric value")
	switch o.Name {
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
		if o.Name == "keyslot-key-size" && n == 0 {
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
