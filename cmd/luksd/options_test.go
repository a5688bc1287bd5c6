package main

import "testing"

// TestOptionTableHonest: every option luksd refuses as unsupported on a
// verb is one of cryptsetup's, taken by that action in cryptsetup, and not
// defined by the verb (a verb that defines it honours it, and the entry
// would be dead); every luksd extension is defined by its verb.
func TestOptionTableHonest(t *testing.T) {
	app := newApp()
	defines := func(verb, name string) bool {
		cmd := findCommand(app, verb)
		if cmd == nil {
			t.Fatalf("no verb %s", verb)
		}
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				if n == name {
					return true
				}
			}
		}
		return false
	}
	for verb, opts := range unsupported {
		for name := range opts {
			cs, ok := cryptsetupOptions[name]
			switch {
			case !ok:
				t.Errorf("unsupported %s --%s: not a cryptsetup option", verb, name)
			case cs.actions != nil && !contains(cs.actions, verb):
				t.Errorf("unsupported %s --%s: cryptsetup refuses it there already", verb, name)
			case defines(verb, name):
				t.Errorf("unsupported %s --%s: the verb defines the flag, the entry is dead", verb, name)
			}
		}
	}
	for verb, names := range luksdExtensions {
		for _, name := range names {
			if !defines(verb, name) {
				t.Errorf("extension %s --%s: the verb does not define it", verb, name)
			}
		}
	}
}
