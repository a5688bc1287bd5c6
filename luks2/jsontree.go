package luks2

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// The metadata is kept as an ordered JSON tree so that a rewrite keeps the
// key order, the unknown fields and the tokens exactly as they were read, and
// serializes the way json-c (cryptsetup's JSON library) does.

// node is one JSON value: an object (ordered keys), an array, a string, a
// number (its text: json-c's canonical one for an integer, the literal for
// a double), a bool or null.
type node struct {
	kind   nodeKind
	str    string // string value or number text
	dbl    bool   // a number json-c holds as a double
	b      bool
	keys   []string
	vals   []*node // object values (parallel to keys) or array elements
	parent *node
}

type nodeKind int

const (
	kindNull nodeKind = iota
	kindObject
	kindArray
	kindString
	kindNumber
	kindBool
)

func (k nodeKind) String() string {
	return [...]string{"null", "object", "array", "string", "number", "bool"}[k]
}

// isInt reports whether n is a JSON integer (json-c's json_type_int).
func (n *node) isInt() bool { return n != nil && n.kind == kindNumber && !n.dbl }

// parseJSON parses a JSON document that is an object followed by nothing
// but NUL bytes, as json-c reads it.
func parseJSON(data []byte) (*node, error) {
	n, end, err := parseJSONC(data, 0)
	if err != nil {
		return nil, err
	}
	if len(bytes.Trim(data[end:], "\x00")) != 0 {
		return nil, errors.New("data after the JSON metadata")
	}
	if n.kind != kindObject {
		return nil, errors.New("JSON metadata is not an object")
	}
	return n, nil
}

// parseArea parses a header's JSON area as cryptsetup does (json-c, then
// validate_json_area): it starts with '{', and the JSON is followed by NUL
// bytes only, at least one.
func parseArea(area []byte) (*node, error) {
	if len(area) == 0 || area[0] != '{' {
		return nil, errors.New("JSON metadata does not start with '{'")
	}
	n, end, err := parseJSONC(area, 0)
	if err != nil {
		return nil, err
	}
	if end >= len(area) {
		return nil, errors.New("JSON metadata fills its area: no NUL after it")
	}
	if len(bytes.Trim(area[end:], "\x00")) != 0 {
		return nil, errors.New("data after the JSON metadata")
	}
	return n, nil
}

// get returns the value of key in object n, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// set replaces or appends key in object n.
func (n *node) set(key string, v *node) {
	v.parent = n
	for i, k := range n.keys {
		if k == key {
			n.vals[i] = v
			return
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
}

// push appends v to array n.
func (n *node) push(v *node) {
	v.parent = n
	n.vals = append(n.vals, v)
}

// del removes key from object n.
func (n *node) del(key string) {
	for i, k := range n.keys {
		if k == key {
			n.keys = append(n.keys[:i:i], n.keys[i+1:]...)
			n.vals = append(n.vals[:i:i], n.vals[i+1:]...)
			return
		}
	}
}

func (n *node) clone() *node {
	if n == nil {
		return nil
	}
	c := &node{kind: n.kind, str: n.str, dbl: n.dbl, b: n.b, keys: append([]string(nil), n.keys...)}
	for _, v := range n.vals {
		cv := v.clone()
		cv.parent = c
		c.vals = append(c.vals, cv)
	}
	return c
}

// Constructors for building metadata.
func jObject() *node            { return &node{kind: kindObject} }
func jString(s string) *node    { return &node{kind: kindString, str: s} }
func jInt(i int64) *node        { return &node{kind: kindNumber, str: strconv.FormatInt(i, 10)} }
func jUint64Str(u uint64) *node { return jString(strconv.FormatUint(u, 10)) }
func jArray(vs ...*node) *node {
	a := &node{kind: kindArray}
	for _, v := range vs {
		v.parent = a
		a.vals = append(a.vals, v)
	}
	return a
}

// obj builds an object from alternating keys and values.
func obj(kv ...any) *node {
	o := jObject()
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1].(*node))
	}
	return o
}

// compact serializes like json_object_to_json_string_ext(PLAIN|NOSLASHESCAPE).
func (n *node) compact() []byte {
	var b bytes.Buffer
	n.write(&b, -1)
	return b.Bytes()
}

// pretty serializes like json_object_to_json_string_ext(PRETTY|NOSLASHESCAPE).
func (n *node) pretty() []byte {
	var b bytes.Buffer
	n.write(&b, 0)
	return b.Bytes()
}

// write appends n; indent < 0 is compact, otherwise the current depth.
func (n *node) write(b *bytes.Buffer, indent int) {
	nl := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			for i := 0; i < d; i++ {
				b.WriteString("  ")
			}
		}
	}
	switch n.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(n.b))
	case kindNumber:
		b.WriteString(n.str)
	case kindString:
		writeJSONString(b, n.str)
	case kindObject, kindArray:
		opening, closing := byte('['), byte(']')
		if n.kind == kindObject {
			opening, closing = '{', '}'
		}
		b.WriteByte(opening)
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			nl(indent + 1)
			if n.kind == kindObject {
				writeJSONString(b, n.keys[i])
				b.WriteByte(':')
			}
			v.write(b, next(indent))
		}
		nl(indent)
		b.WriteByte(closing)
	}
}

func next(indent int) int {
	if indent < 0 {
		return -1
	}
	return indent + 1
}

// writeJSONString escapes as json-c does (no slash escaping).
func writeJSONString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}
