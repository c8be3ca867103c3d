// Command benchfloor is the floor of the benchmarks: an HTTP server on
// Go's net/http that speaks just enough of the DynamoDB protocol for
// `extenddb bench` and does no work. It reads each request whole and
// answers a fixed, valid response for its operation (with the request id
// and CRC32 headers the SDKs check), so its CPU per request is what the
// HTTP layer alone costs on this machine. scripts/bench-compare.sh runs it
// beside the real servers (docs/benchmarks.md).
//
// With --postgres DSN every request, before its fixed answer, makes one
// round trip to PostgreSQL through a pgx pool sized like extenddb's
// (max(8, 4 × GOMAXPROCS) connections, the statement cache exec mode):
// `SELECT $1::bytea` of an item-sized value, which sends and receives
// about one item. Its CPU per request is the floor of a Go process that
// answers each request with one PostgreSQL round trip ("floor-postgres"
// in scripts/bench-compare.sh): what extenddb on PostgreSQL costs above it
// is extenddb's own work.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"hash/crc32"
	"io"
	"log"
	"net/http"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8900", "address to listen on")
	itemSize := flag.Int("item-size", 1024, "approximate size of the items GetItem and Query return")
	dsn := flag.String("postgres", "", "PostgreSQL DSN: one round trip per request (SELECT $1::bytea of an item) through a pool sized like extenddb's")
	flag.Parse()
	answers := fixedAnswers(*itemSize)
	var pool *pgxpool.Pool
	value := []byte(strings.Repeat("x", max(*itemSize, 1)))
	if *dsn != "" {
		cfg, err := pgxpool.ParseConfig(*dsn)
		if err != nil {
			log.Fatalf("--postgres: %v", err)
		}
		if !strings.Contains(*dsn, "pool_max_conns") {
			cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0))) // as extenddb's postgres backend
		}
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
		if pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
			log.Fatalf("--postgres: %v", err)
		}
		if err := pool.Ping(context.Background()); err != nil {
			log.Fatalf("--postgres: %v", err)
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if pool != nil {
			var got []byte
			if err := pool.QueryRow(r.Context(), `SELECT $1::bytea`, value).Scan(&got); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		a, ok := answers[op]
		if !ok {
			a = answers["unknown"]
		}
		hd := w.Header()
		hd.Set("Content-Type", "application/x-amz-json-1.0")
		hd.Set("x-amzn-RequestId", "FLOOR")
		hd.Set("x-amz-crc32", a.crc)
		hd.Set("Content-Length", a.length)
		w.WriteHeader(a.status)
		w.Write(a.body)
	})
	log.Printf("benchfloor listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, h))
}

type answer struct {
	status      int
	body        []byte
	crc, length string
}

func fixedAnswers(itemSize int) map[string]answer {
	payload := strings.Repeat("x", max(itemSize-64, 1))
	item := map[string]any{"pk": map[string]string{"S": "r0000-00000"}, "sk": map[string]string{"S": "000"},
		"gpk": map[string]string{"S": "g0000-00000"}, "gsk": map[string]string{"S": "000"},
		"payload": map[string]string{"S": payload}, "ver": map[string]string{"N": "0"}}
	items := make([]any, 25)
	for i := range items {
		items[i] = item
	}
	table := map[string]any{"TableName": "t", "TableStatus": "ACTIVE",
		"GlobalSecondaryIndexes": []any{map[string]any{"IndexName": "gsi1", "IndexStatus": "ACTIVE"}}}
	out := map[string]answer{}
	add := func(op string, status int, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		out[op] = answer{status: status, body: b, crc: strconv.FormatUint(uint64(crc32.ChecksumIEEE(b)), 10), length: strconv.Itoa(len(b))}
	}
	add("CreateTable", 200, map[string]any{"TableDescription": table})
	add("DescribeTable", 200, map[string]any{"Table": table})
	add("DeleteTable", 200, map[string]any{"TableDescription": table})
	add("PutItem", 200, map[string]any{})
	add("UpdateItem", 200, map[string]any{})
	add("DeleteItem", 200, map[string]any{})
	add("TransactWriteItems", 200, map[string]any{})
	add("GetItem", 200, map[string]any{"Item": item})
	add("Query", 200, map[string]any{"Items": items, "Count": 25, "ScannedCount": 25})
	add("BatchWriteItem", 200, map[string]any{"UnprocessedItems": map[string]any{}})
	add("unknown", 400, map[string]string{"__type": "com.amazon.coral.service#UnknownOperationException", "message": "not served by the floor server"})
	return out
}
