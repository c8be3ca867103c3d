package format

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

// The fast path (fastLine + keyFrom) must accept only lines the general
// scanner accepts, with the same key; whatever it does not recognise goes
// to the general scanner. This test generates DynamoDB-JSON lines (valid
// ones, and mutated ones), for several key schemas, and compares the fast
// path with the general scanner fed whole and fed in random pieces, and
// the reader's line handling (fileReader.Write with random block splits)
// with both.

var diffSchemas = []KeySchema{
	{HashName: "pk", HashType: attr.S, RangeName: "sk", RangeType: attr.N},
	{HashName: "pk", HashType: attr.S},
	{HashName: "id", HashType: attr.N},
	{HashName: "h", HashType: attr.B, RangeName: "r", RangeType: attr.S},
	{HashName: "h", HashType: attr.N, RangeName: "r", RangeType: attr.B},
	{HashName: `q"t`, HashType: attr.S, RangeName: "sk", RangeType: attr.S},
}

// lineGen writes random DynamoDB-JSON text.
type lineGen struct{ r *rand.Rand }

var genChars = []string{"a", "b", "Z", "0", " ", `\"`, `\\`, `\n`, `\u00e9`, "é", "\x01", "/", "{", "}", "[", "]", ":", ",", `\`, `"`}

func (g lineGen) str() string {
	var sb strings.Builder
	n := g.r.IntN(12)
	if g.r.IntN(8) == 0 {
		n = g.r.IntN(200)
	}
	for range n {
		c := genChars[g.r.IntN(len(genChars))]
		// Raw quotes and lone backslashes break the string: rarely.
		if (c == `"` || c == `\`) && g.r.IntN(10) != 0 {
			c = "x"
		}
		sb.WriteString(c)
	}
	return sb.String()
}

var genNumbers = []string{"0", "1", "-1", "12.5", "0.001", "1.0", "+1", "-0", "1e3", "1E-2", "00", ".5", "5.", "",
	"123456789012345678901234567890123456789", "1" + strings.Repeat("0", 130), "0." + strings.Repeat("0", 130) + "1",
	"9.99", "-0.5", "x", "1e", "1e+5", "--1"}

func (g lineGen) num() string {
	if g.r.IntN(2) == 0 {
		return fmt.Sprint(g.r.IntN(2000) - 1000)
	}
	return genNumbers[g.r.IntN(len(genNumbers))]
}

var genB64 = []string{"YQ==", "YWJj", "", "!!", "YQ", "AAEC/w==", "YWJjZA=="}

func (g lineGen) b64() string { return genB64[g.r.IntN(len(genB64))] }

// value writes an attribute value of a random type.
func (g lineGen) value(sb *strings.Builder, level int) {
	t := g.r.IntN(10)
	if level > 3 && t >= 8 {
		t = 0
	}
	switch t {
	case 0:
		fmt.Fprintf(sb, `{"S":"%s"}`, g.str())
	case 1:
		fmt.Fprintf(sb, `{"N":"%s"}`, g.num())
	case 2:
		fmt.Fprintf(sb, `{"B":"%s"}`, g.b64())
	case 3:
		fmt.Fprintf(sb, `{"BOOL":%v}`, g.r.IntN(2) == 0)
	case 4:
		sb.WriteString(`{"NULL":true}`)
	case 5, 6, 7:
		tag := []string{"SS", "NS", "BS"}[t-5]
		fmt.Fprintf(sb, `{"%s":[`, tag)
		for i := range 1 + g.r.IntN(3) {
			if i > 0 {
				sb.WriteByte(',')
			}
			switch tag {
			case "SS":
				fmt.Fprintf(sb, `"%s"`, g.str())
			case "NS":
				fmt.Fprintf(sb, `"%s"`, g.num())
			default:
				fmt.Fprintf(sb, `"%s"`, g.b64())
			}
		}
		sb.WriteString("]}")
	case 8:
		sb.WriteString(`{"L":[`)
		for i := range g.r.IntN(4) {
			if i > 0 {
				sb.WriteByte(',')
			}
			g.value(sb, level+1)
		}
		sb.WriteString("]}")
	case 9:
		sb.WriteString(`{"M":{`)
		for i := range g.r.IntN(4) {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(sb, `"%s":`, g.str())
			g.value(sb, level+1)
		}
		sb.WriteString("}}")
	}
}

// keyValue writes a key attribute's value, mostly of the schema's type.
func (g lineGen) keyValue(sb *strings.Builder, t attr.Type) {
	if g.r.IntN(10) == 0 {
		g.value(sb, 1)
		return
	}
	switch t {
	case attr.S:
		fmt.Fprintf(sb, `{"S":"%s"}`, g.str())
	case attr.N:
		fmt.Fprintf(sb, `{"N":"%s"}`, g.num())
	default:
		fmt.Fprintf(sb, `{"B":"%s"}`, g.b64())
	}
}

func (g lineGen) line(s KeySchema) []byte {
	type member struct{ name, val string }
	var ms []member
	add := func(name string, f func(*strings.Builder)) {
		var sb strings.Builder
		f(&sb)
		ms = append(ms, member{name, sb.String()})
	}
	quote := func(n string) string { return strings.ReplaceAll(n, `"`, `\"`) }
	if g.r.IntN(20) != 0 {
		add(quote(s.HashName), func(sb *strings.Builder) { g.keyValue(sb, s.HashType) })
	}
	if s.HasRange() && g.r.IntN(20) != 0 {
		add(quote(s.RangeName), func(sb *strings.Builder) { g.keyValue(sb, s.RangeType) })
	}
	if g.r.IntN(30) == 0 {
		add(quote(s.HashName), func(sb *strings.Builder) { g.keyValue(sb, s.HashType) })
	}
	if g.r.IntN(30) == 0 {
		add(`p\u006b`, func(sb *strings.Builder) { g.keyValue(sb, s.HashType) })
	}
	for range g.r.IntN(6) {
		add(g.str(), func(sb *strings.Builder) { g.value(sb, 1) })
	}
	g.r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	var sb strings.Builder
	sb.WriteString(`{"Item":{`)
	for i, m := range ms {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"%s":%s`, m.name, m.val)
	}
	sb.WriteString("}}")
	return []byte(sb.String())
}

var mutationBytes = []byte(`{}[]",:\ 0aSNBLMtrue` + "\t\x00\xff")

// mutate changes a line in one to three random ways.
func (g lineGen) mutate(l []byte) []byte {
	l = bytes.Clone(l)
	for range 1 + g.r.IntN(3) {
		if len(l) == 0 {
			return l
		}
		i := g.r.IntN(len(l))
		switch g.r.IntN(7) {
		case 0: // delete a byte
			l = append(l[:i], l[i+1:]...)
		case 1: // insert a byte
			l = append(l[:i], append([]byte{mutationBytes[g.r.IntN(len(mutationBytes))]}, l[i:]...)...)
		case 2: // replace a byte
			l[i] = mutationBytes[g.r.IntN(len(mutationBytes))]
		case 3: // truncate
			l = l[:i]
		case 4: // duplicate a piece
			j := i + g.r.IntN(len(l)-i+1)
			l = append(l[:j], append(bytes.Clone(l[i:j]), l[j:]...)...)
		case 5: // swap two bytes
			j := g.r.IntN(len(l))
			l[i], l[j] = l[j], l[i]
		case 6: // trailing bytes
			l = append(l, mutationBytes[g.r.IntN(len(mutationBytes))])
		}
	}
	return bytes.ReplaceAll(l, []byte("\n"), []byte("n"))
}

// generalScan is the general scanner alone, fed in the given pieces.
func generalScan(s KeySchema, line []byte, cuts ...int) (Key, error) {
	sc := lineScanner{schema: s}
	sc.reset()
	prev := 0
	for _, c := range append(cuts, len(line)) {
		if err := sc.feed(line[prev:c]); err != nil {
			return Key{}, err
		}
		prev = c
	}
	return sc.finish()
}

func sameKey(t *testing.T, s KeySchema, a, b Key) bool {
	t.Helper()
	if !attr.Equal(a.Hash, b.Hash) || a.Hash.Type != b.Hash.Type || a.Range.Type != b.Range.Type ||
		s.HasRange() && !attr.Equal(a.Range, b.Range) {
		return false
	}
	var ea, eb encKey
	ea.set(a, s.HasRange())
	eb.set(b, s.HasRange())
	return ea.compare(&eb) == 0
}

// readerLine runs one line (and its newline) through fileReader.Write,
// handing it over in blocks cut at the given points.
func readerLine(s KeySchema, line []byte, cuts []int) (Key, error) {
	fr := newFileReader(&Backup{Parsed: &Parsed{Schema: s}})
	fr.ctx = context.Background()
	fr.f = &DataFile{Key: "k", ItemCount: 1, UncompressedBytes: int64(len(line) + 1)}
	var got Key
	fr.fn = func(r *Record) error {
		got = r.Key
		got.Hash.Bin = bytes.Clone(got.Hash.Bin)
		got.Range.Bin = bytes.Clone(got.Range.Bin)
		if !bytes.Equal(r.Item, line[len(LinePrefix):len(line)-1]) {
			return fmt.Errorf("item bytes differ")
		}
		return nil
	}
	data := append(bytes.Clone(line), '\n')
	prev := 0
	for _, c := range append(cuts, len(data)) {
		if _, err := fr.Write(data[prev:c]); err != nil {
			if ce, ok := fr.err.(*callbackErr); ok {
				return Key{}, ce.err
			}
			return Key{}, fr.err
		}
		prev = c
	}
	if fr.items != 1 {
		return Key{}, fmt.Errorf("no line")
	}
	return got, nil
}

func randomCuts(r *rand.Rand, n int) []int {
	var cuts []int
	for range r.IntN(3) {
		cuts = append(cuts, r.IntN(n+1))
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

func TestFastLineDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	g := lineGen{r}
	iters := 20000
	if testing.Short() {
		iters = 4000
	}
	var fastOK, generalOK, total int
	check := func(s KeySchema, line []byte) {
		total++
		gk, gerr := generalScan(s, line)
		if gerr == nil {
			generalOK++
		}
		// The general scanner does not depend on how the line is cut.
		cuts := randomCuts(r, len(line))
		if k2, err2 := generalScan(s, line, cuts...); (err2 == nil) != (gerr == nil) || gerr == nil && !sameKey(t, s, gk, k2) {
			t.Fatalf("schema %v, cuts %v: general scanner whole %v / pieces %v\n%q", s, cuts, gerr, err2, line)
		}
		// The fast path accepts only what the general scanner accepts,
		// with the same key.
		sc := lineScanner{schema: s}
		if hv, rv, ok := sc.fastLine(line); ok {
			if k, err := sc.keyFrom(hv, rv); err == nil {
				fastOK++
				if gerr != nil {
					t.Fatalf("schema %v: fast path accepts a line the general scanner refuses (%v)\n%q", s, gerr, line)
				}
				if !sameKey(t, s, k, gk) {
					t.Fatalf("schema %v: keys differ: fast %+v, general %+v\n%q", s, k, gk, line)
				}
			}
		}
		// ScanLine (fast path, then general scanner) agrees.
		if _, k, err := ScanLine(line, s); (err == nil) != (gerr == nil) || err == nil && !sameKey(t, s, k, gk) ||
			err != nil && err.Error() != gerr.Error() {
			t.Fatalf("schema %v: ScanLine %v / general %v\n%q", s, err, gerr, line)
		}
		// So does the reader, whatever the block boundaries.
		if len(line) >= len(LinePrefix)+1 {
			cuts := randomCuts(r, len(line)+1)
			k, err := readerLine(s, line, cuts)
			if (err == nil) != (gerr == nil) || err == nil && !sameKey(t, s, k, gk) {
				t.Fatalf("schema %v, cuts %v: reader %v / general %v\n%q", s, cuts, err, gerr, line)
			}
			// (Byte offsets in messages count from the block's start.)
			if err != nil && len(cuts) == 0 && !strings.Contains(err.Error(), gerr.Error()) {
				t.Fatalf("schema %v, cuts %v: reader error %q does not carry %q\n%q", s, cuts, err, gerr, line)
			}
		}
	}
	for i := range iters {
		s := diffSchemas[i%len(diffSchemas)]
		line := g.line(s)
		check(s, line)
		for range 3 {
			check(s, g.mutate(line))
		}
	}
	// Lines of the encoder, deep nesting and edge cases.
	for _, s := range diffSchemas {
		for _, it := range []attr.Item{
			{s.HashName: keyOfType(s.HashType, "5"), s.RangeName: keyOfType(s.RangeType, "1"), "x": attr.StrValue(`q"\`)},
			{s.HashName: keyOfType(s.HashType, "7"), s.RangeName: keyOfType(s.RangeType, "2"), "m": attr.MapValue(map[string]attr.Value{"": attr.NullValue()})},
		} {
			delete(it, "")
			check(s, bytes.TrimSuffix(AppendLine(nil, attr.EncodeItem(it)), []byte("\n")))
		}
		for _, depth := range []int{1, 31, 32, 33, 63, 64, 65, 70} {
			var sb strings.Builder
			sb.WriteString(`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"id":{"N":"2"},"h":{"B":"YQ=="},"r":{"S":"x"},"q\"t":{"S":"y"},"deep":`)
			for range depth {
				sb.WriteString(`{"L":[`)
			}
			sb.WriteString(`{"S":"z"}`)
			for range depth {
				sb.WriteString(`]}`)
			}
			sb.WriteString("}}")
			check(s, []byte(sb.String()))
		}
	}
	for _, l := range []string{
		`{"Item":{}}`, `{"Item":{"pk":{"S":"a"}}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1.0"}}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"}}} `, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":{"L":[]}}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":{"M":{}}}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":{"SS":[]}}}`, `{"Item":{"pk":{"S":""},"sk":{"N":"1"}}}`,
		`{"Item":{"pk":{"S":"a\\"},"sk":{"N":"1"}}}`, `{"Item":{"pk":{"S":"a\"},"sk":{"N":"1"}}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":{"BOOL":tru}}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":{"NULL":false}}}`,
	} {
		for _, s := range diffSchemas {
			check(s, []byte(l))
		}
	}
	t.Logf("%d lines: general scanner accepted %d, fast path %d", total, generalOK, fastOK)
	// (Generated member names often hold escapes, which the fast path
	// leaves to the general scanner.)
	if fastOK < generalOK/4 {
		t.Errorf("the fast path took only %d of %d accepted lines", fastOK, generalOK)
	}
}

func keyOfType(t attr.Type, s string) attr.Value {
	switch t {
	case attr.N:
		return mustNum(s)
	case attr.B:
		return attr.BinValue([]byte(s))
	}
	return attr.StrValue(s)
}

// plainCanonicalNumber must only say yes to texts ParseNumber keeps as
// they are.
func TestPlainCanonicalNumber(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := "0123456789.-+eE"
	yes := 0
	for i := range 200000 {
		var b []byte
		n := 1 + r.IntN(8)
		if i%50 == 0 {
			n = 30 + r.IntN(20)
		}
		for range n {
			c := alphabet[r.IntN(len(alphabet))]
			if r.IntN(3) != 0 {
				c = alphabet[r.IntN(10)]
			}
			b = append(b, c)
		}
		got := plainCanonicalNumber(b)
		want, err := attr.ParseNumber(string(b))
		if got {
			yes++
			if err != nil || want != string(b) {
				t.Fatalf("%q: canonical says yes, ParseNumber says %q, %v", b, want, err)
			}
		}
	}
	for _, s := range []string{"0", "1", "-1", "10", "0.5", "-0.05", "12.34", "123456789012345678901234567890123456"} {
		if !plainCanonicalNumber([]byte(s)) {
			t.Errorf("%q not recognised", s)
		}
	}
	for _, s := range []string{"-0", "00", "01", "1.0", "1.", ".5", "+1", "1e3", "", "-", "0.", "-0.0"} {
		if plainCanonicalNumber([]byte(s)) {
			t.Errorf("%q recognised", s)
		}
	}
	if yes == 0 {
		t.Fatal("nothing recognised")
	}
}
