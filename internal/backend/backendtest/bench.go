package backendtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The shared backend benchmarks: each backend's bench_test.go calls them
// with a backend and a fresh table, so figures compare like for like.

// BenchWriteItem: 1 KiB puts of distinct keys; parallelism as for
// b.SetParallelism (0: one goroutine).
func BenchWriteItem(b *testing.B, be backend.Backend, ref backend.TableRef, parallelism int) {
	BenchWriteItemLog(b, be, ref, parallelism, 0)
}

// BenchWriteItemLog is BenchWriteItem with a change record of logBytes
// bytes per write (0: none), for the cost of a stream on writes.
func BenchWriteItemLog(b *testing.B, be backend.Backend, ref backend.TableRef, parallelism, logBytes int) {
	item := make([]byte, 1024)
	for i := range item {
		item[i] = byte('a' + i%26)
	}
	var log []byte
	if logBytes > 0 {
		log = bytes.Repeat([]byte{'r'}, logBytes)
	}
	fn := func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: item, Log: log}, nil
	}
	var n atomic.Uint64
	ctx := context.Background()
	b.ReportAllocs()
	put := func(pk []byte) bool {
		binary.BigEndian.PutUint64(pk, n.Add(1))
		if _, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: []byte("s"), Fn: fn}); err != nil {
			b.Error(err)
			return false
		}
		return true
	}
	b.ResetTimer()
	if parallelism == 0 {
		pk := make([]byte, 8)
		for b.Loop() {
			if !put(pk) {
				return
			}
		}
		return
	}
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		pk := make([]byte, 8)
		for pb.Next() {
			if !put(pk) {
				return
			}
		}
	})
}

// Load writes parts×per items of 256 bytes (keys p%06d / s%04d) in
// 100-item transactions.
func Load(b *testing.B, be backend.Backend, ref backend.TableRef, parts, per int) {
	ctx := context.Background()
	item := make([]byte, 256)
	ops := make([]backend.WriteItemParams, 0, 100)
	flush := func() {
		if _, err := be.TransactWrite(ctx, backend.TransactWriteParams{Ops: ops}); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	for p := range parts {
		for s := range per {
			ops = append(ops, backend.WriteItemParams{Table: ref, PK: fmt.Appendf(nil, "p%06d", p), SK: fmt.Appendf(nil, "s%04d", s),
				Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: item}, nil }})
			if len(ops) == cap(ops) {
				flush()
			}
		}
	}
	if len(ops) > 0 {
		flush()
	}
}

// BenchGetItem reads items of a Load(1000, 10) table, in parallel when
// parallel is true.
func BenchGetItem(b *testing.B, be backend.Backend, ref backend.TableRef, parallel bool) {
	Load(b, be, ref, 1000, 10)
	ctx := context.Background()
	get := func(i int) bool {
		pk := fmt.Appendf(nil, "p%06d", i%1000)
		res, err := be.GetItem(ctx, backend.GetItemParams{Table: ref, PK: pk, SK: []byte("s0003")})
		if err != nil || res.Item == nil {
			b.Error(res, err)
			return false
		}
		return true
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		i := 0
		for b.Loop() {
			if !get(i) {
				return
			}
			i++
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if !get(i) {
				return
			}
			i++
		}
	})
}

// BenchQuery25 reads 25-row pages of one partition of a Load(100, 50)
// table, alternating directions.
func BenchQuery25(b *testing.B, be backend.Backend, ref backend.TableRef) {
	Load(b, be, ref, 100, 50)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		pk := fmt.Appendf(nil, "p%06d", i%100)
		res, err := be.Query(ctx, backend.QueryParams{Table: ref, PK: pk, Forward: i%2 == 0, Limit: 25})
		if err != nil || len(res.Rows) != 25 {
			b.Fatal(len(res.Rows), err)
		}
		i++
	}
}

