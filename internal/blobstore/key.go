package blobstore

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the key rule.
const (
	MaxKeyLen       = 1024 // bytes of a whole key
	MaxComponentLen = 255  // bytes of one "/"-separated component
)

// ValidateKey checks the key rule: "/"-separated components, none empty,
// "." or ".."; valid UTF-8 without backslash, control characters, U+FFFE or
// U+FFFF; at most 255 bytes a component and 1024 bytes in all. The error
// wraps ErrInvalidKey.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for c := range strings.SplitSeq(key, "/") {
		if err := ValidateComponent(c); err != nil {
			return fmt.Errorf("%w (key %q)", err, key)
		}
	}
	return nil
}

// ValidatePrefix accepts "" (everything) or a key that passes ValidateKey.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidateKey(prefix)
}

// ValidateComponent checks one component of a key.
func ValidateComponent(c string) error {
	switch {
	case c == "":
		return fmt.Errorf("%w: empty component", ErrInvalidKey)
	case c == "." || c == "..":
		return fmt.Errorf("%w: component %q", ErrInvalidKey, c)
	case len(c) > MaxComponentLen:
		return fmt.Errorf("%w: component of %d bytes, more than %d", ErrInvalidKey, len(c), MaxComponentLen)
	case !utf8.ValidString(c):
		return fmt.Errorf("%w: component %q is not valid UTF-8", ErrInvalidKey, c)
	}
	for _, r := range c {
		switch {
		case r == '\\':
			return fmt.Errorf("%w: backslash in component %q", ErrInvalidKey, c)
		case r == '/':
			return fmt.Errorf("%w: slash in component %q", ErrInvalidKey, c)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: control character %U in component %q", ErrInvalidKey, r, c)
		case r == 0xFFFE || r == 0xFFFF:
			return fmt.Errorf("%w: noncharacter %U in component %q", ErrInvalidKey, r, c)
		}
	}
	return nil
}

// UnderPrefix reports whether key lies under the whole-component prefix:
// key == prefix, or key starts with prefix + "/". The empty prefix matches
// every key.
func UnderPrefix(key, prefix string) bool {
	if prefix == "" {
		return true
	}
	if !strings.HasPrefix(key, prefix) {
		return false
	}
	return len(key) == len(prefix) || key[len(prefix)] == '/'
}
