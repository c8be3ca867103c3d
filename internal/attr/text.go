package attr

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// MaxNameBytes is the longest attribute name DynamoDB accepts (its
// AttributeName maps declare "Key Length Constraints: Maximum length of
// 65535"); 65535 is the last accepted length.
const MaxNameBytes = 65535

// CheckText rejects JSON text that DynamoDB cannot store as written:
// bytes that are not valid UTF-8 (including UTF-8-encoded surrogates) and
// \u escapes that name a UTF-16 surrogate without forming a pair. Both
// would otherwise be replaced with U+FFFD by a decoder, so that different
// strings (and keys) would alias one another. It is a SerializationException,
// as for any request body the service cannot read.
func CheckText(b []byte) error { return checkText(b, 0) }

// checkText is CheckText for b found at offset base of a larger text.
func checkText(b []byte, base int) error {
	if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c != '\\' || i+1 >= len(b) {
				i++
				continue
			}
			if b[i+1] != 'u' {
				i += 2 // an escaped character, e.g. \\ or \"
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				i += 2 // a malformed escape is the JSON parser's to report
				continue
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if lo, ok := hex4(b, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 12
						continue
					}
				}
				return loneSurrogate(b[i:i+6], base+i)
			case r >= 0xDC00 && r <= 0xDFFF:
				return loneSurrogate(b[i:i+6], base+i)
			}
			i += 6
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return Serialization("Invalid UTF-8 start byte 0x" + strconv.FormatUint(uint64(c), 16) + " at offset " + strconv.Itoa(base+i) + ": request strings must be valid UTF-8")
		}
		i += size
	}
	return nil
}

func loneSurrogate(esc []byte, off int) error {
	return Serialization("Invalid Unicode escape " + string(esc) + " at offset " + strconv.Itoa(off) + ": a UTF-16 surrogate must be part of a surrogate pair")
}

var errEmptyName = Validation("One or more parameter values were invalid: Empty attribute name")

// CheckName applies DynamoDB's limits on an attribute name of a request
// (item attributes, key attributes and map keys at any depth, and the
// names of the legacy parameters).
func CheckName(name string) error { return checkName(name) }

func checkName(name string) error {
	if name == "" {
		return errEmptyName
	}
	if len(name) > MaxNameBytes {
		// The service's own wording (it names the first refused length).
		return Validation("1 validation error detected: Attribute name is too large, must be less than " +
			strconv.Itoa(MaxNameBytes+1) + " bytes")
	}
	return nil
}
