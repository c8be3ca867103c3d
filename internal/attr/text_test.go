package attr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckTextRejectsInvalidUTF8AndLoneSurrogates(t *testing.T) {
	bad := []string{
		"{\"S\":\"k\xff\"}",         // invalid start byte
		"{\"S\":\"k\xc3\"}",         // truncated sequence
		"{\"S\":\"k\xed\xa0\x80\"}", // UTF-8-encoded surrogate (CESU-8)
		"{\"S\":\"k\xc0\xaf\"}",     // overlong encoding
		`{"S":"k\ud800"}`,           // lone high surrogate
		`{"S":"k\udc00"}`,           // lone low surrogate
		`{"S":"k\ud800x"}`,          // high surrogate followed by text
		`{"S":"k\ud800\u0041"}`,     // high surrogate followed by a non-surrogate escape
		`{"S":"k\udc00\ud800"}`,     // reversed pair
		`{"S":"\\\ud800"}`,          // escaped backslash, then a lone surrogate
		"{\"k\xfe\":{\"S\":\"v\"}}", // in a name
	}
	for _, b := range bad {
		err := CheckText([]byte(b))
		if err == nil {
			t.Errorf("CheckText(%q) accepted", b)
			continue
		}
		if e, ok := err.(*Error); !ok || e.Kind != KindSerialization {
			t.Errorf("CheckText(%q) = %v, want a SerializationException", b, err)
		}
	}
	good := []string{
		`{"S":"plain"}`,
		"{\"S\":\"é 中 😀\"}",
		`{"S":"\ud83d\ude00"}`,
		`{"S":"\u00e9\uD83D\uDE00\uffff"}`,
		`{"S":"\\ud800"}`, // an escaped backslash: the text \ud800, not an escape
		`{"S":"a\"b\\c\/d\n"}`,
	}
	for _, g := range good {
		if err := CheckText([]byte(g)); err != nil {
			t.Errorf("CheckText(%q) = %v", g, err)
		}
	}
}

// Different invalid strings must never decode to the same value: before,
// "k\xff", "k\xfe" and "k\ud800" all became "k\uFFFD".
func TestDecodeNeverRewritesStrings(t *testing.T) {
	for _, in := range []string{
		"{\"pk\":{\"S\":\"k\xff\"}}",
		"{\"pk\":{\"S\":\"k\xfe\"}}",
		`{"pk":{"S":"k\ud800"}}`,
		`{"pk":{"SS":["a","k\udfff"]}}`,
		`{"pk":{"M":{"x":{"L":[{"S":"k\ud800"}]}}}}`,
		"{\"p\xffk\":{\"S\":\"v\"}}",
		`{"p\ud800k":{"S":"v"}}`,
	} {
		for _, wire := range []bool{false, true} {
			if it, err := decodeItem([]byte(in), wire); err == nil {
				t.Errorf("decodeItem(%q, %v) = %v, want an error", in, wire, it)
			} else if e, ok := err.(*Error); !ok || e.Kind != KindSerialization {
				t.Errorf("decodeItem(%q) = %v, want a SerializationException", in, err)
			}
		}
	}
	it, err := DecodeItem([]byte(`{"pk":{"S":"k\ud83d\ude00\u00e9"}}`))
	if err != nil || it["pk"].Str != "k😀é" {
		t.Fatalf("a valid surrogate pair: %v, %v", it, err)
	}
}

func TestWireItemNames(t *testing.T) {
	var it Item
	for _, in := range []string{
		`{"":{"S":"v"}}`,
		`{"a":{"M":{"":{"S":"v"}}}}`,
		`{"a":{"L":[{"M":{"":{"N":"1"}}}]}}`,
		`{"` + strings.Repeat("n", MaxNameBytes+1) + `":{"S":"v"}}`,
	} {
		err := json.Unmarshal([]byte(in), &it)
		if e, ok := err.(*Error); !ok || e.Kind != KindValidation {
			t.Errorf("Unmarshal(%.40q...) = %v, want a ValidationException", in, err)
		}
	}
	long := strings.Repeat("n", MaxNameBytes)
	if err := json.Unmarshal([]byte(`{"`+long+`":{"S":"v"}}`), &it); err != nil || len(it) != 1 {
		t.Fatalf("a %d-byte name: %v", MaxNameBytes, err)
	}
	var v Value
	if err := json.Unmarshal([]byte(`{"M":{"":{"S":"v"}}}`), &v); err == nil {
		t.Fatal("a Value with an empty map key was accepted")
	}
	// Stored items are read as written.
	if _, err := DecodeItem([]byte(`{"":{"S":"v"}}`)); err != nil {
		t.Fatalf("DecodeItem of a stored item: %v", err)
	}
}

func benchBody(escaped bool) []byte {
	var b strings.Builder
	b.WriteString(`{"TableName":"t","Item":{`)
	for i := 0; b.Len() < 1<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		v := "some text é 中 with no escapes at all, fairly typical"
		if escaped {
			v = `some \"quoted\" text \u00e9 \ud83d\ude00 and a \\ backslash`
		}
		b.WriteString(`"attr` + strings.Repeat("x", i%7) + `":{"S":"` + v + `"}`)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

func BenchmarkCheckText(b *testing.B) {
	for _, escaped := range []bool{false, true} {
		body := benchBody(escaped)
		name := "plain"
		if escaped {
			name = "escaped"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				if err := CheckText(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
