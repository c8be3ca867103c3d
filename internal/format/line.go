package format

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/extenddb/extenddb/internal/attr"
)

// MaxLineBytes is the decompressed line cap (not counting the newline). A
// longer line is refused with ErrLineTooLong as soon as its first byte past
// the cap is seen; the line is never buffered whole to find out.
const MaxLineBytes = 32 << 20

// LinePrefix and LineSuffix frame every item: {"Item":<map>}\n.
const (
	LinePrefix = `{"Item":`
	LineSuffix = "}\n"
)

// AppendLine appends the data-file line of an item's canonical
// attribute-map bytes.
func AppendLine(dst, item []byte) []byte {
	dst = append(dst, LinePrefix...)
	dst = append(dst, item...)
	return append(dst, LineSuffix...)
}

const (
	maxNesting   = 128      // JSON nesting depth (DynamoDB allows 32 levels, 2 JSON levels each)
	maxNameCap   = 4096     // longest attribute name captured for key matching
	maxKeyValCap = 64 << 10 // longest captured key value
)

// member states inside the item map (JSON depth 2).
const (
	msName  = iota // expecting a member name (or '}')
	msColon        // name read, expecting ':'
	msValue        // inside the member's value
)

// lineScanner checks the shape of one line incrementally and extracts the
// key attributes' values with bounded memory, whatever the line's length.
// It checks JSON structure (strings, escapes, bracket matching, the
// {"Item":{...}} frame, no whitespace or stray bytes between tokens of the
// frame and the item map); the full value grammar is attr.DecodeItem's job
// (Record.Decode).
type lineScanner struct {
	schema KeySchema

	n        int64 // bytes of the current line seen
	depth    int
	stack    [maxNesting]byte
	inStr    bool
	esc      bool
	mstate   int
	mapOpen  bool // the item map has started
	closed   bool // the outer object has closed
	nmembers int
	valBytes int // bytes of the current member's value

	nameCap  bool // capturing a member name
	nameBuf  []byte
	nameOver bool
	capIdx   int // -1, or 0 (hash) / 1 (range) while capturing a key value
	valBuf   [2][]byte
	seen     [2]bool
	err      error
}

func (s *lineScanner) reset() {
	s.n, s.depth, s.inStr, s.esc, s.mstate = 0, 0, false, false, msName
	s.mapOpen, s.closed, s.nmembers, s.valBytes = false, false, 0, 0
	s.nameCap, s.nameOver, s.capIdx = false, false, -1
	s.nameBuf = s.nameBuf[:0]
	s.valBuf[0], s.valBuf[1] = s.valBuf[0][:0], s.valBuf[1][:0]
	s.seen = [2]bool{}
	s.err = nil
}

func (s *lineScanner) fail(format string, args ...any) error {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
	}
	return s.err
}

// strStop marks the bytes that end a run of plain string content.
var strStop = [256]bool{'"': true, '\\': true}

func (s *lineScanner) capturing() bool { return s.nameCap || s.capIdx >= 0 }

// capture appends consumed bytes to whatever is being captured.
func (s *lineScanner) capture(b []byte) error {
	if s.nameCap {
		if !s.nameOver {
			if len(s.nameBuf)+len(b) > maxNameCap {
				s.nameOver = true
			} else {
				s.nameBuf = append(s.nameBuf, b...)
			}
		}
		return nil
	}
	if s.capIdx >= 0 {
		if len(s.valBuf[s.capIdx])+len(b) > maxKeyValCap {
			return s.fail("key attribute value longer than %d bytes", maxKeyValCap)
		}
		s.valBuf[s.capIdx] = append(s.valBuf[s.capIdx], b...)
	}
	return nil
}

// byte classes outside strings.
const (
	cPlain = iota
	cQuote
	cOpen
	cClose
	cComma
	cColon
	cSpace
)

var byteClass = func() (t [256]uint8) {
	t['"'] = cQuote
	t['{'], t['['] = cOpen, cOpen
	t['}'], t[']'] = cClose, cClose
	t[','] = cComma
	t[':'] = cColon
	t[' '], t['\t'], t['\r'], t['\n'] = cSpace, cSpace, cSpace, cSpace
	return
}()

