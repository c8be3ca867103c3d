package attr

import (
	"encoding/binary"
	"errors"
)

var errRawSize = errors.New("attr: not a canonical item encoding")

// RawItemSize returns ItemSize of an item from its canonical DynamoDB-JSON
// bytes (as EncodeItem writes them) without decoding it. Any input it does
// not recognise is an error; callers then decode the item instead.
func RawItemSize(raw []byte) (int, error) {
	s := sizeScanner{b: raw}
	n, err := s.item()
	if err != nil {
		return 0, err
	}
	if s.i != len(s.b) {
		return 0, errRawSize
	}
	return n, nil
}

// RawItemEnd answers the index just after the canonical item that starts
// raw (see RawItemSize for what it recognises): for a reader that finds
// items inside a larger document.
func RawItemEnd(raw []byte) (int, error) {
	s := sizeScanner{b: raw}
	if _, err := s.item(); err != nil {
		return 0, err
	}
	return s.i, nil
}

type sizeScanner struct {
	b []byte
	i int
}

func (s *sizeScanner) expect(c byte) error {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return nil
	}
	return errRawSize
}

// str scans a JSON string and returns its unescaped UTF-8 length.
func (s *sizeScanner) str() (int, error) {
	if err := s.expect('"'); err != nil {
		return 0, err
	}
	n := 0
	for s.i < len(s.b) {
		// Runs of plain bytes, 8 at a time: a 1 KiB string is most of
		// what an item's size costs (every write sizes its old and new
		// images for the table's statistics).
		if k := plainRun(s.b, s.i); k > 0 {
			n += k
			s.i += k
			if s.i >= len(s.b) {
				break
			}
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return n, nil
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return 0, errRawSize
			}
			e := s.b[s.i+1]
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				n++
				s.i += 2
			case 'u':
				r, ok := hex4(s.b, s.i+2)
				if !ok {
					return 0, errRawSize
				}
				s.i += 6
				if r >= 0xD800 && r < 0xDC00 {
					// A surrogate pair encodes one 4-byte character.
					if s.i+6 <= len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
						if r2, ok := hex4(s.b, s.i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
							s.i += 6
							n += 4
							continue
						}
					}
					n += 3 // a lone surrogate decodes to U+FFFD
					continue
				}
				switch {
				case r < 0x80:
					n++
				case r < 0x800:
					n += 2
				default:
					n += 3
				}
			default:
				return 0, errRawSize
			}
		case c < 0x20: // JSON has no raw control characters in strings
			return 0, errRawSize
		default:
			n++
			s.i++
		}
	}
	return 0, errRawSize
}

// plainRun returns the length of the longest run of whole 8-byte words
// from b[i] on that hold no '"', no '\\' and no control character: bytes
// that a JSON string holds as they are, each one byte of the value. It
// tests each word at once (a zero byte in w^c marks a byte equal to c,
// the borrow of w-0x20 in a byte below 0x80 marks a control character).
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	j := i
	for j+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[j:])
		q := w ^ (ones * '"')
		e := w ^ (ones * '\\')
		if ((q-ones)&^q|(e-ones)&^e|(w-ones*0x20)&^w)&highs != 0 {
			break
		}
		j += 8
	}
	return j - i
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// rawText scans a string without escapes and returns it.
func (s *sizeScanner) rawText() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			t := s.b[start:s.i]
			s.i++
			return t, nil
		case '\\':
			return nil, errRawSize
		}
		if s.b[s.i] < 0x20 {
			return nil, errRawSize
		}
		s.i++
	}
	return nil, errRawSize
}

func b64Len(t []byte) int {
	n := len(t) / 4 * 3
	if len(t) > 0 && t[len(t)-1] == '=' {
		n--
		if len(t) > 1 && t[len(t)-2] == '=' {
			n--
		}
	}
	return n
}

// item scans {"name":value,...} and returns the summed size of names and
// values.
func (s *sizeScanner) item() (int, error) { return s.members(0, 0) }

// mapSize scans an M value's members: 3 + each (name + value + 1).
func (s *sizeScanner) mapSize() (int, error) { return s.members(3, 1) }

// members scans a JSON object of attribute values, adding base once and
// per to each member's name and value sizes.
func (s *sizeScanner) members(base, per int) (int, error) {
	if err := s.expect('{'); err != nil {
		return 0, err
	}
	total := base
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return total, nil
	}
	for {
		nl, err := s.str()
		if err != nil {
			return 0, err
		}
		if err := s.expect(':'); err != nil {
			return 0, err
		}
		vs, err := s.value()
		if err != nil {
			return 0, err
		}
		total += nl + vs + per
		if s.i >= len(s.b) {
			return 0, errRawSize
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return total, nil
		default:
			return 0, errRawSize
		}
	}
}

// value scans one {"T":...} AttributeValue and returns its size.
func (s *sizeScanner) value() (int, error) {
	if err := s.expect('{'); err != nil {
		return 0, err
	}
	tag, err := s.rawText()
	if err != nil {
		return 0, err
	}
	if err := s.expect(':'); err != nil {
		return 0, err
	}
	size := 0
	switch string(tag) {
	case "S":
		if size, err = s.str(); err != nil {
			return 0, err
		}
	case "N":
		t, err := s.rawText()
		if err != nil {
			return 0, err
		}
		size = numberSize(t)
	case "B":
		t, err := s.rawText()
		if err != nil {
			return 0, err
		}
		size = b64Len(t)
	case "BOOL":
		switch {
		case s.lit("true"), s.lit("false"):
			size = 1
		default:
			return 0, errRawSize
		}
	case "NULL":
		if !s.lit("true") {
			return 0, errRawSize
		}
		size = 1
	case "M":
		if size, err = s.mapSize(); err != nil {
			return 0, err
		}
	case "L", "SS", "NS", "BS":
		if err := s.expect('['); err != nil {
			return 0, err
		}
		if tag[0] == 'L' {
			size = 3
		}
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			break
		}
		for {
			var n int
			switch tag[0] {
			case 'L':
				v, err := s.value()
				if err != nil {
					return 0, err
				}
				n = v + 1
			case 'S':
				if n, err = s.str(); err != nil {
					return 0, err
				}
			case 'N':
				t, err := s.rawText()
				if err != nil {
					return 0, err
				}
				n = numberSize(t)
			case 'B':
				t, err := s.rawText()
				if err != nil {
					return 0, err
				}
				n = b64Len(t)
			}
			size += n
			if s.i >= len(s.b) {
				return 0, errRawSize
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == ']' {
				s.i++
				break
			}
			return 0, errRawSize
		}
	default:
		return 0, errRawSize
	}
	if err := s.expect('}'); err != nil {
		return 0, err
	}
	return size, nil
}

func (s *sizeScanner) lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}
