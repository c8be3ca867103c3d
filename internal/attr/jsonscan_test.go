package attr

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestJSONSpecial: the eight-bytes-at-a-time scan finds the byte the
// byte-by-byte scan finds, from every start, on strings mixing plain
// ASCII, control characters, quotes, backslashes and bytes >= 0x80.
func TestJSONSpecial(t *testing.T) {
	naive := func(s string, i int) int {
		for ; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
				return i
			}
		}
		return len(s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	pick := []byte{0, 0x1f, 0x20, '!', '"', '#', '[', '\\', ']', 'a', 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for j := range b {
			if r.IntN(4) == 0 {
				b[j] = pick[r.IntN(len(pick))]
			} else {
				b[j] = byte('a' + r.IntN(26))
			}
		}
		s := string(b)
		for i := 0; i <= len(s); i++ {
			if got, want := jsonSpecial(s, i), naive(s, i); got != want {
				t.Fatalf("%q from %d: %d, want %d", s, i, got, want)
			}
			if got, want := jsonSpecial(b, i), naive(s, i); got != want {
				t.Fatalf("[]byte %q from %d: %d, want %d", s, i, got, want)
			}
		}
	}
}

// BenchmarkItemCodec1KiB decodes and encodes an item of about 1 KiB,
// mostly one text attribute, as an import does per line.
func BenchmarkItemCodec1KiB(b *testing.B) {
	it := Item{"pk": StrValue("b3-123456"), "sk": StrValue("0"), "ver": {Type: N, Str: "17"},
		"payload": StrValue(strings.Repeat("lorem ipsum dolor sit amet, ", 36))}
	raw := AppendItem(nil, it)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		got, err := DecodeItem(raw)
		if err != nil {
			b.Fatal(err)
		}
		buf = AppendItem(buf[:0], got)
	}
}