// ScanBenchItems is the table size of BenchScanPages: 200,000 items, or
// EXTENDDB_BENCH_SCAN_ITEMS when set (a smaller figure for a quick run).
func ScanBenchItems() int {
	if s := os.Getenv("EXTENDDB_BENCH_SCAN_ITEMS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 200_000
}

// BenchScanPages measures Scan pages of Limit 100 by their position in a
// table of ScanBenchItems() items (64-byte items, each with one entry in
// index "gsi"): per iteration it reads the first page, the second, one
// in the middle and the last of the table, of the index, and of a
// parallel-scan segment of each (4 segments, segment 2), each page
// starting from a cursor as a client would send it. A Scan that seeks
// from the cursor costs the same on every page; one that walks from the
// start of the range grows with the page number. Metrics: µs/page per
// position and last/first (the last page's time over the first's).
func BenchScanPages(b *testing.B, be backend.Backend, ref backend.TableRef) {
	const limit = 100
	n := ScanBenchItems()
	ctx := context.Background()
	item := make([]byte, 64)
	for i := range item {
		item[i] = byte('a' + i%26)
	}
	type row struct{ pk, sk, ipk, isk []byte }
	rows := make([]row, n)
	ops := make([]backend.WriteItemParams, 0, 100)
	for i := range n {
		r := row{pk: fmt.Appendf(nil, "p%08d", i), sk: []byte("s"), ipk: fmt.Appendf(nil, "g%04d", i%1000)}
		r.isk = r.pk
		rows[i] = r
		ch := backend.Change{Op: backend.Put, Item: item, PutIndex: []backend.IndexEntry{
			{IndexKey: backend.IndexKey{Index: "gsi", PK: r.ipk, SK: r.isk}, Item: item}}}
		ops = append(ops, backend.WriteItemParams{Table: ref, PK: r.pk, SK: r.sk, Blind: true,
			Fn: func([]byte) (backend.Change, error) { return ch, nil }})
		if len(ops) == cap(ops) || i == n-1 {
			if _, err := be.TransactWrite(ctx, backend.TransactWriteParams{Ops: ops}); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	// The scan orders, computed here: (KeyHash(pk), pk, sk) for the
	// table, (KeyHash(ipk), ipk, isk, pk, sk) for the index.
	table := slices.Clone(rows)
	slices.SortFunc(table, func(x, y row) int {
		return cmp.Or(cmp.Compare(backend.KeyHash(x.pk), backend.KeyHash(y.pk)), bytes.Compare(x.pk, y.pk), bytes.Compare(x.sk, y.sk))
	})
	index := slices.Clone(rows)
	slices.SortFunc(index, func(x, y row) int {
		return cmp.Or(cmp.Compare(backend.KeyHash(x.ipk), backend.KeyHash(y.ipk)), bytes.Compare(x.ipk, y.ipk),
			bytes.Compare(x.isk, y.isk), bytes.Compare(x.pk, y.pk), bytes.Compare(x.sk, y.sk))
	})
	for _, c := range []struct {
		name  string
		index string
		seg   int // -1: the whole table
		order []row
	}{
		{"table", "", -1, table},
		{"table-segment", "", 2, table},
		{"index", "gsi", -1, index},
		{"index-segment", "gsi", 2, index},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := backend.ScanParams{Table: ref, Index: c.index, Limit: limit}
			order := c.order
			if c.seg >= 0 {
				p.Segment, p.TotalSegments = c.seg, 4
				lo, hi := backend.SegmentRange(c.seg, 4)
				hash := func(r row) uint32 { return backend.KeyHash(r.pk) }
				if c.index != "" {
					hash = func(r row) uint32 { return backend.KeyHash(r.ipk) }
				}
				i := slices.IndexFunc(order, func(r row) bool { return hash(r) >= lo })
				j := slices.IndexFunc(order, func(r row) bool { return hash(r) > hi })
				if j < 0 {
					j = len(order)
				}
				order = order[i:j]
			}
			if len(order) < 3*limit {
				b.Skipf("%d rows: too few for first/second/last pages", len(order))
			}
			// A page's cursor is the row before it; the last page holds
			// the last limit rows.
			pages := []struct {
				name string
				at   int // index of the page's first row
			}{{"first", 0}, {"second", limit}, {"middle", len(order) / 2}, {"last", len(order) - limit}}
			cursor := func(at int) *backend.Cursor {
				if at == 0 {
					return nil
				}
				r := order[at-1]
				if c.index == "" {
					return &backend.Cursor{PK: r.pk, SK: r.sk, BasePK: r.pk, BaseSK: r.sk}
				}
				return &backend.Cursor{PK: r.ipk, SK: r.isk, BasePK: r.pk, BaseSK: r.sk}
			}
			spent := make([]time.Duration, len(pages))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for k, pg := range pages {
					p.After = cursor(pg.at)
					t0 := time.Now()
					res, err := be.Scan(ctx, p)
					spent[k] += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Rows) != limit || !bytes.Equal(res.Rows[0].BasePK, order[pg.at].pk) {
						b.Fatalf("%s page: %d rows, want %d starting at %q", pg.name, len(res.Rows), limit, order[pg.at].pk)
					}
				}
			}
			for k, pg := range pages {
				b.ReportMetric(float64(spent[k].Microseconds())/float64(b.N), "µs/"+pg.name)
			}
			b.ReportMetric(float64(spent[len(pages)-1])/float64(spent[0]), "last/first")
		})
	}
}

