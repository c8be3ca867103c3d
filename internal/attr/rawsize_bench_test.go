package attr

import (
	"strings"
	"testing"
)

func BenchmarkRawItemSize1K(b *testing.B) {
	raw := EncodeItem(Item{"pk": {Type: S, Str: "user#000123"}, "sk": {Type: S, Str: "x"}, "payload": {Type: S, Str: strings.Repeat("abcdefghij", 100)}, "ver": {Type: N, Str: "12"}})
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := RawItemSize(raw); err != nil {
			b.Fatal(err)
		}
	}
}
