package blobstore

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	good := []string{"a", "a/b", "...", ".x", "x.", "ü", strings.Repeat("a", 255), strings.Repeat("a/", 511) + "b"}
	bad := []string{"", "/", "a/", "/a", "a//b", ".", "..", "a/../b", "a\\b", "a\tb", "\x7f", "a\u0085", "\ufffe", "\uffff", "\xc3",
		strings.Repeat("a", 256), strings.Repeat("a/", 512) + "b"}
	for _, k := range good {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q): %v", k, err)
		}
	}
	for _, k := range bad {
		if err := ValidateKey(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	if ValidateComponent(fsTempPrefix+"x") == nil {
		t.Fatal("the filesystem store's temporary names must break the key rule")
	}
	for _, c := range []struct {
		key, prefix string
		want        bool
	}{{"a/b", "", true}, {"a/b", "a", true}, {"a/b", "a/b", true}, {"a/bc", "a/b", false}, {"a", "a/b", false}, {"ab", "a", false}} {
		if UnderPrefix(c.key, c.prefix) != c.want {
			t.Errorf("UnderPrefix(%q, %q) != %v", c.key, c.prefix, c.want)
		}
	}
}
