package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// BenchmarkImport measures ImportTable on a served SQLite server: one
// gzip object of DynamoDB JSON lines ({"Item":...}, canonical, in key
// order, as an export of a SQLite table writes them) of EXTENDDB_IMPORT_BENCH_ITEMS items (default 50,000) of about
// 1 KiB, with string keys pk/sk, and gpk/gsk on every fourth item for a
// GSI (projection ALL). It reports items/s and the process's CPU per
// item (the server's: the client only polls DescribeImport). Run it with
// -benchtime 1x, and -cpuprofile to see where the import's CPU goes.
// EXTENDDB_IMPORT_BENCH_ADDR sets the listen address (default
// 127.0.0.1:0).
func BenchmarkImport(b *testing.B) {
	n := 50000
	if v, _ := strconv.Atoi(os.Getenv("EXTENDDB_IMPORT_BENCH_ITEMS")); v > 0 {
		n = v
	}
	buckets := b.TempDir()
	if err := os.MkdirAll(filepath.Join(buckets, "bkt", "in"), 0o700); err != nil {
		b.Fatal(err)
	}
	type keyed struct {
		h    uint32
		pk   string
		line []byte
	}
	lines := make([]keyed, n)
	payload := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 28)
	for i := range n {
		pk := fmt.Sprintf("b%d-%d", i%16, i)
		it := attr.Item{
			"pk":      attr.StrValue(pk),
			"sk":      attr.StrValue("0"),
			"payload": attr.StrValue(strconv.Itoa(i) + payload),
			"ver":     {Type: attr.N, Str: strconv.Itoa(i % 1000)},
		}
		if i%4 == 0 {
			it["gpk"], it["gsk"] = attr.StrValue(fmt.Sprintf("g%d", i%100)), attr.StrValue(strconv.Itoa(i))
		}
		kb, _ := attr.KeyBytes(it["pk"])
		lines[i] = keyed{backend.KeyHash(kb), string(kb), append(attr.AppendItem([]byte(`{"Item":`), it), "}\n"...)}
	}
	// In the order an export of a SQLite table writes them: key hash,
	// then key.
	slices.SortFunc(lines, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.h, b.h), strings.Compare(a.pk, b.pk)) })
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for _, l := range lines {
		if _, err := zw.Write(l.line); err != nil {
			b.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buckets, "bkt", "in", "data.json.gz"), gz.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	url := startBenchServer(b, buckets)
	s := &xferServer{backend: "sqlite", url: url}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0, t0 := benchCPU(), time.Now()
		importBench(b, s, fmt.Sprintf("imp%d", i), n)
		wall, cpu := time.Since(t0), benchCPU()-c0
		b.ReportMetric(float64(n)/wall.Seconds(), "items/s")
		b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/item")
		b.Logf("import of %d items (%.1f MiB gzip): %.2fs, %.0f items/s, CPU %.2fs, %.1f µs/item",
			n, float64(gz.Len())/(1<<20), wall.Seconds(), float64(n)/wall.Seconds(), cpu.Seconds(), float64(cpu.Microseconds())/float64(n))
	}
	b.ReportMetric(0, "ns/op")
}

// startBenchServer serves SQLite in a temporary directory with a
// filesystem backup store and buckets under root until the benchmark
// ends, and answers its URL.
func startBenchServer(b *testing.B, buckets string) string {
	cfg, err := LoadConfig("")
	if err != nil {
		b.Fatal(err)
	}
	store := b.TempDir()
	if err := os.Chmod(store, 0o700); err != nil {
		b.Fatal(err)
	}
	addr := os.Getenv("EXTENDDB_IMPORT_BENCH_ADDR")
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	for k, v := range map[string]string{"storage.backend": "sqlite", "storage.data_dir": b.TempDir(),
		"backup.store.kind": "filesystem", "backup.store.root": store, "s3.filesystem_root": buckets,
		"server.listen": addr, "log.level": "warn"} {
		if err := cfg.Set(k, v); err != nil {
			b.Fatal(k, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := Migrate(ctx, cfg); err != nil {
		cancel()
		b.Fatal(err)
	}
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{Ready: func(a net.Addr) { addrc <- a }}) }()
	select {
	case a := <-addrc:
		b.Cleanup(func() { cancel(); <-done })
		return "http://" + a.String() + "/"
	case err := <-done:
		cancel()
		b.Fatal(err)
	}
	return ""
}

// importBench imports the bucket's in/ into a new table and waits for
// COMPLETED with n items.
func importBench(b *testing.B, s *xferServer, table string, n int) {
	params := av{"TableName": table, "BillingMode": "PAY_PER_REQUEST",
		"AttributeDefinitions": []av{keyAttr("pk", "S"), keyAttr("sk", "S"), keyAttr("gpk", "S"), keyAttr("gsk", "S")},
		"KeySchema":            []av{keyElem("pk", "HASH"), keyElem("sk", "RANGE")},
		"GlobalSecondaryIndexes": []av{{"IndexName": "gsi1", "KeySchema": []av{keyElem("gpk", "HASH"), keyElem("gsk", "RANGE")},
			"Projection": av{"ProjectionType": "ALL"}}}}
	var out struct{ ImportTableDescription struct{ ImportArn string } }
	benchCall(b, s, "ImportTable", av{"S3BucketSource": av{"S3Bucket": "bkt", "S3KeyPrefix": "in/"}, "InputFormat": "DYNAMODB_JSON",
		"InputCompressionType": "GZIP", "TableCreationParameters": params}, &out)
	for {
		var x struct {
			ImportTableDescription struct {
				ImportStatus                  string
				ImportedItemCount, ErrorCount int64
			}
		}
		benchCall(b, s, "DescribeImport", av{"ImportArn": out.ImportTableDescription.ImportArn}, &x)
		if g := x.ImportTableDescription; g.ImportStatus != "IN_PROGRESS" {
			if g.ImportStatus != "COMPLETED" || g.ImportedItemCount != int64(n) || g.ErrorCount != 0 {
				b.Fatalf("import: %+v, want COMPLETED with %d items", g, n)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func benchCall(b *testing.B, s *xferServer, op string, in, out any) {
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("%s: HTTP %d: %s", op, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.Fatal(err)
	}
}

// benchCPU is this process's user+system CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
