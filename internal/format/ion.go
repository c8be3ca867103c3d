package format

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/extenddb/extenddb/internal/attr"
)

// IonVersionMarker starts every ION data file of an AWS export.
const IonVersionMarker = "$ion_1_0 "

// AppendIonLine appends the ION data-file line of an item, as AWS's ION
// export writes it: {Item:{...}} and a newline, with DynamoDB's types
// mapped as S -> string, N -> decimal, B -> blob, BOOL -> bool, NULL ->
// null, M -> struct, L -> list, and the sets as lists annotated
// $dynamodb_SS, $dynamodb_NS, $dynamodb_BS. Field names are quoted
// symbols, in byte order.
func AppendIonLine(dst []byte, it attr.Item) []byte {
	dst = append(dst, "{Item:"...)
	dst = appendIonStruct(dst, it)
	return append(dst, "}\n"...)
}

func appendIonStruct(dst []byte, m map[string]attr.Value) []byte {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	dst = append(dst, '{')
	for i, n := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendIonText(dst, n, '\'')
		dst = append(dst, ':')
		dst = appendIonValue(dst, m[n])
	}
	return append(dst, '}')
}

func appendIonValue(dst []byte, v attr.Value) []byte {
	switch v.Type {
	case attr.S:
		return appendIonText(dst, v.Str, '"')
	case attr.N:
		return append(dst, IonDecimal(v.Str)...)
	case attr.B:
		return appendIonBlob(dst, v.Bin)
	case attr.BOOL:
		if v.Bool {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case attr.NULL:
		return append(dst, "null"...)
	case attr.M:
		return appendIonStruct(dst, v.Map)
	case attr.L:
		dst = append(dst, '[')
		for i, e := range v.List {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendIonValue(dst, e)
		}
		return append(dst, ']')
	case attr.SS, attr.NS:
		dst = append(dst, "$dynamodb_"+v.Type.String()+"::["...)
		for i, s := range v.Strs {
			if i > 0 {
				dst = append(dst, ',')
			}
			if v.Type == attr.NS {
				dst = append(dst, IonDecimal(s)...)
			} else {
				dst = appendIonText(dst, s, '"')
			}
		}
		return append(dst, ']')
	case attr.BS:
		dst = append(dst, "$dynamodb_BS::["...)
		for i, b := range v.Bins {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendIonBlob(dst, b)
		}
		return append(dst, ']')
	}
	panic(fmt.Sprintf("format: ion: attribute type %v", v.Type))
}

// IonDecimal writes a DynamoDB number as an Ion decimal: the exponent
// marker is d, and a number without a point or exponent gets a trailing
// point (in Ion, 5 is an int and 5. a decimal).
func IonDecimal(n string) string {
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		exp := strings.TrimPrefix(n[i+1:], "+")
		return n[:i] + "d" + exp
	}
	if !strings.Contains(n, ".") {
		return n + "."
	}
	return n
}

func appendIonBlob(dst []byte, b []byte) []byte {
	dst = append(dst, "{{"...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, "}}"...)
}

// appendIonText writes s as an Ion string (quote ") or quoted symbol
// (quote '), escaping the quote, backslash and control characters; other
// characters are written as UTF-8.
func appendIonText(dst []byte, s string, quote byte) []byte {
	dst = append(dst, quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == rune(quote) || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r < 0x20 || r == 0x7f:
			dst = fmt.Appendf(dst, "\\x%02x", r)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, quote)
}
