package format

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

// benchData is ~16 MiB of 1 KiB items in key order, as canonical bytes,
// keys and decoded items, plus a written backup of them.
type benchData struct {
	items     [][]byte
	keys      []Key
	decoded   []attr.Item
	itemBytes int64
	lines     []byte // the data file's uncompressed content
	store     *memStore
	prefix    string
	cfg       WriterConfig
}

var (
	benchOnce sync.Once
	bench     benchData
)

var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu order invoice
customer shipped pending delivered warehouse berlin paris tokyo lagos lima austin seattle premium
standard express returned refund gift card paypal visa debit credit`)

func benchSetup(b *testing.B) *benchData {
	benchOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		sentence := func(n int) string {
			var sb strings.Builder
			for sb.Len() < n {
				if sb.Len() > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(words[r.IntN(len(words))])
			}
			return sb.String()
		}
		a := testARN(b, "bench")
		bench.cfg = writerConfig(a, tableJSON(a, "S", "N"), OrderKey, 0)
		bench.cfg.VerifyItems = false
		for i := 0; bench.itemBytes < 16<<20; i++ {
			tags := attr.Value{Type: attr.SS, Strs: []string{"t" + words[r.IntN(20)], "u" + words[20+r.IntN(20)], "v" + words[40+r.IntN(10)]}}
			attr.SortSet(&tags)
			it := attr.Item{
				"pk":       attr.StrValue(fmt.Sprintf("customer#%07d", i/4)),
				"sk":       mustNum(fmt.Sprint(i % 4)),
				"name":     attr.StrValue(sentence(20)),
				"email":    attr.StrValue(fmt.Sprintf("user%d@example.com", r.IntN(1e6))),
				"total":    mustNum(fmt.Sprintf("%d.%02d", r.IntN(10000), r.IntN(100))),
				"count":    mustNum(fmt.Sprint(r.IntN(100))),
				"active":   attr.BoolValue(r.IntN(2) == 0),
				"tags":     tags,
				"blob":     attr.BinValue([]byte(sentence(60))),
				"address":  attr.MapValue(map[string]attr.Value{"city": attr.StrValue(words[r.IntN(len(words))]), "street": attr.StrValue(sentence(30)), "zip": mustNum(fmt.Sprint(10000 + r.IntN(89999)))}),
				"lines":    attr.ListValue([]attr.Value{attr.StrValue(sentence(80)), attr.StrValue(sentence(80)), mustNum(fmt.Sprint(r.IntN(1000)))}),
				"comment":  attr.StrValue(sentence(300)),
				"checksum": attr.StrValue(fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())),
			}
			enc := attr.EncodeItem(it)
			// Pad to ~1 KiB.
			if pad := 1024 - len(enc) - 20; pad > 0 {
				it["note"] = attr.StrValue(sentence(pad))
				enc = attr.EncodeItem(it)
			}
			k, _ := KeySchema{HashName: "pk", HashType: attr.S, RangeName: "sk", RangeType: attr.N}.KeyOf(it)
			bench.items = append(bench.items, enc)
			bench.keys = append(bench.keys, k)
			bench.decoded = append(bench.decoded, it)
			bench.itemBytes += int64(len(enc))
			bench.lines = AppendLine(bench.lines, enc)
		}
		s := newMemStore()
		w, err := NewWriter(context.Background(), s, bench.cfg)
		if err != nil {
			panic(err)
		}
		for i := range bench.items {
			if err := w.Append(bench.items[i], bench.keys[i]); err != nil {
				panic(err)
			}
		}
		res, err := w.Finish()
		if err != nil {
			panic(err)
		}
		bench.store, bench.prefix = s, res.Prefix
	})
	return &bench
}

type discardSink struct{}

type discardCloser struct{ io.Writer }

func (discardCloser) Close() error { return nil }

func (discardSink) Create(ctx context.Context, key string) (io.WriteCloser, error) {
	return discardCloser{io.Discard}, nil
}

// BenchmarkEncode is the fast path: canonical item bytes and keys in,
// compressed, hashed data files out (to a discarding sink).
func BenchmarkEncode(b *testing.B) {
	d := benchSetup(b)
	b.SetBytes(d.itemBytes)
	b.ReportAllocs()
	for b.Loop() {
		w, err := NewWriter(context.Background(), discardSink{}, d.cfg)
		if err != nil {
			b.Fatal(err)
		}
		for i := range d.items {
			if err := w.Append(d.items[i], d.keys[i]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeItem is the convenience path: attr.Item in.
func BenchmarkEncodeItem(b *testing.B) {
	d := benchSetup(b)
	b.SetBytes(d.itemBytes)
	for b.Loop() {
		w, _ := NewWriter(context.Background(), discardSink{}, d.cfg)
		for _, it := range d.decoded {
			if err := w.AppendItem(it); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawZstdCompress compresses the same uncompressed file content
// with the same encoder settings and nothing else.
func BenchmarkRawZstdCompress(b *testing.B) {
	d := benchSetup(b)
	b.SetBytes(d.itemBytes)
	enc, _ := NewEncoder(io.Discard)
	for b.Loop() {
		enc.Reset(io.Discard)
		if _, err := enc.Write(d.lines); err != nil {
			b.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode reads the backup with every check (size, sha256, md5,
// line cap and shape, key extraction, key order and ranges), handing each
// item's bytes and key to a callback.
func BenchmarkDecode(b *testing.B) {
	d := benchSetup(b)
	b.SetBytes(d.itemBytes)
	b.ReportAllocs()
	ctx := context.Background()
	bk, err := Open(ctx, d.store, d.prefix)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		n := 0
		if err := bk.Items(ctx, func(r *Record) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != len(d.items) {
			b.Fatal(n)
		}
	}
}

// BenchmarkDecodeItem also decodes every item into an attr.Item.
func BenchmarkDecodeItem(b *testing.B) {
	d := benchSetup(b)
	b.SetBytes(d.itemBytes)
	ctx := context.Background()
	bk, _ := Open(ctx, d.store, d.prefix)
	for b.Loop() {
		if err := bk.Items(ctx, func(r *Record) error { _, err := r.Decode(); return err }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawZstdDecompress decompresses the same data file with the same
// decoder settings and nothing else.
func BenchmarkRawZstdDecompress(b *testing.B) {
	d := benchSetup(b)
	b.SetBytes(d.itemBytes)
	comp := d.store.objects[DataFileKey(d.prefix, 1)]
	dec, _ := NewDecoder(nil)
	for b.Loop() {
		if err := dec.Reset(bytes.NewReader(comp)); err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, dec); err != nil {
			b.Fatal(err)
		}
	}
}