// scanString consumes string content from p[i:] up to and including the
// closing quote. done is false when p ends inside the string (s.esc then
// says whether the last byte was an unconsumed escape). A quote closes the
// string unless an odd run of backslashes precedes it.
func (s *lineScanner) scanString(p []byte, i int) (next int, done bool, err error) {
	from := i
	for {
		q := bytes.IndexByte(p[i:], '"')
		if q < 0 {
			k := len(p)
			for k > from && p[k-1] == '\\' {
				k--
			}
			s.esc = (len(p)-k)%2 == 1
			if s.capturing() {
				err = s.capture(p[from:])
			}
			return len(p), false, err
		}
		j := i + q
		k := j
		for k > from && p[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 1 {
			i = j + 1 // an escaped quote
			continue
		}
		if s.nameCap {
			s.capture(p[from:j])
			s.nameCap = false
		} else if s.capIdx >= 0 {
			err = s.capture(p[from : j+1])
		}
		return j + 1, true, err
	}
}

// feed scans the next bytes of the line (which holds no newline). The
// caller enforces MaxLineBytes.
func (s *lineScanner) feed(p []byte) error {
	if s.err != nil {
		return s.err
	}
	i := 0
	for i < len(p) && s.n < int64(len(LinePrefix)) {
		if p[i] != LinePrefix[s.n] {
			return s.fail("line does not start with %s", LinePrefix)
		}
		i++
		s.n++
		if s.n == int64(len(LinePrefix)) {
			s.depth = 1
			s.stack[0] = '{'
		}
	}
	s.n += int64(len(p) - i)
	if s.inStr && i < len(p) {
		if s.esc {
			s.esc = false
			if s.capturing() {
				if err := s.capture(p[i : i+1]); err != nil {
					return err
				}
			}
			i++
		}
		next, done, err := s.scanString(p, i)
		if err != nil {
			return s.fail("%v", err)
		}
		i = next
		s.inStr = !done
	}
	depth := s.depth
	for i < len(p) {
		c := p[i]
		switch byteClass[c] {
		case cQuote:
			switch {
			case depth > 2:
				if s.capIdx >= 0 {
					if err := s.capture(p[i : i+1]); err != nil {
						return err
					}
				}
			case depth == 2 && s.mstate == msName:
				s.nameCap, s.nameOver = true, false
				s.nameBuf = s.nameBuf[:0]
				s.mstate = msColon
			case depth == 2 && s.mstate == msValue:
				s.valBytes++
				if s.capIdx >= 0 {
					if err := s.capture(p[i : i+1]); err != nil {
						return err
					}
				}
			default:
				return s.fail("unexpected string at byte %d", i)
			}
			next, done, err := s.scanString(p, i+1)
			if err != nil {
				return s.fail("%v", err)
			}
			i = next
			if !done {
				s.inStr = true
			}
			continue
		case cOpen:
			switch {
			case depth == 1 && c == '{' && !s.mapOpen:
				s.mapOpen = true
				s.stack[1] = '{'
				depth = 2
				s.mstate = msName
				i++
				continue
			case depth == 2 && s.mstate == msValue, depth > 2:
				if depth >= maxNesting {
					return s.fail("nesting deeper than %d", maxNesting)
				}
				s.valBytes++
				s.stack[depth] = c
				depth++
			default:
				return s.fail("unexpected %q", c)
			}
		case cClose:
			switch {
			case depth > 2:
				if (c == '}') != (s.stack[depth-1] == '{') {
					return s.fail("mismatched %q", c)
				}
				depth--
			case depth == 2 && c == '}':
				if s.mstate == msValue {
					if err := s.endValue(); err != nil {
						return err
					}
				} else if s.mstate != msName || s.nmembers != 0 {
					return s.fail("unexpected '}'")
				}
				depth = 1
				i++
				continue
			case depth == 1 && c == '}' && s.mapOpen:
				depth = 0
				s.closed = true
				i++
				continue
			default:
				return s.fail("unexpected %q at byte %d", c, i)
			}
		case cComma:
			switch {
			case depth > 2:
			case depth == 2 && s.mstate == msValue:
				if err := s.endValue(); err != nil {
					return err
				}
				s.mstate = msName
				i++
				continue
			default:
				return s.fail("unexpected ','")
			}
		case cColon:
			switch {
			case depth > 2:
			case depth == 2 && s.mstate == msColon:
				if err := s.startValue(); err != nil {
					return err
				}
				i++
				continue
			default:
				return s.fail("unexpected ':'")
			}
		case cSpace:
			return s.fail("whitespace in a canonical line")
		default:
			if depth < 2 || depth == 2 && s.mstate != msValue {
				if s.closed {
					return s.fail("data after the item")
				}
				return s.fail("unexpected %q", c)
			}
			s.valBytes++
		}
		// A byte inside a value.
		if s.capIdx >= 0 {
			s.depth = depth
			if err := s.capture(p[i : i+1]); err != nil {
				return err
			}
		}
		i++
	}
	s.depth = depth
	return nil
}

func (s *lineScanner) startValue() error {
	s.mstate = msValue
	s.valBytes = 0
	s.capIdx = -1
	if s.nameOver {
		return nil
	}
	name := s.nameBuf
	if bytes.IndexByte(name, '\\') >= 0 {
		var str string
		q := make([]byte, 0, len(name)+2)
		q = append(append(append(q, '"'), name...), '"')
		if err := json.Unmarshal(q, &str); err != nil {
			return s.fail("bad attribute name escape")
		}
		name = []byte(str)
	}
	switch {
	case string(name) == s.schema.HashName:
		s.capIdx = 0
	case s.schema.HasRange() && string(name) == s.schema.RangeName:
		s.capIdx = 1
	}
	if s.capIdx >= 0 {
		if s.seen[s.capIdx] {
			return s.fail("key attribute %q appears twice", name)
		}
		s.valBuf[s.capIdx] = s.valBuf[s.capIdx][:0]
	}
	return nil
}

func (s *lineScanner) endValue() error {
	if s.valBytes == 0 {
		return s.fail("attribute with an empty value")
	}
	if s.capIdx >= 0 {
		s.seen[s.capIdx] = true
	}
	s.capIdx = -1
	s.nmembers++
	return nil
}

// finish ends the line and returns its key.
func (s *lineScanner) finish() (Key, error) {
	var k Key
	if s.err != nil {
		return k, s.err
	}
	if !s.closed || s.inStr {
		return k, s.fail("incomplete line")
	}
	if !s.seen[0] {
		return k, s.fail("item has no partition key attribute %q", s.schema.HashName)
	}
	v, err := decodeKeyValue(s.valBuf[0])
	if err != nil {
		return k, s.fail("partition key %q: %v", s.schema.HashName, err)
	}
	k.Hash = v
	if s.schema.HasRange() {
		if !s.seen[1] {
			return k, s.fail("item has no sort key attribute %q", s.schema.RangeName)
		}
		v, err := decodeKeyValue(s.valBuf[1])
		if err != nil {
			return k, s.fail("sort key %q: %v", s.schema.RangeName, err)
		}
		k.Range = v
	}
	if k.Hash.Type != s.schema.HashType || s.schema.HasRange() && k.Range.Type != s.schema.RangeType {
		return k, s.fail("key attribute of the wrong type (want %s/%s)", s.schema.HashType, s.schema.RangeType)
	}
	return k, nil
}

// decodeKeyValue decodes a key value. Numbers are normalized by
// attr.ParseNumber; their text in the file need not be today's canonical
// text, so backups stay readable if attr's canonical number text ever
// changes: order comes from the normalized value. Simple values take a
// fast path; anything else goes through attr.DecodeValue.
func decodeKeyValue(raw []byte) (attr.Value, error) {
	if len(raw) > 8 && raw[0] == '{' && raw[1] == '"' && raw[3] == '"' && raw[4] == ':' && raw[5] == '"' &&
		raw[len(raw)-2] == '"' && raw[len(raw)-1] == '}' {
		body := raw[6 : len(raw)-2]
		if bytes.IndexByte(body, '"') < 0 && bytes.IndexByte(body, '\\') < 0 {
			switch raw[2] {
			case 'S':
				if utf8.Valid(body) && !hasControl(body) && len(body) > 0 {
					return attr.Value{Type: attr.S, Str: string(body)}, nil
				}
			case 'N':
				n, err := attr.ParseNumber(string(body))
				if err != nil {
					return attr.Value{}, err
				}
				return attr.Value{Type: attr.N, Str: n}, nil
			case 'B':
				b, err := base64.StdEncoding.DecodeString(string(body))
				if err == nil && len(b) > 0 {
					return attr.Value{Type: attr.B, Bin: b}, nil
				}
			}
		}
	}
	return attr.DecodeValue(raw)
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// ScanLine checks one complete line (without its newline) and returns the
// item's attribute-map bytes (a sub-slice of line) and its key. It is the
// check the reader applies to every line.
func ScanLine(line []byte, schema KeySchema) ([]byte, Key, error) {
	if len(line) > MaxLineBytes {
		return nil, Key{}, ErrLineTooLong
	}
	s := lineScanner{schema: schema}
	s.reset()
	if err := s.feed(line); err != nil {
		return nil, Key{}, err
	}
	k, err := s.finish()
	if err != nil {
		return nil, Key{}, err
	}
	return line[len(LinePrefix) : len(line)-1], k, nil
}
