package attr

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is DynamoDB's nesting limit for M and L values.
const MaxDepth = 32

// DecodeItem parses a DynamoDB-JSON attribute map ({"name":{"S":"x"},...}),
// validating every value.
func DecodeItem(data []byte) (Item, error) { return decodeItem(data, false) }

// decodeItem parses an item; wire is true for request members, whose
// attribute names are held to DynamoDB's name limits (stored items and
// backups are read as they were written).
func decodeItem(data []byte, wire bool) (Item, error) {
	p := parser{data: data, wire: wire}
	p.ws()
	if p.peek() == 'n' && p.lit("null") {
		p.ws()
		if p.i != len(p.data) {
			return nil, p.syntax()
		}
		return nil, nil
	}
	it, err := p.item(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.data) {
		return nil, p.syntax()
	}
	return it, nil
}

// DecodeValue parses one DynamoDB-JSON AttributeValue ({"S":"x"}).
func DecodeValue(data []byte) (Value, error) { return decodeValue(data, false) }

func decodeValue(data []byte, wire bool) (Value, error) {
	p := parser{data: data, wire: wire}
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.data) {
		return Value{}, p.syntax()
	}
	return v, nil
}

// UnmarshalJSON lets an Item be a field of a request struct.
func (it *Item) UnmarshalJSON(data []byte) error {
	v, err := decodeItem(data, true)
	if err != nil {
		return err
	}
	*it = v
	return nil
}

// MarshalJSON writes the canonical encoding.
func (it Item) MarshalJSON() ([]byte, error) { return AppendItem(nil, it), nil }

// UnmarshalJSON lets a Value be a field of a request struct.
func (v *Value) UnmarshalJSON(data []byte) error {
	x, err := decodeValue(data, true)
	if err != nil {
		return err
	}
	*v = x
	return nil
}

// MarshalJSON writes the canonical encoding.
func (v Value) MarshalJSON() ([]byte, error) { return AppendValue(nil, v), nil }

type parser struct {
	data []byte
	i    int
	wire bool // a request member: attribute names are checked
}

func (p *parser) syntax() error {
	return Serialization("Malformed JSON at offset " + strconv.Itoa(p.i))
}

