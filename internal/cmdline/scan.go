// Package cmdline reads a command line the way the popt library reads
// cryptsetup's: options anywhere, before the action or after the device;
// long options as --name value or --name=value; short ones clustered
// (-qv) or with the value attached (-S5, -S=5); numbers as C's strtoll and
// strtoull read them, sizes with cryptsetup's unit suffixes. Which options
// exist, and what an action accepts, is the caller's.
package cmdline

import (
	"errors"
	"strings"
)

// Kind is what an option takes.
type Kind int

const (
	None   Kind = iota // a switch
	Text               // a string
	Uint32             // CRYPT_ARG_UINT32
	Int32              // CRYPT_ARG_INT32 (key slots, token ids)
	Uint64             // CRYPT_ARG_UINT64
	Size               // CRYPT_ARG_UINT64 with unit suffixes (--luks2-*-size, --device-size)
)

// Option is one option as found on the line.
type Option struct {
	Name  string // long name
	Typed string // as typed, for messages
	Value string
	Set   bool // value present
}

// Scanner collects a command line's options and positionals.
type Scanner struct {
	Names  map[string]Kind // the long options
	Shorts map[byte]string // short letters to long names
	// Check is called on each option with a value as it is read, before
	// the rest of the line (popt's callback); it may rewrite the value.
	Check func(o *Option, kind Kind) error

	Opts []Option
	Pos  []string
}

// Scan reads args left to right. A help, usage or version option ends it
// (special names it; after is what follows it); an unknown or malformed
// option is an error there and then, as popt stops at it. The errors are
// popt's one-line messages.
func (sc *Scanner) Scan(args []string) (special string, after []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			sc.Pos = append(sc.Pos, args[i+1:]...)
			return "", nil, nil
		case strings.HasPrefix(a, "--"):
			special, i, err = sc.long(args, i)
		case len(a) > 1 && a[0] == '-':
			special, i, err = sc.cluster(args, i)
		default:
			sc.Pos = append(sc.Pos, a)
		}
		if err != nil || special != "" {
			return special, args[i+1:], err
		}
	}
	return "", nil, nil
}

// long reads the long option args[i] and its value (the next argument
// unless given with =); it returns the index of the last argument used.
func (sc *Scanner) long(args []string, i int) (special string, last int, err error) {
	a := args[i]
	name, value, hasValue := strings.Cut(a[2:], "=")
	switch name {
	case "help", "usage", "version":
		return name, i, nil
	}
	kind, ok := sc.Names[name]
	if !ok {
		return "", i, errors.New(a + ": unknown option")
	}
	o := Option{Name: name, Typed: "--" + name, Value: value, Set: hasValue}
	if kind == None && hasValue {
		return "", i, errors.New(a + ": option does not take an argument")
	}
	if kind != None && !hasValue {
		if i+1 == len(args) {
			return "", i, errors.New(a + ": missing argument")
		}
		i++
		o.Value, o.Set = args[i], true
	}
	return "", i, sc.add(o, kind)
}

// cluster reads the short options of args[i] (-qv, -S5, -S 5): a value
// option ends the cluster, taking the rest of it (without a leading '=')
// or else the next argument.
func (sc *Scanner) cluster(args []string, i int) (special string, last int, err error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		switch a[j] {
		case '?':
			return "help", i, nil
		case 'V':
			return "version", i, nil
		}
		name, ok := sc.Shorts[a[j]]
		if !ok {
			return "", i, errors.New(a + ": unknown option")
		}
		o := Option{Name: name, Typed: "-" + a[j:j+1]}
		kind := sc.Names[name]
		if kind == None {
			sc.Opts = append(sc.Opts, o)
			continue
		}
		if v := a[j+1:]; v != "" {
			o.Value, o.Set = strings.TrimPrefix(v, "="), true
		} else if i+1 < len(args) {
			i++
			o.Value, o.Set = args[i], true
		} else {
			return "", i, errors.New(o.Typed + ": missing argument")
		}
		return "", i, sc.add(o, kind)
	}
	return "", i, nil
}

// add checks an option with a value and notes it.
func (sc *Scanner) add(o Option, kind Kind) error {
	if sc.Check != nil {
		if err := sc.Check(&o, kind); err != nil {
			return err
		}
	}
	sc.Opts = append(sc.Opts, o)
	return nil
}
