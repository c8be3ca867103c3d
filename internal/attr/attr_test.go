package attr

import (
	"bytes"
	"math/big"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

func TestParseNumberCanonical(t *testing.T) {
	cases := map[string]string{
		"5": "5", "5.0": "5", "+5": "5", "-0": "0", "0.000": "0", "00012.3400": "12.34",
		"1e3": "1000", "1E-3": "0.001", "-1.5e2": "-150", "1E+5": "100000", "1E-5": "0.00001", "-2.5E-3": "-0.0025",
		"12345678901234567890123456789012345678": "12345678901234567890123456789012345678",
		".5":                                     "0.5", "5.": "5",
	}
	for in, want := range cases {
		got, err := ParseNumber(in)
		if err != nil || got != want {
			t.Errorf("ParseNumber(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "1e", "--1", "1.2.3", "NaN", "Infinity", " 1", "1 ", "1E+126", "1E-131",
		"123456789012345678901234567890123456789", "0x10", "1e++3"} {
		if _, err := ParseNumber(bad); err == nil {
			t.Errorf("ParseNumber(%q) accepted", bad)
		}
	}
}

func TestNumberKeyOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var nums []string
	fixed := []string{"0", "-0.001", "1", "-1", "10", "-10", "2", "-2", "1.5", "-1.5", "0.1", "0.12", "0.123", "-0.12", "-0.123",
		"1E+125", "-1E+125", "1E-130", "-1E-130", "99999999999999999999999999999999999999", "100", "99", "9.9", "10.01"}
	for _, f := range fixed {
		n, err := ParseNumber(f)
		if err != nil {
			t.Fatal(err)
		}
		nums = append(nums, n)
	}
	for i := 0; i < 2000; i++ {
		d := r.Intn(38) + 1
		var sb strings.Builder
		if r.Intn(2) == 0 {
			sb.WriteByte('-')
		}
		for j := 0; j < d; j++ {
			sb.WriteByte(byte('0' + r.Intn(10)))
		}
		sb.WriteString("E")
		sb.WriteString(big.NewInt(int64(r.Intn(200) - 100)).String())
		if n, err := ParseNumber(sb.String()); err == nil {
			nums = append(nums, n)
		}
	}
	rat := func(s string) *big.Rat {
		x, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("rat %q", s)
		}
		return x
	}
	sort.Slice(nums, func(i, j int) bool { return rat(nums[i]).Cmp(rat(nums[j])) < 0 })
	for i := 1; i < len(nums); i++ {
		a, _ := NumberKey(nums[i-1])
		b, _ := NumberKey(nums[i])
		c := rat(nums[i-1]).Cmp(rat(nums[i]))
		if bytes.Compare(a, b) != c {
			t.Fatalf("order mismatch %s vs %s", nums[i-1], nums[i])
		}
		// canonical text round-trips
		if p, _ := ParseNumber(nums[i]); p != nums[i] || rat(p).Cmp(rat(nums[i])) != 0 {
			t.Fatalf("round trip %s", nums[i])
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	in := `{"b":{"B":"AAEC/w=="},"a":{"S":"x\"y\u0001é"},"n":{"N":"+1.50"},"m":{"M":{"z":{"NULL":true},"y":{"BOOL":false}}},` +
		`"l":{"L":[{"N":"1"},{"SS":["b","a"]}]},"ns":{"NS":["10","-1","2"]},"bs":{"BS":["Ag==","AQ=="]}}`
	it, err := DecodeItem([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out := string(EncodeItem(it))
	want := `{"a":{"S":"x\"y\u0001é"},"b":{"B":"AAEC/w=="},"bs":{"BS":["AQ==","Ag=="]},"l":{"L":[{"N":"1"},{"SS":["a","b"]}]},` +
		`"m":{"M":{"y":{"BOOL":false},"z":{"NULL":true}}},"n":{"N":"1.5"},"ns":{"NS":["-1","2","10"]}}`
	if out != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	it2, err := DecodeItem([]byte(out))
	if err != nil || !ItemsEqual(it, it2) {
		t.Fatalf("re-decode: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]string{
		`{"a":{}}`:                 "empty",
		`{"a":{"S":"x","N":"1"}}`:  "more than one",
		`{"a":{"SS":[]}}`:          "An string set  may not be empty",
		`{"a":{"NS":["1","1.0"]}}`: "contains duplicates",
		`{"a":{"S":5}}`:            "cannot be converted to String",
		`{"a":{"NULL":false}}`:     "Null attribute value",
		`{"a":{"N":"x"}}`:          "The parameter cannot be converted to a numeric value: x",
		`{"a":{"B":"!!!!"}}`:       "Base64",
		`{"a":{"S":"x"}`:           "Malformed",
		`[1]`:                      "cannot be converted to Map",
	}
	for in, want := range cases {
		_, err := DecodeItem([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeItem(%s) = %v; want %q", in, err, want)
		}
	}
	deep := strings.Repeat(`{"L":[`, 33) + `{"S":"x"}` + strings.Repeat(`]}`, 33)
	if _, err := DecodeValue([]byte(deep)); err == nil || !strings.Contains(err.Error(), "Nesting") {
		t.Errorf("deep: %v", err)
	}
	ok := strings.Repeat(`{"L":[`, 31) + `{"S":"x"}` + strings.Repeat(`]}`, 31)
	if _, err := DecodeValue([]byte(ok)); err != nil {
		t.Errorf("31 deep: %v", err)
	}
}

func TestAddNumbers(t *testing.T) {
	got, err := AddNumbers("0.1", "0.2", false)
	if err != nil || got != "0.3" {
		t.Fatalf("%s %v", got, err)
	}
	got, err = AddNumbers("99999999999999999999999999999999999999", "0.1", false)
	if err == nil {
		t.Fatalf("overflow accepted: %s", got)
	}
	got, _ = AddNumbers("5", "7.5", true)
	if got != "-2.5" {
		t.Fatal(got)
	}
}

func TestPrefixSuccessor(t *testing.T) {
	if s := PrefixSuccessor([]byte{1, 0xFF}); !bytes.Equal(s, []byte{2}) {
		t.Fatal(s)
	}
	if s := PrefixSuccessor([]byte{0xFF}); s != nil {
		t.Fatal(s)
	}
}

func TestAppendKeyBytesMatchesKeyBytes(t *testing.T) {
	for _, v := range []Value{StrValue("abc"), BinValue([]byte{0, 255}), MustNum("-12.5"), MustNum("0"), MustNum("1E+100")} {
		want, _ := KeyBytes(v)
		got, ok := AppendKeyBytes([]byte("x"), v)
		if !ok || !bytes.Equal(got[1:], want) {
			t.Errorf("%v: %x vs %x", v, got, want)
		}
		if v.Type == N {
			n, err := AppendNumberKey(nil, v.Str)
			if err != nil || !bytes.Equal(n, want) {
				t.Errorf("AppendNumberKey %s: %x %v", v.Str, n, err)
			}
		}
	}
	if allocs := testing.AllocsPerRun(100, func() {
		buf := make([]byte, 0, 64)
		_, _ = AppendNumberKey(buf, "12345.678")
	}); allocs > 0 {
		t.Errorf("AppendNumberKey allocates %v times", allocs)
	}
}

func randValue(r *rand.Rand, depth int) Value {
	strs := []string{"", "a", "héllo", "\"q\"\\", "\x01\n\t", "日本語", "\U0001F600", "\uFFFD"}
	switch k := r.Intn(10); {
	case k == 0:
		return StrValue(strs[r.Intn(len(strs))])
	case k == 1:
		return MustNum([]string{"0", "1", "-1.5", "12345678901234567890", "1E+100", "0.000001"}[r.Intn(6)])
	case k == 2:
		return BinValue(bytes.Repeat([]byte{byte(r.Intn(256))}, r.Intn(7)))
	case k == 3:
		return BoolValue(r.Intn(2) == 0)
	case k == 4:
		return NullValue()
	case k == 5 && depth < 4:
		m := map[string]Value{}
		for i := r.Intn(4); i > 0; i-- {
			m[strs[r.Intn(len(strs))]+"k"] = randValue(r, depth+1)
		}
		return MapValue(m)
	case k == 6 && depth < 4:
		var l []Value
		for i := r.Intn(4); i > 0; i-- {
			l = append(l, randValue(r, depth+1))
		}
		if l == nil {
			l = []Value{}
		}
		return ListValue(l)
	case k == 7:
		return Value{Type: SS, Strs: []string{"a", "b\"", "ü"}}
	case k == 8:
		return Value{Type: NS, Strs: []string{"-1", "2.5", "1000"}}
	default:
		return Value{Type: BS, Bins: [][]byte{{1}, {2, 3}, {4, 5, 6, 7}}}
	}
}

func TestRawItemSizeMatchesItemSize(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 3000; i++ {
		it := Item{}
		for j := r.Intn(6); j > 0; j-- {
			it["n"+strings.Repeat("é", r.Intn(3))+string(rune('a'+j))] = randValue(r, 0)
		}
		raw := EncodeItem(it)
		got, err := RawItemSize(raw)
		if err != nil || got != ItemSize(it) {
			t.Fatalf("RawItemSize(%s) = %d, %v; ItemSize %d", raw, got, err, ItemSize(it))
		}
	}
	for _, bad := range []string{``, `{`, `{"a":{"X":1}}`, `{"a":{"S":"x"}`, `[]`, `{"a":{"S":"x"}}x`} {
		if _, err := RawItemSize([]byte(bad)); err == nil {
			t.Errorf("RawItemSize(%q) accepted", bad)
		}
	}
}

// TestRawItemSizeLongStrings: strings long enough for the scanner's
// 8-byte runs, with quotes, backslashes, control characters and
// multi-byte characters at every offset, sized as ItemSize does; and
// plainRun against a byte-at-a-time reference on random bytes.
func TestRawItemSizeLongStrings(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	alphabet := []string{"a", "Z", "~", " ", "\"", "\\", "\n", "\x01", "\x1f", "é", "\u2028", "😀", "\x7f"}
	for i := 0; i < 5000; i++ {
		var sb strings.Builder
		for k := r.Intn(70); k > 0; k-- {
			if r.Intn(4) == 0 {
				sb.WriteString(alphabet[r.Intn(len(alphabet))])
			} else {
				sb.WriteByte(byte('a' + r.Intn(26)))
			}
		}
		it := Item{"s": {Type: S, Str: sb.String()}}
		raw := EncodeItem(it)
		got, err := RawItemSize(raw)
		if err != nil || got != ItemSize(it) {
			t.Fatalf("RawItemSize(%s) = %d, %v; ItemSize %d", raw, got, err, ItemSize(it))
		}
	}
	plain := func(c byte) bool { return c != '"' && c != '\\' && c >= 0x20 }
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.Intn(40))
		for k := range b {
			if r.Intn(3) == 0 {
				b[k] = byte(r.Intn(256))
			} else {
				b[k] = byte(0x20 + r.Intn(0x60))
			}
		}
		from := 0
		if len(b) > 0 {
			from = r.Intn(len(b))
		}
		want := 0
		for from+want < len(b) && plain(b[from+want]) {
			want++
		}
		want -= want % 8 // whole words only
		if got := plainRun(b, from); got != want {
			t.Fatalf("plainRun(%q, %d) = %d, want %d", b, from, got, want)
		}
	}
}