func (p *parser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *parser) lit(s string) bool {
	if len(p.data)-p.i >= len(s) && string(p.data[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// str parses a JSON string at the cursor.
func (p *parser) str() (string, error) {
	p.ws()
	if p.peek() != '"' {
		return "", p.syntax()
	}
	start := p.i
	p.i++
	simple := true
	for p.i < len(p.data) {
		if p.i = jsonSpecial(p.data, p.i); p.i == len(p.data) {
			break
		}
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			if simple {
				s := string(p.data[start+1 : p.i-1])
				if !utf8.ValidString(s) {
					return "", checkText(p.data[start:p.i], start)
				}
				return s, nil
			}
			// encoding/json would turn invalid UTF-8 and lone surrogate
			// escapes into U+FFFD; they are rejected instead.
			if err := checkText(p.data[start:p.i], start); err != nil {
				return "", err
			}
			var s string
			if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
				return "", p.syntax()
			}
			return s, nil
		case c == '\\':
			simple = false
			p.i += 2
		default: // a control character
			return "", p.syntax()
		}
	}
	return "", p.syntax()
}

// skip skips any JSON value, returning its kind for error messages.
func (p *parser) skip(depth int) (string, error) {
	if depth > 1000 {
		return "", p.syntax()
	}
	p.ws()
	switch c := p.peek(); {
	case c == '"':
		_, err := p.str()
		return "VALUE_STRING", err
	case c == '{':
		p.i++
		p.ws()
		if p.peek() == '}' {
			p.i++
			return "START_OBJECT", nil
		}
		for {
			if _, err := p.str(); err != nil {
				return "", err
			}
			p.ws()
			if p.peek() != ':' {
				return "", p.syntax()
			}
			p.i++
			if _, err := p.skip(depth + 1); err != nil {
				return "", err
			}
			p.ws()
			switch p.peek() {
			case ',':
				p.i++
			case '}':
				p.i++
				return "START_OBJECT", nil
			default:
				return "", p.syntax()
			}
		}
	case c == '[':
		p.i++
		p.ws()
		if p.peek() == ']' {
			p.i++
			return "START_ARRAY", nil
		}
		for {
			if _, err := p.skip(depth + 1); err != nil {
				return "", err
			}
			p.ws()
			switch p.peek() {
			case ',':
				p.i++
			case ']':
				p.i++
				return "START_ARRAY", nil
			default:
				return "", p.syntax()
			}
		}
	case c == 't':
		if p.lit("true") {
			return "VALUE_TRUE", nil
		}
	case c == 'f':
		if p.lit("false") {
			return "VALUE_FALSE", nil
		}
	case c == 'n':
		if p.lit("null") {
			return "VALUE_NULL", nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		p.i++
		for p.i < len(p.data) {
			c := p.data[p.i]
			if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
				p.i++
				continue
			}
			break
		}
		if !json.Valid(p.data[start:p.i]) {
			return "", p.syntax()
		}
		return "VALUE_NUMBER", nil
	}
	return "", p.syntax()
}

func convertErr(kind, target string) error {
	return Serialization(kind + " cannot be converted to " + target)
}

func (p *parser) item(depth int) (Item, error) {
	p.ws()
	if p.peek() != '{' {
		k, err := p.skip(0)
		if err != nil {
			return nil, err
		}
		return nil, convertErr(k, "Map")
	}
	p.i++
	it := Item{}
	p.ws()
	if p.peek() == '}' {
		p.i++
		return it, nil
	}
	for {
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if p.wire {
			if err := checkName(name); err != nil {
				return nil, err
			}
		}
		p.ws()
		if p.peek() != ':' {
			return nil, p.syntax()
		}
		p.i++
		p.ws()
		if p.peek() == 'n' && p.lit("null") {
			// A null member is absent, as the service's parser treats it.
		} else {
			v, err := p.value(depth)
			if err != nil {
				return nil, err
			}
			it[name] = v
		}
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return it, nil
		default:
			return nil, p.syntax()
		}
	}
}

var (
	errEmptyAV    = Validation("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	errMultiAV    = Validation("Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes")
	errNestingAV  = Validation("Nesting Levels have exceeded supported limits")
	errNullFalse  = Validation("One or more parameter values were invalid: Null attribute value types must have the value of true")
	errBase64     = Serialization("Base64 encoded length is expected a multiple of 4 bytes but found invalid data")
	errBadBase64c = Serialization("Invalid Base64 character in binary value")
)

func setEmptyErr(t Type) error {
	name := map[Type]string{SS: "string", NS: "number", BS: "binary"}[t]
	return Validation("One or more parameter values were invalid: An " + name + " set  may not be empty")
}

func decodeB64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if len(s)%4 != 0 {
			return nil, errBase64
		}
		return nil, errBadBase64c
	}
	return b, nil
}

