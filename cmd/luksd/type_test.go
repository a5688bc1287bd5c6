package main

import "testing"

// TestTypeOptionLikeCryptsetup: --type on the verbs that load a header.
// cryptsetup 2.6.1 takes "", "luks" and the header's own version spelt
// luksN or LUKSN; any other type (plain, luks3, tcrypt, LUKS, Luks2) makes
// the device "not a valid LUKS device" (exit 1) and nothing is changed.
// config loads LUKS2 whatever --type says; luksUUID fails silently.
func TestTypeOptionLikeCryptsetup(t *testing.T) {
	w := newWorkspace(t)
	k0, k1 := w.key("k0", "type pass 0"), w.key("k1", "type pass 1")
	const uuid = "12345678-9abc-def0-1234-56789abcdef0"
	pb := []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	for _, v := range []struct{ own, other string }{{"luks2", "luks1"}, {"luks1", "luks2"}} {
		t.Run(v.own, func(t *testing.T) {
			w := newWorkspace(t)
			tw := newTwin(w, k0, append([]string{"--type", v.own, "--uuid", uuid}, pb...)...)
			for _, typ := range []string{"plain", "luks3", "tcrypt", "LUKS", "Luks2", v.other} {
				tw.run("", "-v", "luksDump", "--type", typ, "IMG")
				tw.run("", "luksDump", "--type", typ, "--dump-volume-key", "-q", "-d", k0, "IMG")
				tw.run("", "-v", "erase", "-q", "--type", typ, "IMG")
				tw.run("", "-v", "luksAddKey", "--type", typ, "-d", k0, "IMG", k1)
				tw.run("", "luksRemoveKey", "--type", typ, "-d", k0, "IMG")
				tw.run("", "luksKillSlot", "-q", "--type", typ, "IMG", "0")
				tw.run("", "luksChangeKey", "--type", typ, "-d", k0, "IMG", k1)
				tw.run("", "-v", "luksUUID", "--type", typ, "IMG")
				tw.run("", "luksUUID", "--type", typ, "--uuid", "0"+uuid[1:], "IMG")
				tw.run("", "-v", "isLuks", "--type", typ, "IMG")
			}
			for _, typ := range []string{"", "luks", v.own, map[string]string{"luks1": "LUKS1", "luks2": "LUKS2"}[v.own]} {
				tw.run("", "-v", "isLuks", "--type", typ, "IMG")
				tw.run("", "luksUUID", "--type", typ, "IMG")
			}
			// config reads LUKS2 only, whatever --type says.
			for _, typ := range []string{"plain", "luks3", "LUKS", v.other, v.own} {
				tw.run("", "-v", "config", "--type", typ, "--label", "L"+typ, "IMG")
			}
		})
	}
}
