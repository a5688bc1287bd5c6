package luks2

import (
	"os"
	"strings"
	"testing"

	"github.com/luksd/luksd/internal/testtool"
)

// TestDumpMatchesCryptsetupForRareFields: persistent flags, mandatory
// requirements and keyslot priorities print as cryptsetup prints them.
func TestDumpMatchesCryptsetupForRareFields(t *testing.T) {
	cases := []struct {
		name string
		edit func(r *node)
		want string
	}{
		{"flags", func(r *node) {
			r.get("config").set("flags", jArray(jString("allow-discards"), jString("no-read-workqueue")))
		}, "Flags:       \tallow-discards no-read-workqueue \n"},
		{"requirements", func(r *node) {
			r.get("config").set("requirements", obj("mandatory", jArray(jString("future-feature"))))
		}, "Requirements:\tfuture-feature \n"},
		{"priorities", func(r *node) {
			r.get("keyslots").get("1").set("priority", jInt(2))
			r.get("keyslots").get("0").set("priority", jInt(0))
		}, "\tPriority:   preferred\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, root := freshImage(t)
			tc.edit(root)
			writeRawJSON(t, d, root.compact())
			img := testtool.Image(t, 0)
			if err := os.WriteFile(img, d.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			h, _ := readHdr(t, img)
			mine := dumpText(t, h, DumpOptions{})
			if !strings.Contains(mine, tc.want) {
				t.Fatalf("dump lacks %q:\n%s", tc.want, mine)
			}
			sameLines(t, tc.name, mine, cryptsetup(t, "luksDump", img))
		})
	}
}
