package luks2

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// cryptsetup reads LUKS2 metadata with json-c 0.16's tokener in its default,
// lenient mode, and luksd must accept and reject exactly the JSON it does:
// comments, single-quoted strings, trailing commas, case-insensitive
// literals, NaN and Infinity, leading zeros, raw control bytes in strings,
// at most 32 levels of nesting; integers saturate at int64/uint64 bounds.
// This is that grammar (json_tokener_parse_ex), written for a whole buffer.

// jsonMaxDepth is json-c's JSON_TOKENER_DEFAULT_DEPTH.
const jsonMaxDepth = 32

var errJSONDepth = errors.New("broken JSON metadata: nesting too deep")

// jsonParser walks a buffer; a NUL byte or the buffer's end ends the input.
type jsonParser struct {
	b   []byte
	pos int
}

// parseJSONC parses the first JSON value in b as json-c does, and returns
// it with the number of bytes consumed (trailing whitespace and comments
// included, as json-c's char_offset). depth is the nesting the value will
// have where it is stored (0 for a whole header).
func parseJSONC(b []byte, depth int) (*node, int, error) {
	p := &jsonParser{b: b}
	if err := p.skip(); err != nil {
		return nil, 0, err
	}
	v, err := p.value(depth)
	if err != nil {
		return nil, 0, err
	}
	if err := p.skip(); err != nil {
		return nil, 0, err
	}
	return v, p.pos, nil
}

// peek returns the next byte, 0 at the end.
func (p *jsonParser) peek() byte {
	if p.pos >= len(p.b) {
		return 0
	}
	return p.b[p.pos]
}

func (p *jsonParser) fail(what string) error {
	return fmt.Errorf("broken JSON metadata: %s at byte %d", what, p.pos)
}

// skip eats whitespace and comments.
func (p *jsonParser) skip() error {
	for {
		switch c := p.peek(); {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/':
			p.pos++
			switch p.peek() {
			case '*':
				end := strings.Index(string(p.b[p.pos+1:]), "*/")
				if end < 0 {
					return p.fail("unterminated comment")
				}
				p.pos += 1 + end + 2
			case '/':
				end := strings.IndexByte(string(p.b[p.pos:]), '\n')
				if end < 0 {
					return p.fail("unterminated comment")
				}
				p.pos += end
			default:
				return p.fail("expected comment")
			}
		default:
			return nil
		}
	}
}

// value parses one value at nesting depth (the top is 0).
func (p *jsonParser) value(depth int) (*node, error) {
	switch c := p.peek(); {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"' || c == '\'':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return jString(s), nil
	case c == 't' || c == 'T' || c == 'f' || c == 'F':
		if p.literal("true") {
			return &node{kind: kindBool, b: true}, nil
		}
		if p.literal("false") {
			return &node{kind: kindBool}, nil
		}
		return nil, p.fail("boolean expected")
	case c == 'n' || c == 'N':
		if p.literal("null") {
			return &node{kind: kindNull}, nil
		}
		if p.literal("nan") {
			return &node{kind: kindNumber, str: "NaN", dbl: true}, nil
		}
		return nil, p.fail("null expected")
	case c == 'i' || c == 'I':
		if p.literal("infinity") {
			return &node{kind: kindNumber, str: "Infinity", dbl: true}, nil
		}
		return nil, p.fail("unexpected character")
	case c >= '0' && c <= '9' || c == '-':
		return p.number(depth)
	}
	return nil, p.fail("unexpected character")
}

// literal consumes word (any case) when it comes next.
func (p *jsonParser) literal(word string) bool {
	end := p.pos + len(word)
	if end > len(p.b) || !strings.EqualFold(string(p.b[p.pos:end]), word) {
		return false
	}
	p.pos = end
	return true
}

func (p *jsonParser) object(depth int) (*node, error) {
	return p.members(jObject(), depth, '}', "object")
}

func (p *jsonParser) array(depth int) (*node, error) {
	return p.members(jArray(), depth, ']', "array")
}

// members parses the members of the object or array n (at depth) up to
// end, the bracket that opened it being next.
func (p *jsonParser) members(n *node, depth int, end byte, container string) (*node, error) {
	p.pos++ // { or [
	for {
		switch closed, err := p.closes(end); { // also after a trailing comma
		case err != nil:
			return nil, err
		case closed:
			return n, nil
		}
		var key string
		if n.kind == kindObject {
			var err error
			if key, err = p.name(); err != nil {
				return nil, err
			}
		}
		v, done, err := p.member(depth, end, container)
		if err != nil {
			return nil, err
		}
		if n.kind == kindObject {
			n.set(key, v) // a repeated name replaces the value in its place
		} else {
			n.push(v)
		}
		if done {
			return n, nil
		}
	}
}

