package attr

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// Number limits of DynamoDB.
const (
	MaxNumberDigits = 38
	// In the form 0.d1d2...dn x 10^e, e ranges over [minExp, maxExp]:
	// 1E-130 is 0.1e-129 and 9.99..E+125 is 0.999..e126.
	minExp = -129
	maxExp = 126
)

// decimal is a parsed number: value = sign * 0.digits * 10^exp, digits
// without leading or trailing zeros; zero has no digits.
type decimal struct {
	neg    bool
	digits []byte // ASCII '1'..'9' first, last non-zero
	exp    int
}

func parseDecimal(s string) (decimal, bool) {
	return parseDecimalInto(s, make([]byte, 0, len(s)))
}

// parseDecimalInto parses into a caller-provided digits buffer, so that
// callers that do not keep the result can avoid a heap allocation.
func parseDecimalInto(s string, digits []byte) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	sawDigit, sawDot := false, false
	pointPos := -1 // number of digits before the decimal point
	for ; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			sawDigit = true
			digits = append(digits, c)
			continue
		}
		if c == '.' && !sawDot {
			sawDot = true
			pointPos = len(digits)
			continue
		}
		break
	}
	if !sawDigit {
		return d, false
	}
	if pointPos < 0 {
		pointPos = len(digits)
	}
	exp10 := 0
	if i < len(s) {
		if s[i] != 'e' && s[i] != 'E' {
			return d, false
		}
		i++
		rest := s[i:]
		if rest == "" {
			return d, false
		}
		if rest[0] == '+' {
			rest = rest[1:]
		}
		if rest == "" || rest[0] == '+' {
			return d, false
		}
		for j := 0; j < len(rest); j++ {
			c := rest[j]
			if !(c >= '0' && c <= '9') && !(j == 0 && c == '-') {
				return d, false
			}
		}
		if len(rest) > 9 { // far outside any range; keep arithmetic bounded
			neg := rest[0] == '-'
			digitsAllZero := true
			for _, c := range digits {
				if c != '0' {
					digitsAllZero = false
				}
			}
			if digitsAllZero {
				return decimal{}, true
			}
			if neg {
				exp10 = -1 << 30
			} else {
				exp10 = 1 << 30
			}
		} else {
			e, err := strconv.Atoi(rest)
			if err != nil {
				return d, false
			}
			exp10 = e
		}
	}
	// Strip leading zeros.
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	pointPos -= lead
	// Strip trailing zeros.
	end := len(digits)
	for end > 0 && digits[end-1] == '0' {
		end--
	}
	digits = digits[:end]
	if len(digits) == 0 {
		return decimal{}, true // zero, sign dropped
	}
	d.digits = digits
	d.exp = pointPos + exp10
	return d, true
}

// ParseNumber validates a DynamoDB number and returns its canonical text:
// no leading '+', no leading or trailing zeros, "-0" is "0", at most 38
// significant digits, magnitude within 1E-130..9.99E+125.
func ParseNumber(s string) (string, error) {
	d, err := parseNumberDecimal(s)
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// notNumeric is the service's answer to a number that does not parse: it
// quotes the text, unless it is empty.
func notNumeric(s string) error {
	if s == "" {
		return Validation("The parameter cannot be converted to a numeric value")
	}
	return Validation("The parameter cannot be converted to a numeric value: " + s)
}

func parseNumberDecimal(s string) (decimal, error) {
	return parseNumberDecimalInto(s, make([]byte, 0, len(s)))
}

func parseNumberDecimalInto(s string, buf []byte) (decimal, error) {
	d, ok := parseDecimalInto(s, buf)
	if !ok {
		return d, notNumeric(s)
	}
	if len(d.digits) > 0 {
		if d.exp > maxExp {
			return d, Validation("Number overflow. Attempting to store a number with magnitude larger than supported range")
		}
		if d.exp < minExp {
			return d, Validation("Number underflow. Attempting to store a number with magnitude smaller than supported range")
		}
	}
	if len(d.digits) > MaxNumberDigits {
		return d, Validation("Attempting to store more than 38 significant digits in a Number")
	}
	return d, nil
}

// String formats the canonical text in plain notation (no exponent), as
// the service returns numbers.
func (d decimal) String() string {
	if len(d.digits) == 0 {
		return "0"
	}
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	n := len(d.digits)
	switch {
	case d.exp <= 0:
		b.WriteString("0.")
		for i := 0; i < -d.exp; i++ {
			b.WriteByte('0')
		}
		b.Write(d.digits)
	case d.exp >= n:
		b.Write(d.digits)
		for i := n; i < d.exp; i++ {
			b.WriteByte('0')
		}
	default:
		b.Write(d.digits[:d.exp])
		b.WriteByte('.')
		b.Write(d.digits[d.exp:])
	}
	return b.String()
}

// numberKey appends the order-preserving encoding of a canonical number:
// a class byte (0x01 negative, 0x02 zero, 0x03 positive), then for
// non-zero numbers a two-byte exponent and the digits packed two per byte
// (value+1, so no byte is zero); negatives have exponent and digits
// inverted and end in 0xFF so that a shorter prefix sorts after longer ones.
func numberKey(dst []byte, d decimal) []byte {
	if len(d.digits) == 0 {
		return append(dst, 0x02)
	}
	e := uint16(d.exp + 1000)
	hi, lo := byte(e>>8), byte(e)
	start := len(dst)
	if d.neg {
		dst = append(dst, 0x01, hi, lo)
	} else {
		dst = append(dst, 0x03, hi, lo)
	}
	for i := 0; i < len(d.digits); i += 2 {
		v := (d.digits[i] - '0') * 10
		if i+1 < len(d.digits) {
			v += d.digits[i+1] - '0'
		}
		dst = append(dst, v+1)
	}
	if d.neg {
		for i := start + 1; i < len(dst); i++ {
			dst[i] = ^dst[i]
		}
		dst = append(dst, 0xFF)
	}
	return dst
}

// NumberKey returns the order-preserving key bytes of a number's text
// (which is validated and normalized first).
func NumberKey(s string) ([]byte, error) {
	d, err := parseNumberDecimal(s)
	if err != nil {
		return nil, err
	}
	return numberKey(nil, d), nil
}

// CompareNumbers compares two valid number texts numerically.
func CompareNumbers(a, b string) int {
	ka, _ := NumberKey(a)
	kb, _ := NumberKey(b)
	return bytes.Compare(ka, kb)
}

var arith = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(400)
	c.MaxExponent = 10000
	c.MinExponent = -10000
	return c
}()

// AddNumbers returns a+b (or a-b when sub) exactly, normalized; the result
// must fit DynamoDB's number limits.
func AddNumbers(a, b string, sub bool) (string, error) {
	x, _, err := apd.NewFromString(a)
	if err != nil {
		return "", notNumeric(a)
	}
	y, _, err := apd.NewFromString(b)
	if err != nil {
		return "", notNumeric(b)
	}
	var z apd.Decimal
	if sub {
		_, err = arith.Sub(&z, x, y)
	} else {
		_, err = arith.Add(&z, x, y)
	}
	if err != nil {
		return "", Validation("Number overflow. Attempting to store a number with magnitude larger than supported range")
	}
	return ParseNumber(z.Text('E'))
}
