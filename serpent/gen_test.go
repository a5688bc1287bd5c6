package serpent

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strings"
	"testing"
)

// The round functions in rounds_gen.go, with the bitsliced S-box circuits
// written out, are derived from the S-box table by the search below, run with
//
//	go test ./serpent -run TestGenerated -update
//
// Without -update the test checks that the file is what the search makes.
var update = flag.Bool("update", false, "rewrite rounds_gen.go")

// A truth table holds a 4-input boolean function: bit n is its value on the
// nibble n, whose bit i is input xi (bit j of word xi in the bitsliced form).
var inputTT = [4]uint16{0xaaaa, 0xcccc, 0xf0f0, 0xff00}

const ones = 0xffff

// gate is one operation of a circuit: an input, or op applied to gates a, b.
type gate struct {
	op   byte // 'x' input, '^', '&', '|', 'n' (a &^ b), '~' (not a)
	a, b int
	tt   uint16
}

type circuit struct{ g []gate }

func newCircuit() *circuit {
	c := &circuit{}
	for i, tt := range inputTT {
		c.g = append(c.g, gate{op: 'x', a: i, tt: tt})
	}
	return c
}

func (c *circuit) find(tt uint16) int {
	return slices.IndexFunc(c.g, func(g gate) bool { return g.tt == tt })
}

// add appends op(a, b) unless a gate already computes it.
func (c *circuit) add(op byte, a, b int) int {
	x, y := c.g[a].tt, c.g[b].tt
	var tt uint16
	switch op {
	case '^':
		tt = x ^ y
	case '&':
		tt = x & y
	case '|':
		tt = x | y
	case 'n':
		tt = x &^ y
	case '~':
		tt = ^x
	}
	if i := c.find(tt); i >= 0 {
		return i
	}
	c.g = append(c.g, gate{op: op, a: a, b: b, tt: tt})
	return len(c.g) - 1
}

// cofactors returns f with input v fixed to 0 and to 1, each as a function
// that does not depend on v.
func cofactors(f uint16, v int) (f0, f1 uint16) {
	m, s := inputTT[v], uint(1)<<v
	f0 = f &^ m
	f1 = f & m
	return f0 | f0<<s, f1 | f1>>s
}

// build adds gates computing f, trying every input to split on and every
// way to join the halves, and keeps the one that adds the fewest gates.
func (c *circuit) build(f uint16) int {
	if i := c.find(f); i >= 0 {
		return i
	}
	if i := c.find(^f); i >= 0 {
		return c.add('~', i, 0)
	}
	var best *circuit
	bestIdx := -1
	for v := range 4 {
		f0, f1 := cofactors(f, v)
		if f0 == f1 {
			continue
		}
		for form := range 3 {
			t := &circuit{g: slices.Clone(c.g)}
			if i := t.join(v, f0, f1, form); i >= 0 && (best == nil || len(t.g) < len(best.g)) {
				best, bestIdx = t, i
			}
		}
	}
	c.g = best.g
	return bestIdx
}

func isConst(f uint16) bool { return f == 0 || f == ones }

// join builds f from its cofactors f0, f1 on input v in one of three forms:
// f0 ^ (v & d), f1 ^ (d &^ v) or (f0 &^ v) | (f1 & v), where d = f0 ^ f1.
// It returns -1 when the form does not apply.
func (c *circuit) join(v int, f0, f1 uint16, form int) int {
	d := f0 ^ f1
	switch form {
	case 0:
		switch {
		case d == ones:
			return c.add('^', c.build(f0), v)
		case f0 == 0:
			return c.add('&', v, c.build(f1))
		case f1 == 0:
			return c.add('n', c.build(f0), v)
		case f1 == ones:
			return c.add('|', c.build(f0), v)
		case f0 == ones:
			return c.add('~', c.add('n', v, c.build(f1)), 0)
		}
		a := c.build(f0)
		return c.add('^', a, c.add('&', v, c.build(d)))
	case 1:
		if isConst(f1) || isConst(d) {
			return -1
		}
		b := c.build(f1)
		return c.add('^', b, c.add('n', c.build(d), v))
	default:
		if isConst(f0) || isConst(f1) {
			return -1
		}
		a := c.add('n', c.build(f0), v)
		return c.add('|', a, c.add('&', c.build(f1), v))
	}
}

// sboxCircuit returns the smallest circuit the search finds for s, over
// every order of building its four outputs, and the gates of the outputs.
func sboxCircuit(s [16]uint8) (*circuit, [4]int) {
	var out [4]uint16
	for n, y := range s {
		for k := range 4 {
			out[k] |= uint16(y>>k&1) << n
		}
	}
	var best *circuit
	var bestOut [4]int
	order := []int{0, 1, 2, 3}
	for range 24 {
		c := newCircuit()
		var idx [4]int
		for _, k := range order {
			idx[k] = c.build(out[k])
		}
		if best == nil || len(c.g) < len(best.g) {
			best, bestOut = c, idx
		}
		nextPermutation(order)
	}
	return best, bestOut
}

func nextPermutation(p []int) {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i < 0 {
		slices.Reverse(p)
		return
	}
	j := len(p) - 1
	for p[j] <= p[i] {
		j--
	}
	p[i], p[j] = p[j], p[i]
	slices.Reverse(p[i+1:])
}

// sboxCode is the Go code of a circuit: one statement per live gate over
// inputs x0..x3, and the expressions of the four outputs.
type sboxCode struct {
	gates int
	stmts []string
	out   [4]string
}