// name parses an object property's name and the ':' after it.
func (p *jsonParser) name() (string, error) {
	if c := p.peek(); c != '"' && c != '\'' {
		return "", p.fail("quoted object property name expected")
	}
	key, err := p.str()
	if err != nil {
		return "", err
	}
	if i := strings.IndexByte(key, 0); i >= 0 {
		key = key[:i] // json-c keeps the name as a C string
	}
	if err := p.skip(); err != nil {
		return "", err
	}
	if p.peek() != ':' {
		return "", p.fail("object property name separator ':' expected")
	}
	p.pos++
	if err := p.skip(); err != nil {
		return "", err
	}
	return key, nil
}

// member parses a value inside an object or array (of the given depth) and
// the separator after it; done is true when end closed the container.
func (p *jsonParser) member(depth int, end byte, container string) (v *node, done bool, err error) {
	if depth >= jsonMaxDepth-1 {
		return nil, false, errJSONDepth
	}
	if v, err = p.value(depth + 1); err != nil {
		return nil, false, err
	}
	if done, err = p.closes(end); err != nil || done {
		return v, done, err
	}
	if p.peek() != ',' {
		return nil, false, p.fail(container + " value separator ',' expected")
	}
	p.pos++
	return v, false, nil
}

// closes skips white space and comments and steps over end if it is next.
func (p *jsonParser) closes(end byte) (bool, error) {
	if err := p.skip(); err != nil {
		return false, err
	}
	if p.peek() != end {
		return false, nil
	}
	p.pos++
	return true, nil
}

// str parses a string quoted by '"' or '\”; its bytes are kept as they are
// (json-c does not check UTF-8), escapes decoded as json-c decodes them.
func (p *jsonParser) str() (string, error) {
	quote := p.peek()
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.b) {
			return "", p.fail("unexpected end of data")
		}
		c := p.b[p.pos]
		p.pos++
		switch c {
		case quote:
			return b.String(), nil
		case '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
		}
	}
}

// escape decodes the escape after a backslash.
func (p *jsonParser) escape(b *strings.Builder) error {
	c := p.peek()
	p.pos++
	switch c {
	case '"', '\\', '/':
		b.WriteByte(c)
	case 'b':
		b.WriteByte('\b')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'f':
		b.WriteByte('\f')
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return p.fail("invalid string sequence")
		}
		if r >= 0xd800 && r < 0xdc00 { // a high surrogate: a low one may follow
			if p.peek() == '\\' && p.pos+1 < len(p.b) && p.b[p.pos+1] == 'u' {
				p.pos += 2
				lo, ok := p.hex4()
				if !ok {
					return p.fail("invalid string sequence")
				}
				if lo >= 0xdc00 && lo < 0xe000 {
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
				} else {
					b.WriteRune(utf8.RuneError)
					r = lo
				}
			} else {
				r = utf8.RuneError
			}
		}
		if r >= 0xdc00 && r < 0xe000 { // a low surrogate alone
			r = utf8.RuneError
		}
		b.WriteRune(r)
	default:
		return p.fail("invalid string sequence")
	}
	return nil
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.b[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}

// number parses a number as json-c's number state does: digits, one '.',
// an exponent; within a container it must end at ',', ']', '}', '/',
// whitespace (or 'I' of -Infinity). Integers are stored as json-c stores
// them (int64, else uint64, saturating); other numbers keep their text.
func (p *jsonParser) number(depth int) (*node, error) {
	start := p.pos
	isDouble, isExp, negOK, posOK := false, false, true, false
	for {
		c := p.peek()
		ok := c >= '0' && c <= '9' || !isExp && (c == 'e' || c == 'E') ||
			negOK && c == '-' || posOK && c == '+' || !isDouble && c == '.'
		if !ok {
			break
		}
		negOK, posOK = false, false
		switch c {
		case '.':
			isDouble, negOK, posOK = true, true, true
		case 'e', 'E':
			isExp, isDouble, negOK, posOK = true, true, true, true
		}
		p.pos++
	}
	text := string(p.b[start:p.pos])
	c := p.peek()
	if text == "-" && (c == 'i' || c == 'I') {
		if p.literal("infinity") {
			return &node{kind: kindNumber, str: "-Infinity", dbl: true}, nil
		}
		return nil, p.fail("unexpected character")
	}
	if depth > 0 && (c == 0 || !strings.ContainsRune(",]}/Ii \t\n\r", rune(c))) {
		return nil, p.fail("number expected")
	}
	if isDouble {
		text = strings.TrimRight(text, "eE-+")
		if text == "" {
			text = "-"
		}
		if _, err := strconv.ParseFloat(text, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, p.fail("number expected")
		}
		return &node{kind: kindNumber, str: text, dbl: true}, nil
	}
	return intNode(text)
}

// intNode stores an integer literal as json-c does: int64, or uint64 above
// int64's range, saturating at the bounds ("-0" is 0).
func intNode(text string) (*node, error) {
	if text == "" || text == "-" {
		return nil, errors.New("broken JSON metadata: number expected")
	}
	if strings.HasPrefix(text, "-") {
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			i = math.MinInt64
		}
		return &node{kind: kindNumber, str: strconv.FormatInt(i, 10)}, nil
	}
	u, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		u = math.MaxUint64
	}
	return &node{kind: kindNumber, str: strconv.FormatUint(u, 10)}, nil
}
