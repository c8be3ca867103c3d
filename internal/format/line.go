package format

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
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
//
// String contents are skipped eight bytes at a time and the key
// attributes' names and values are taken as slices of the fed bytes (copied
// only when a piece ends inside them), so the cost is mostly one table
// lookup per byte outside strings.
type lineScanner struct {
	schema KeySchema

	n        int64 // bytes of the current line seen
	depth    int
	stack    [maxNesting]byte
	inStr    bool
	esc      bool // inStr, and the last byte fed was an unconsumed backslash
	mstate   int
	mapOpen  bool // the item map has started
	closed   bool // the outer object has closed
	nmembers int
	valBytes int // bytes of the current member's value (at depth 2)

	nameCap  bool // inside a member name (depth 2)
	nameBuf  []byte
	nameOver bool
	nameIdx  int // the last member name's key index: -1, 0 (hash), 1 (range)
	capIdx   int // -1, or 0 (hash) / 1 (range) while inside a key value
	valBuf   [2][]byte
	seen     [2]bool
	err      error
	// last holds the key values of the previous line: neighbouring items
	// often share a partition key, whose string is then not made again.
	last [2]attr.Value
}

func (s *lineScanner) reset() {
	s.n, s.depth, s.inStr, s.esc, s.mstate = 0, 0, false, false, msName
	s.mapOpen, s.closed, s.nmembers, s.valBytes = false, false, 0, 0
	s.nameCap, s.nameOver, s.nameIdx, s.capIdx = false, false, -1, -1
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

const (
	lsb8 = 0x0101010101010101
	msb8 = 0x8080808080808080
)

// skipString finds the end of string content starting at p[i] (just after
// the opening quote, or at a piece's start when the string began in an
// earlier piece; i is never just after an unconsumed backslash). It returns
// the index of the closing quote and done, or len(p), !done and whether p
// ends in an unconsumed backslash. Short strings are searched eight bytes
// at a time for a quote or a backslash; long ones with bytes.IndexByte.
func skipString(p []byte, i int) (end int, done, esc bool) {
	for k := 0; k < 4 && i+8 <= len(p); k++ {
		w := binary.LittleEndian.Uint64(p[i:])
		x, y := w^(lsb8*'"'), w^(lsb8*'\\')
		// The lowest flagged byte of each mask is a real match.
		if m := ((x-lsb8)&^x | (y-lsb8)&^y) & msb8; m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			if p[i] == '"' {
				return i, true, false
			}
			if i+1 == len(p) {
				return len(p), false, true
			}
			i += 2
			k = -1 // an escape: keep going word by word
			continue
		}
		i += 8
	}
	// i is a clean position (not inside an escape): a quote closes the
	// string unless an odd run of backslashes between i and it precedes it.
	clean := i
	for {
		q := bytes.IndexByte(p[i:], '"')
		if q < 0 {
			k := len(p)
			for k > clean && p[k-1] == '\\' {
				k--
			}
			return len(p), false, (len(p)-k)%2 == 1
		}
		j := i + q
		k := j
		for k > clean && p[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j, true, false
		}
		i = j + 1 // an escaped quote
		clean = i
	}
}