// value parses one AttributeValue object.
//
// Long: one case per type descriptor, each checking its own value form in
// the order DynamoDB reports errors, so the whole grammar (and the order
// of its errors) reads in one place.
func (p *parser) value(depth int) (Value, error) {
	if depth >= MaxDepth+1 {
		return Value{}, errNestingAV
	}
	p.ws()
	if p.peek() != '{' {
		k, err := p.skip(0)
		if err != nil {
			return Value{}, err
		}
		return Value{}, convertErr(k, "AttributeValue")
	}
	p.i++
	var v Value
	n := 0
	p.ws()
	if p.peek() == '}' {
		p.i++
		return Value{}, errEmptyAV
	}
	for {
		name, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.ws()
		if p.peek() != ':' {
			return Value{}, p.syntax()
		}
		p.i++
		p.ws()
		if p.peek() == 'n' && p.lit("null") {
			goto next
		}
		switch name {
		case "S", "N", "B":
			if p.peek() != '"' {
				k, err := p.skip(0)
				if err != nil {
					return Value{}, err
				}
				if name == "B" {
					return Value{}, convertErr(k, "Blob")
				}
				return Value{}, convertErr(k, "String")
			}
			s, err := p.str()
			if err != nil {
				return Value{}, err
			}
			n++
			switch name {
			case "S":
				v = Value{Type: S, Str: s}
			case "N":
				num, err := ParseNumber(s)
				if err != nil {
					return Value{}, err
				}
				v = Value{Type: N, Str: num}
			case "B":
				b, err := decodeB64(s)
				if err != nil {
					return Value{}, err
				}
				v = Value{Type: B, Bin: b}
			}
		case "BOOL", "NULL":
			var b bool
			switch {
			case p.lit("true"):
				b = true
			case p.lit("false"):
			default:
				k, err := p.skip(0)
				if err != nil {
					return Value{}, err
				}
				return Value{}, convertErr(k, "Boolean")
			}
			n++
			if name == "BOOL" {
				v = Value{Type: BOOL, Bool: b}
			} else {
				if !b {
					return Value{}, errNullFalse
				}
				v = Value{Type: NULL}
			}
		case "M":
			if p.peek() != '{' {
				k, err := p.skip(0)
				if err != nil {
					return Value{}, err
				}
				return Value{}, convertErr(k, "Map")
			}
			m, err := p.item(depth + 1)
			if err != nil {
				return Value{}, err
			}
			n++
			v = Value{Type: M, Map: m}
		case "L", "SS", "NS", "BS":
			if p.peek() != '[' {
				k, err := p.skip(0)
				if err != nil {
					return Value{}, err
				}
				return Value{}, convertErr(k, "List")
			}
			p.i++
			var list []Value
			var strs []string
			var bins [][]byte
			p.ws()
			if p.peek() == ']' {
				p.i++
			} else {
				for {
					p.ws()
					if name == "L" {
						e, err := p.value(depth + 1)
						if err != nil {
							return Value{}, err
						}
						list = append(list, e)
					} else {
						if p.peek() != '"' {
							k, err := p.skip(0)
							if err != nil {
								return Value{}, err
							}
							if name == "BS" {
								return Value{}, convertErr(k, "Blob")
							}
							return Value{}, convertErr(k, "String")
						}
						s, err := p.str()
						if err != nil {
							return Value{}, err
						}
						switch name {
						case "SS":
							strs = append(strs, s)
						case "NS":
							num, err := ParseNumber(s)
							if err != nil {
								return Value{}, err
							}
							strs = append(strs, num)
						case "BS":
							b, err := decodeB64(s)
							if err != nil {
								return Value{}, err
							}
							bins = append(bins, b)
						}
					}
					p.ws()
					if p.peek() == ',' {
						p.i++
						continue
					}
					if p.peek() == ']' {
						p.i++
						break
					}
					return Value{}, p.syntax()
				}
			}
			n++
			switch name {
			case "L":
				if list == nil {
					list = []Value{}
				}
				v = Value{Type: L, List: list}
			case "SS", "NS":
				t := SS
				if name == "NS" {
					t = NS
				}
				v = Value{Type: t, Strs: strs}
			case "BS":
				v = Value{Type: BS, Bins: bins}
			}
			if v.Type.IsSet() {
				if err := checkSet(&v); err != nil {
					return Value{}, err
				}
			}
		default:
			// Unknown members are ignored, as the service's parser does.
			if _, err := p.skip(0); err != nil {
				return Value{}, err
			}
		}
	next:
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			if n == 0 {
				return Value{}, errEmptyAV
			}
			if n > 1 {
				return Value{}, errMultiAV
			}
			return v, nil
		default:
			return Value{}, p.syntax()
		}
	}
}

