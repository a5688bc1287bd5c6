package devtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

func TestPowerCuts(t *testing.T) {
	before, r := recordSample()
	var got []string
	r.PowerCuts(before, 8, func(what string, img []byte) { got = append(got, fmt.Sprint(img)) })
	sort.Strings(got)
	want := []string{"[0 0 0 0]", "[1 0 0 0]", "[1 0 0 0]", "[1 0 3 0]", "[1 2 0 0]", "[1 2 3 0]", "[1 2 3 0]"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("images %v, want %v", got, want)
	}
	// Above the limit: prefixes, suffixes and singles of 5 writes.
	r = NewRecorder(MemOf(make([]byte, 5)))
	for i := 0; i < 5; i++ {
		r.WriteAt([]byte{byte(i + 1)}, int64(i))
	}
	n := 0
	r.PowerCuts(make([]byte, 5), 3, func(string, []byte) { n++ })
	if n != 2*6+5+1 {
		t.Fatalf("%d images above the limit, want %d", n, 2*6+5+1)
	}
}