// BenchReadLog: ReadLog of 1,000 records (512 bytes each, the size of a
// NEW_AND_OLD_IMAGES record of a small item) from a random position of a
// 10,000-record log: the storage part of a full GetRecords.
func BenchReadLog(b *testing.B, be backend.Backend, ref backend.TableRef) {
	cl := be.Capabilities().ChangeLog
	if cl == nil {
		b.Skipf("capability absent: backend %s does not implement backend.ChangeLog", be.Name())
	}
	ctx := context.Background()
	rec := bytes.Repeat([]byte{'r'}, 512)
	const n, page = 10000, 100
	for i := 0; i < n; i += page {
		ops := make([]backend.WriteItemParams, page)
		for j := range ops {
			ops[j] = backend.WriteItemParams{Table: ref, PK: fmt.Appendf(nil, "k%06d", i+j),
				Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: rec, Log: rec}, nil }}
		}
		if _, err := be.TransactWrite(ctx, backend.TransactWriteParams{Ops: ops}); err != nil {
			b.Fatal(err)
		}
	}
	info, err := cl.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil || info.Count != n {
		b.Fatalf("LogInfo %+v %v", info, err)
	}
	var i int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		i++
		after := info.First - 1 + (i*7919)%(n-1000)
		res, err := cl.ReadLog(ctx, backend.ReadLogParams{Table: ref, After: after, Limit: 1000, MaxBytes: 1 << 20})
		if err != nil || len(res.Records) != 1000 {
			b.Fatalf("ReadLog after %d: %d records, %v", after, len(res.Records), err)
		}
	}
}

// BenchWriteItemOverwrite: serial 1 KiB puts over 100 existing items,
// alternating between two sizes (every write changes the table's
// statistics).
func BenchWriteItemOverwrite(b *testing.B, be backend.Backend, ref backend.TableRef) {
	items := [][]byte{make([]byte, 1024), make([]byte, 1000)}
	ctx := b.Context()
	put := func(i int) {
		pk := []byte(fmt.Sprintf("k%03d", i%100))
		item := items[(i/100)%2]
		if _, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: []byte("s"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: item}, nil
		}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 {
		put(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		put(i)
		i++
	}
}

// BenchCounts: DescribeTable's statistics (the backend's TableCounter)
// beside a full count (TableStats), on tables of n items of 1 KiB that
// newTable creates, for each n.
func BenchCounts(b *testing.B, newTable func() (backend.Backend, backend.TableRef), sizes ...int) {
	for _, n := range sizes {
		be, ref := newTable()
		tc := be.Capabilities().Counts
		if tc == nil {
			b.Fatalf("backend %s does not implement backend.TableCounter", be.Name())
		}
		item := make([]byte, 1024)
		ctx := b.Context()
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					if _, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(fmt.Sprintf("k%06d", i)), Fn: func([]byte) (backend.Change, error) {
						return backend.Change{Op: backend.Put, Item: item}, nil
					}}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.Run(fmt.Sprintf("items=%d/Counts", n), func(b *testing.B) {
			for b.Loop() {
				if r, err := tc.Counts(ctx, backend.CountsParams{Table: ref}); err != nil || r.Stats.ItemCount != int64(n) {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
		b.Run(fmt.Sprintf("items=%d/TableStats", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := be.TableStats(ctx, backend.TableStatsParams{Table: ref}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