func code(c *circuit, out [4]int) sboxCode {
	// A gate whose result an existing gate already had is left unused.
	live := make([]bool, len(c.g))
	var mark func(i int)
	mark = func(i int) {
		if live[i] {
			return
		}
		live[i] = true
		if g := c.g[i]; g.op != 'x' {
			mark(g.a)
			if g.op != '~' {
				mark(g.b)
			}
		}
	}
	for _, i := range out {
		mark(i)
	}
	v := func(i int) string {
		if c.g[i].op == 'x' {
			return fmt.Sprintf("x%d", c.g[i].a)
		}
		return fmt.Sprintf("t%d", i)
	}
	var sc sboxCode
	for i := 4; i < len(c.g); i++ {
		if !live[i] {
			continue
		}
		sc.gates++
		switch g := c.g[i]; g.op {
		case '~':
			sc.stmts = append(sc.stmts, fmt.Sprintf("t%d := ^%s", i, v(g.a)))
		case 'n':
			sc.stmts = append(sc.stmts, fmt.Sprintf("t%d := %s &^ %s", i, v(g.a), v(g.b)))
		default:
			sc.stmts = append(sc.stmts, fmt.Sprintf("t%d := %s %c %s", i, v(g.a), g.op, v(g.b)))
		}
	}
	for k, i := range out {
		sc.out[k] = v(i)
	}
	return sc
}

// inline writes sc as a block that replaces x0..x3 by the S-box output: the
// compiler does not inline functions this large. Each gate's truth table is
// computed as it is added and build only returns a gate whose table is the
// one asked for, so the circuit is right by construction; the vectors check
// the rounds around it.
func (sc sboxCode) inline(b *bytes.Buffer, comment string) {
	fmt.Fprintf(b, "{ // %s\n", comment)
	for _, s := range sc.stmts {
		b.WriteString(s + "\n")
	}
	fmt.Fprintf(b, "x0, x1, x2, x3 = %s\n}\n", strings.Join(sc.out[:], ", "))
}

const roundsDoc = `// encrypt runs the 32 rounds: key mixing, S-box, linear transformation;
// the last round mixes in K32 instead of the linear transformation. The
// loop body is one pass over the eight S-boxes, their circuits written out.
`

const roundsInvDoc = `// decrypt runs encrypt's rounds backwards with the inverse S-boxes and the
// inverse linear transformation.
`

func generate() []byte {
	var enc, dec [8]sboxCode
	for i, s := range sboxes {
		enc[i] = code(sboxCircuit(s))
		dec[i] = code(sboxCircuit(inverse(s)))
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by go test -run TestGenerated -update; DO NOT EDIT.\n\npackage serpent\n\n")
	b.WriteString(roundsDoc)
	b.WriteString("func (c *Cipher) encrypt(x0, x1, x2, x3 uint32) (uint32, uint32, uint32, uint32) {\n")
	b.WriteString("for r := 0; ; r += 8 {\nk := c.rk[r : r+8 : r+8]\n")
	for i := range 8 {
		fmt.Fprintf(&b, "x0, x1, x2, x3 = x0^k[%d][0], x1^k[%d][1], x2^k[%d][2], x3^k[%d][3]\n", i, i, i, i)
		enc[i].inline(&b, fmt.Sprintf("S%d", i))
		if i == 7 {
			b.WriteString("if r == rounds-8 {\nlast := &c.rk[rounds]\nreturn x0 ^ last[0], x1 ^ last[1], x2 ^ last[2], x3 ^ last[3]\n}\n")
		}
		b.WriteString("x0, x1, x2, x3 = linear(x0, x1, x2, x3)\n")
	}
	b.WriteString("}\n}\n\n")
	b.WriteString(roundsInvDoc)
	b.WriteString("func (c *Cipher) decrypt(x0, x1, x2, x3 uint32) (uint32, uint32, uint32, uint32) {\n")
	b.WriteString("last := &c.rk[rounds]\nx0, x1, x2, x3 = x0^last[0], x1^last[1], x2^last[2], x3^last[3]\n")
	b.WriteString("for r := rounds - 8; ; r -= 8 {\nk := c.rk[r : r+8 : r+8]\n")
	for i := 7; i >= 0; i-- {
		if i == 7 {
			b.WriteString("if r != rounds-8 {\nx0, x1, x2, x3 = linearInv(x0, x1, x2, x3)\n}\n")
		} else {
			b.WriteString("x0, x1, x2, x3 = linearInv(x0, x1, x2, x3)\n")
		}
		dec[i].inline(&b, fmt.Sprintf("inverse of S%d", i))
		fmt.Fprintf(&b, "x0, x1, x2, x3 = x0^k[%d][0], x1^k[%d][1], x2^k[%d][2], x3^k[%d][3]\n", i, i, i, i)
	}
	b.WriteString("if r == 0 {\nreturn x0, x1, x2, x3\n}\n}\n}\n\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic(err)
	}
	return src
}

func TestGenerated(t *testing.T) {
	if testing.Short() && !*update {
		t.Skip("the circuit search takes a while; run without -short")
	}
	src := generate()
	if *update {
		if err := os.WriteFile("rounds_gen.go", src, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile("rounds_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, src) {
		t.Fatal("rounds_gen.go is not what the circuit search makes: run go test -run TestGenerated -update")
	}
}