// checkSet rejects empty sets and duplicates and sorts the members.
func checkSet(v *Value) error {
	n := len(v.Strs)
	if v.Type == BS {
		n = len(v.Bins)
	}
	if n == 0 {
		return setEmptyErr(v.Type)
	}
	SortSet(v)
	for i := 1; i < n; i++ {
		dup := false
		if v.Type == BS {
			dup = string(v.Bins[i]) == string(v.Bins[i-1])
		} else {
			dup = v.Strs[i] == v.Strs[i-1]
		}
		if dup {
			// The service words this differently per set type.
			switch v.Type {
			case NS:
				return Validation("Input collection contains duplicates")
			case BS:
				return Validation("One or more parameter values were invalid: Input collection " + setText(v) + "of type BS contains duplicates.")
			}
			return Validation("One or more parameter values were invalid: Input collection " + setText(v) + " contains duplicates.")
		}
	}
	return nil
}

func setText(v *Value) string {
	var parts []string
	if v.Type == BS {
		for _, b := range v.Bins {
			parts = append(parts, base64.StdEncoding.EncodeToString(b))
		}
	} else {
		parts = v.Strs
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// CheckSet validates a set built by an operation (ADD/DELETE results are
// built from valid sets, so only emptiness matters there).
func CheckSet(v *Value) error { return checkSet(v) }

// Encoding.

// AppendItem appends the canonical DynamoDB-JSON of an item: attribute
// names sorted by bytes, compact, sets in canonical order.
func AppendItem(dst []byte, it Item) []byte {
	if len(it) == 0 {
		return append(dst, '{', '}')
	}
	var buf [16]string
	names := buf[:0]
	for k := range it {
		names = append(names, k)
	}
	sort.Strings(names)
	dst = append(dst, '{')
	for i, k := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = AppendValue(dst, it[k])
	}
	return append(dst, '}')
}

// EncodeItem returns the canonical bytes of an item.
func EncodeItem(it Item) []byte { return AppendItem(make([]byte, 0, 256), it) }

// AppendValue appends the canonical DynamoDB-JSON of one value.
func AppendValue(dst []byte, v Value) []byte {
	switch v.Type {
	case S:
		dst = append(dst, `{"S":`...)
		dst = appendString(dst, v.Str)
	case N:
		dst = append(dst, `{"N":"`...)
		dst = append(dst, v.Str...)
		dst = append(dst, '"')
	case B:
		dst = append(dst, `{"B":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, v.Bin)
		dst = append(dst, '"')
	case BOOL:
		if v.Bool {
			return append(dst, `{"BOOL":true}`...)
		}
		return append(dst, `{"BOOL":false}`...)
	case NULL:
		return append(dst, `{"NULL":true}`...)
	case M:
		dst = append(dst, `{"M":`...)
		dst = AppendItem(dst, v.Map)
	case L:
		dst = append(dst, `{"L":[`...)
		for i, e := range v.List {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, e)
		}
		dst = append(dst, ']')
	case SS:
		dst = append(dst, `{"SS":[`...)
		for i, s := range v.Strs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	case NS:
		dst = append(dst, `{"NS":[`...)
		for i, s := range v.Strs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, s...)
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	case BS:
		dst = append(dst, `{"BS":[`...)
		for i, b := range v.Bins {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, b)
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	default:
		return append(dst, `{"NULL":true}`...)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. s is valid UTF-8 (the decoder
// guarantees it); non-ASCII characters are written as they are.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := jsonSpecial(s, 0); i < len(s); i = jsonSpecial(s, i+1) {
		c := s[i]
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendString appends s as a JSON string (exported for response writers).
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// jsonSpecial returns the index of the first byte of s at or after i
// that a JSON string cannot hold as it is: '"', '\\' or a control
// character (below 0x20); len(s) when there is none. It tests eight
// bytes at a time: strings are mostly plain text, and this scan is on
// the path of every item encoded and decoded.
func jsonSpecial[T string | []byte](s T, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// A byte below 0x20, or equal to '"' or '\\' (zero once xored
		// with it), sets its high bit in the difference; bytes of 0x80
		// and above, never special, are masked out by ^x. A borrow only
		// runs on from a special byte, which the loop below finds.
		if ((x-ones*0x20)|((x^ones*'"')-ones)|((x^ones*'\\')-ones))&^x&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(s)
}