// feed scans the next bytes of the line (which holds no newline). The
// caller enforces MaxLineBytes.
//
// Long: one state machine over the scanner's fields, resumable at any
// byte: split into functions, each state would reload and store the same
// fields on the hot path of every backup and restore line.
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
	// nameFrom and valFrom: where the member name or the key value being
	// read starts in p.
	nameFrom, valFrom := i, i
	if s.inStr && i < len(p) {
		if s.esc {
			s.esc = false
			i++
		}
		j, done, esc := skipString(p, i)
		if !done {
			s.esc = esc
			return s.pieceEnd(p, nameFrom, valFrom)
		}
		s.inStr = false
		i = j + 1
		if s.nameCap {
			s.endName(p[nameFrom:j])
		}
	}
	depth, mstate := s.depth, s.mstate
	for i < len(p) {
		c := p[i]
		switch byteClass[c] {
		case cPlain:
			if depth > 2 {
				break
			}
			if depth < 2 || mstate != msValue {
				if s.closed {
					return s.fail("data after the item")
				}
				return s.fail("unexpected %q", c)
			}
			s.valBytes++
		case cQuote:
			switch {
			case depth > 2:
			case depth == 2 && mstate == msName:
				s.nameCap, s.nameOver = true, false
				s.nameBuf = s.nameBuf[:0]
				nameFrom = i + 1
				mstate = msColon
			case depth == 2 && mstate == msValue:
				s.valBytes++
			default:
				s.depth, s.mstate = depth, mstate
				return s.fail("unexpected string at byte %d", i)
			}
			// The first word inline: most strings are short.
			j, done, esc := 0, false, false
			if i+9 <= len(p) {
				w := binary.LittleEndian.Uint64(p[i+1:])
				x, y := w^(lsb8*'"'), w^(lsb8*'\\')
				if m := ((x-lsb8)&^x | (y-lsb8)&^y) & msb8; m != 0 {
					j = i + 1 + bits.TrailingZeros64(m)>>3
					done = p[j] == '"'
				}
			}
			if !done {
				j, done, esc = skipString(p, i+1)
			}
			if !done {
				s.inStr, s.esc = true, esc
				s.depth, s.mstate = depth, mstate
				return s.pieceEnd(p, nameFrom, valFrom)
			}
			if s.nameCap {
				s.endName(p[nameFrom:j])
			}
			i = j + 1
			continue
		case cOpen:
			switch {
			case depth > 2, depth == 2 && mstate == msValue:
				// Shortcut for a whole {"S":"..."} (any one-byte type
				// name): the same checks as byte by byte, done at once.
				if c == '{' && depth < maxNesting && i+6 < len(p) && p[i+1] == '"' && p[i+3] == '"' &&
					p[i+4] == ':' && p[i+5] == '"' && p[i+2] != '"' && p[i+2] != '\\' {
					if j, done, _ := skipString(p, i+6); done && j+1 < len(p) && p[j+1] == '}' {
						s.valBytes++
						i = j + 2
						continue
					}
				}
				if depth >= maxNesting {
					return s.fail("nesting deeper than %d", maxNesting)
				}
				s.valBytes++
				s.stack[depth] = c
				depth++
			case depth == 1 && c == '{' && !s.mapOpen:
				s.mapOpen = true
				s.stack[1] = '{'
				depth = 2
				mstate = msName
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
				if mstate == msValue {
					if err := s.endValue(p, valFrom, i); err != nil {
						return err
					}
				} else if mstate != msName || s.nmembers != 0 {
					return s.fail("unexpected '}'")
				}
				depth = 1
			case depth == 1 && c == '}' && s.mapOpen:
				depth = 0
				s.closed = true
			default:
				return s.fail("unexpected %q at byte %d", c, i)
			}
		case cComma:
			switch {
			case depth > 2:
			case depth == 2 && mstate == msValue:
				if err := s.endValue(p, valFrom, i); err != nil {
					return err
				}
				mstate = msName
			default:
				return s.fail("unexpected ','")
			}
		case cColon:
			switch {
			case depth > 2:
			case depth == 2 && mstate == msColon:
				if err := s.startValue(); err != nil {
					return err
				}
				mstate = msValue
				valFrom = i + 1
			default:
				return s.fail("unexpected ':'")
			}
		default: // cSpace
			return s.fail("whitespace in a canonical line")
		}
		i++
	}
	s.depth, s.mstate = depth, mstate
	return s.pieceEnd(p, nameFrom, valFrom)
}

// pieceEnd keeps what p holds of a member name or key value still open at
// its end.
func (s *lineScanner) pieceEnd(p []byte, nameFrom, valFrom int) error {
	if s.nameCap && !s.nameOver {
		if len(s.nameBuf)+len(p)-nameFrom > maxNameCap {
			s.nameOver = true
		} else {
			s.nameBuf = append(s.nameBuf, p[nameFrom:]...)
		}
	}
	if s.capIdx >= 0 {
		return s.keepValue(p[valFrom:])
	}
	return nil
}

func (s *lineScanner) keepValue(b []byte) error {
	if len(s.valBuf[s.capIdx])+len(b) > maxKeyValCap {
		return s.fail("key attribute value longer than %d bytes", maxKeyValCap)
	}
	s.valBuf[s.capIdx] = append(s.valBuf[s.capIdx], b...)
	return nil
}

// endName ends a member name whose last piece is tail (without the closing
// quote) and finds which key attribute, if any, it names.
func (s *lineScanner) endName(tail []byte) {
	s.nameCap = false
	s.nameIdx = -1
	name := tail
	if len(s.nameBuf) > 0 || s.nameOver {
		if s.nameOver || len(s.nameBuf)+len(tail) > maxNameCap {
			s.nameOver = true
			return
		}
		s.nameBuf = append(s.nameBuf, tail...)
		name = s.nameBuf
	} else if len(tail) > maxNameCap {
		s.nameOver = true
		return
	}
	if bytes.IndexByte(name, '\\') >= 0 {
		var str string
		q := make([]byte, 0, len(name)+2)
		q = append(append(append(q, '"'), name...), '"')
		if err := json.Unmarshal(q, &str); err != nil {
			s.nameIdx = -2 // refused at the colon
			return
		}
		name = []byte(str)
	}
	switch {
	case string(name) == s.schema.HashName:
		s.nameIdx = 0
	case s.schema.HasRange() && string(name) == s.schema.RangeName:
		s.nameIdx = 1
	}
}

