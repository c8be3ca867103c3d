package engine

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
)

// The cost of table statistics on SQLite (docs/benchmarks.md, ADR 0053):
// DescribeTable at 10k and 1M items, and what they add to a PutItem.
//
//	go test ./internal/engine -run '^$' -bench 'DescribeTableStats|PutItemStats' -benchtime 2s

func benchEngine(b *testing.B) (*Engine, *sqlite.Backend) {
	b.Helper()
	sb, err := sqlite.Open(context.Background(), sqlite.Options{Path: b.TempDir() + "/bench.sqlite", ItemSize: ItemSize})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	return New(sb, Options{}), sb
}

func benchTable(b *testing.B, e *Engine, name string, gsi bool) *table {
	b.Helper()
	in := &CreateTableInput{
		TableName:            ptr(name),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
	}
	if gsi {
		in.AttributeDefinitions = append(in.AttributeDefinitions, AttributeDefinition{AttributeName: "g", AttributeType: "S"})
		in.GlobalSecondaryIndexes = []GlobalSecondaryIndex{{IndexName: "gix", KeySchema: []KeySchemaElement{{AttributeName: "g", KeyType: "HASH"}},
			Projection: &Projection{ProjectionType: "KEYS_ONLY"}}}
	}
	if _, err := e.CreateTable(context.Background(), coreAccount, in); err != nil {
		b.Fatal(err)
	}
	t, err := e.loadTable(context.Background(), coreAccount, name)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkDescribeTableStats: DescribeTable of a table of n items of
// about 200 bytes, loaded in bulk and recounted once; ns/op is the same
// at 10k and 1M items (the figures are read, not counted).
// fullread-ns is what one count of the whole table costs (what every
// refresh of the figures cost before they were kept with the writes).
func BenchmarkDescribeTableStats(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			e, sb := benchEngine(b)
			t := benchTable(b, e, "describe", false)
			ctx := context.Background()
			pad := strings.Repeat("x", 180)
			batch := make([]backend.BulkItem, 0, 1000)
			for i := range n {
				pk := fmt.Sprintf("p%08d", i)
				key, _ := attr.KeyBytes(attr.StrValue(pk))
				batch = append(batch, backend.BulkItem{PK: key, Change: backend.Change{Op: backend.Put,
					Item: attr.EncodeItem(attr.Item{"pk": attr.StrValue(pk), "v": attr.StrValue(pad)})}})
				if len(batch) == cap(batch) || i == n-1 {
					if err := sb.BulkLoad(ctx, backend.BulkLoadParams{Table: t.ref, Items: batch}); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			start := time.Now()
			rc, err := sb.Recount(ctx, backend.CountsParams{Table: t.ref})
			if err != nil || !rc.Counted || rc.Stats.ItemCount != int64(n) {
				b.Fatalf("recount: %+v %v", rc, err)
			}
			full := time.Since(start)
			in := &TableNameInput{TableName: ptr("describe")}
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for b.Loop() {
				out, err := e.DescribeTable(ctx, coreAccount, in)
				if err != nil || out.Table.ItemCount != int64(n) {
					b.Fatalf("describe: %v %v", out, err)
				}
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(full.Nanoseconds()), "fullread-ns")
		})
	}
}

// BenchmarkPutItemStats: PutItem of 1 KiB items through the engine on
// SQLite, one client: new keys, overwrites of existing keys (blind
// puts), and new keys on a table with a GSI.
func BenchmarkPutItemStats(b *testing.B) {
	payload := attr.StrValue(strings.Repeat("y", 1000))
	for _, c := range []struct {
		name      string
		gsi       bool
		overwrite bool
	}{{"new", false, false}, {"overwrite", false, true}, {"gsi-new", true, false}} {
		b.Run(c.name, func(b *testing.B) {
			e, _ := benchEngine(b)
			benchTable(b, e, "put", c.gsi)
			ctx := context.Background()
			const keys = 1000
			put := func(i int) {
				it := attr.Item{"pk": attr.StrValue(fmt.Sprintf("k%09d", i)), "v": payload}
				if c.gsi {
					it["g"] = attr.StrValue(fmt.Sprintf("g%d", i%100))
				}
				if _, err := e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("put"), Item: it}); err != nil {
					b.Fatal(err)
				}
			}
			if c.overwrite {
				for i := range keys {
					put(i)
				}
			}
			i := 0
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for b.Loop() {
				if c.overwrite {
					put(i % keys)
				} else {
					put(i)
				}
				i++
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