func (s *lineScanner) startValue() error {
	s.valBytes = 0
	s.capIdx = -1
	if s.nameOver {
		return nil
	}
	if s.nameIdx == -2 {
		return s.fail("bad attribute name escape")
	}
	s.capIdx = s.nameIdx
	if s.capIdx >= 0 {
		if s.seen[s.capIdx] {
			name := s.schema.HashName
			if s.capIdx == 1 {
				name = s.schema.RangeName
			}
			return s.fail("key attribute %q appears twice", name)
		}
		s.valBuf[s.capIdx] = s.valBuf[s.capIdx][:0]
	}
	return nil
}

// endValue ends the member value p[valFrom:end] (its last piece).
func (s *lineScanner) endValue(p []byte, valFrom, end int) error {
	if s.valBytes == 0 {
		return s.fail("attribute with an empty value")
	}
	if s.capIdx >= 0 {
		if err := s.keepValue(p[valFrom:end]); err != nil {
			return err
		}
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
	var h, r []byte
	if s.seen[0] {
		h = s.valBuf[0]
	}
	if s.seen[1] {
		r = s.valBuf[1]
	}
	return s.keyFrom(h, r)
}

// keyFrom decodes the key from the key attributes' raw values (nil when
// the attribute was not seen; a seen value is never empty) and checks its
// types. The general scanner and the fast path both end here.
func (s *lineScanner) keyFrom(h, r []byte) (Key, error) {
	var k Key
	if h == nil {
		return k, s.fail("item has no partition key attribute %q", s.schema.HashName)
	}
	v, err := decodeKeyValue(h, &s.last[0])
	if err != nil {
		return k, s.fail("partition key %q: %v", s.schema.HashName, err)
	}
	k.Hash = v
	s.last[0] = v
	if s.schema.HasRange() {
		if r == nil {
			return k, s.fail("item has no sort key attribute %q", s.schema.RangeName)
		}
		v, err := decodeKeyValue(r, &s.last[1])
		if err != nil {
			return k, s.fail("sort key %q: %v", s.schema.RangeName, err)
		}
		k.Range = v
		s.last[1] = v
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
// fast path; anything else goes through attr.DecodeValue. A simple S or N
// value whose text is prev's (a value this function returned before) is
// prev itself.
func decodeKeyValue(raw []byte, prev *attr.Value) (attr.Value, error) {
	if len(raw) > 8 && raw[0] == '{' && raw[1] == '"' && raw[3] == '"' && raw[4] == ':' && raw[5] == '"' &&
		raw[len(raw)-2] == '"' && raw[len(raw)-1] == '}' {
		body := raw[6 : len(raw)-2]
		if bytes.IndexByte(body, '"') < 0 && bytes.IndexByte(body, '\\') < 0 {
			switch raw[2] {
			case 'S':
				if prev.Type == attr.S && prev.Str == string(body) {
					return *prev, nil
				}
				if utf8.Valid(body) && !hasControl(body) && len(body) > 0 {
					return attr.Value{Type: attr.S, Str: string(body)}, nil
				}
			case 'N':
				// Canonical text is its own normalization.
				if prev.Type == attr.N && prev.Str == string(body) {
					return *prev, nil
				}
				if plainCanonicalNumber(body) {
					return attr.Value{Type: attr.N, Str: string(body)}, nil
				}
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

// plainCanonicalNumber reports (conservatively) that b is already the
// canonical text attr.ParseNumber returns for it: -?(0|[1-9][0-9]*)
// (\.[0-9]*[1-9])?, not -0, with at most 38 digits in all (so within
// DynamoDB's digit and magnitude limits). Other texts, canonical or not,
// go through attr.ParseNumber.
func plainCanonicalNumber(b []byte) bool {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i = 1
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		return false
	}
	digits := 0
	if b[i] == '0' {
		if i+1 == len(b) {
			return i == 0 // "0", not "-0"
		}
		if b[i+1] != '.' {
			return false
		}
	}
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
		digits++
	}
	if i < len(b) {
		if b[i] != '.' || b[len(b)-1] == '0' || i+1 == len(b) {
			return false
		}
		for i++; i < len(b); i++ {
			if b[i] < '0' || b[i] > '9' {
				return false
			}
			digits++
		}
	}
	return digits <= attr.MaxNumberDigits
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
// check the reader applies to every line (the fast path, then the general
// scanner for a line the fast path does not recognise).
func ScanLine(line []byte, schema KeySchema) ([]byte, Key, error) {
	if len(line) > MaxLineBytes {
		return nil, Key{}, ErrLineTooLong
	}
	s := lineScanner{schema: schema}
	k, err := s.scanWhole(line)
	if err != nil {
		return nil, Key{}, err
	}
	return line[len(LinePrefix) : len(line)-1], k, nil
}
