package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend/backendtest"
	"github.com/extenddb/extenddb/internal/config"
)

// Cross-backend transfers: a table exported (ExportTableToPointInTime)
// by a server on one backend and imported (ImportTable) by a server on
// another, through one bucket directory both see ([s3] filesystem_root),
// must be the same table, item by item and index by index. Each test
// starts one server per backend, has each source export its tables once
// and each target import them; the tables cover every key shape (S, N
// and B hash keys, with and without a range key), GSIs with ALL and
// KEYS_ONLY projections, every attribute type and items just under
// 400 KB, in both export formats.
//
// TestTransferRoundTrip runs the pairs of memory, SQLite and PostgreSQL
// (when requested); TestTransferRoundTripMongoDB and
// TestTransferRoundTripCassandra the pairs that involve their backend,
// in the MongoDB and Cassandra lanes (-run Mongo, -run Cassandra).

func TestTransferRoundTrip(t *testing.T) {
	backends := []string{"memory", "sqlite"}
	if backendtest.Requested("postgres") {
		backends = append(backends, "postgres")
	}
	transferPairs(t, backends, func(src, dst string) bool { return true })
}

func TestTransferRoundTripMongoDB(t *testing.T) {
	if !backendtest.Requested("mongodb") {
		t.Skip("mongodb not requested (EXTENDDB_TEST_BACKENDS=mongodb EXTENDDB_TEST_MONGODB_URI=$(scripts/mongodb.sh start))")
	}
	backends := []string{"mongodb", "sqlite"}
	if os.Getenv("EXTENDDB_TEST_POSTGRES_DSN") != "" {
		backends = append(backends, "postgres")
	}
	transferPairs(t, backends, func(src, dst string) bool { return src == "mongodb" || dst == "mongodb" })
}

func TestTransferRoundTripCassandra(t *testing.T) {
	if !backendtest.Requested("cassandra") {
		t.Skip("cassandra not requested (EXTENDDB_TEST_BACKENDS=cassandra EXTENDDB_TEST_CASSANDRA_HOSTS=$(scripts/cassandra.sh start))")
	}
	backends := []string{"cassandra", "sqlite"}
	if os.Getenv("EXTENDDB_TEST_POSTGRES_DSN") != "" {
		backends = append(backends, "postgres")
	}
	if os.Getenv("EXTENDDB_TEST_MONGODB_URI") != "" {
		backends = append(backends, "mongodb")
	}
	transferPairs(t, backends, func(src, dst string) bool { return src == "cassandra" || dst == "cassandra" })
}

// xferServer is a server under test and its client.
type xferServer struct {
	t       *testing.T
	backend string
	url     string
}

// call sends one DynamoDB operation and decodes the answer into out; a
// non-200 answer fails the test.
func (s *xferServer) call(op string, in any, out any) {
	s.t.Helper()
	if err := s.try(op, in, out); err != nil {
		s.t.Fatalf("%s on %s: %v", op, s.backend, err)
	}
}

func (s *xferServer) try(op string, in any, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// transferConfig is a server configuration on backend: its own database
// (dropped at the end) and backup store, the shared bucket root, and a
// short ship interval so that exports need not wait long.
func transferConfig(t *testing.T, backend, buckets string) config.Config {
	t.Helper()
	var cfg config.Config
	if backend == "cassandra" {
		cfg = cassandraConfig(t)
	} else {
		var err error
		if cfg, err = LoadConfig(""); err != nil {
			t.Fatal(err)
		}
		cfg.Storage.Backend = backend
	}
	set := map[string]string{"backup.store.kind": "filesystem", "s3.filesystem_root": buckets,
		"backup.pitr.ship_interval": "200ms", "backup.heartbeat_interval": "1s"}
	switch backend {
	case "sqlite":
		set["storage.data_dir"] = t.TempDir()
	case "postgres":
		set["storage.postgres.dsn"] = transferPostgres(t)
	case "mongodb":
		uri := os.Getenv("EXTENDDB_TEST_MONGODB_URI")
		if uri == "" {
			t.Fatal("EXTENDDB_TEST_MONGODB_URI is empty")
		}
		db := fmt.Sprintf("extenddb_xfer_%d_%08x", time.Now().Unix(), rand.Uint32())
		t.Cleanup(func() {
			if c, err := mongo.Connect(options.Client().ApplyURI(uri)); err == nil {
				_ = c.Database(db).Drop(context.Background())
				_ = c.Disconnect(context.Background())
			}
		})
		set["storage.mongodb.uri"], set["storage.mongodb.database"] = uri, db
	}
	for k, v := range set {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(k, err)
		}
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Backup.Store.Root = root
	cfg.Server.Listen = "127.0.0.1:0"
	return cfg
}

// transferPostgres creates a database of the test's own on the server of
// EXTENDDB_TEST_POSTGRES_DSN and drops it at the end.
func transferPostgres(t *testing.T) string {
	admin := os.Getenv("EXTENDDB_TEST_POSTGRES_DSN")
	if admin == "" {
		t.Fatal("EXTENDDB_TEST_POSTGRES_DSN is empty")
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("extenddb_xfer_%08x", rand.Uint32())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// startTransferServer migrates and serves cfg until the test ends.
func startTransferServer(t *testing.T, backend string, cfg config.Config) *xferServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if backend != "memory" {
		if _, err := Migrate(ctx, cfg); err != nil {
			cancel()
			t.Fatalf("migrate %s: %v", backend, err)
		}
	}
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{Ready: func(a net.Addr) { addrc <- a }}) }()
	select {
	case a := <-addrc:
		t.Cleanup(func() { cancel(); <-done })
		return &xferServer{t: t, backend: backend, url: "http://" + a.String() + "/"}
	case err := <-done:
		cancel()
		t.Fatalf("serve %s: %v", backend, err)
	}
	return nil
}

type av = map[string]any

// xferTable is a fixture table: its creation parameters, export format
// and items.
type xferTable struct {
	name   string
	params av // CreateTable's and TableCreationParameters' members
	format string
	items  []av
}

func keyAttr(name, typ string) av { return av{"AttributeName": name, "AttributeType": typ} }
func keyElem(name, typ string) av { return av{"AttributeName": name, "KeyType": typ} }

// allTypes is an item's non-key attributes of every type, varied by i.
func allTypes(i int) av {
	return av{
		"s":    av{"S": fmt.Sprintf("text %d ünïcødé ✓ %s", i, strings.Repeat("x", i%7))},
		"n":    av{"N": []string{"0", "-1.5", "12345678901234567890123456789012345678", "0.000000000000000000000000000001", "1E+100", "-9.99E-100"}[i%6]},
		"b":    av{"B": base64.StdEncoding.EncodeToString([]byte{byte(i), 0, 255, byte(i * 7)})},
		"bool": av{"BOOL": i%2 == 0},
		"null": av{"NULL": true},
		"ss":   av{"SS": []string{"a", fmt.Sprintf("s%d", i), "z"}[:2+i%2]},
		"ns":   av{"NS": []string{fmt.Sprint(i), fmt.Sprint(-i - 1), "3.25"}},
		"bs":   av{"BS": []string{base64.StdEncoding.EncodeToString([]byte{1}), base64.StdEncoding.EncodeToString([]byte{byte(i), 2})}},
		"l":    av{"L": []any{av{"S": "x"}, av{"N": fmt.Sprint(i)}, av{"L": []any{}}, av{"M": av{"k": av{"NULL": true}}}}},
		"m":    av{"M": av{"nested": av{"M": av{"deep": av{"SS": []string{"p", "q"}}}}, "empty": av{"M": av{}}, "n": av{"N": "7"}}},
	}
}

// transferTables are the fixture tables: every key shape, GSIs and
// items near 400 KB.
func transferTables() []*xferTable {
	var out []*xferTable
	big := func(it av, attrName string, size int) av {
		// size bytes of DynamoDB item size in total, roughly: the
		// attribute fills what the rest leaves.
		it[attrName] = av{"S": strings.Repeat("z", size)}
		return it
	}
	// pk S; GSIs on a string/number pair (ALL) and a binary (KEYS_ONLY).
	t1 := &xferTable{name: "xfer-s", format: "DYNAMODB_JSON", params: av{
		"AttributeDefinitions": []any{keyAttr("pk", "S"), keyAttr("gs", "S"), keyAttr("gn", "N"), keyAttr("gb", "B")},
		"KeySchema":            []any{keyElem("pk", "HASH")},
		"GlobalSecondaryIndexes": []any{
			av{"IndexName": "by-gs", "KeySchema": []any{keyElem("gs", "HASH"), keyElem("gn", "RANGE")}, "Projection": av{"ProjectionType": "ALL"}},
			av{"IndexName": "by-gb", "KeySchema": []any{keyElem("gb", "HASH")}, "Projection": av{"ProjectionType": "KEYS_ONLY"}},
		}}}
	for i := 0; i < 80; i++ {
		it := allTypes(i)
		it["pk"] = av{"S": fmt.Sprintf("k%03d", i)}
		if i%3 != 0 { // some items are not in the indexes
			it["gs"] = av{"S": fmt.Sprintf("g%d", i%5)}
			it["gn"] = av{"N": fmt.Sprint(i * 3)}
		}
		if i%4 == 0 {
			it["gb"] = av{"B": base64.StdEncoding.EncodeToString([]byte{byte(i % 3)})}
		}
		t1.items = append(t1.items, it)
	}
	t1.items = append(t1.items, big(av{"pk": av{"S": "big1"}, "gs": av{"S": "g0"}, "gn": av{"N": "1"}}, "pad", 400*1024-64))
	// pk S, sk N; a GSI with the keys swapped (ION).
	t2 := &xferTable{name: "xfer-sn", format: "ION", params: av{
		"AttributeDefinitions": []any{keyAttr("pk", "S"), keyAttr("sk", "N")},
		"KeySchema":            []any{keyElem("pk", "HASH"), keyElem("sk", "RANGE")},
		"GlobalSecondaryIndexes": []any{
			av{"IndexName": "swapped", "KeySchema": []any{keyElem("sk", "HASH"), keyElem("pk", "RANGE")}, "Projection": av{"ProjectionType": "ALL"}},
		}}}
	for i := 0; i < 90; i++ {
		it := allTypes(i)
		it["pk"], it["sk"] = av{"S": fmt.Sprintf("p%d", i%7)}, av{"N": []string{fmt.Sprint(i), fmt.Sprintf("-%d.5", i), fmt.Sprintf("%dE+20", i+1)}[i%3]}
		t2.items = append(t2.items, it)
	}
	t2.items = append(t2.items, big(av{"pk": av{"S": "big"}, "sk": av{"N": "1"}, "b": av{"B": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 1000))}}, "pad", 400*1024-1100))
	// pk N, sk B (ION).
	t3 := &xferTable{name: "xfer-nb", format: "ION", params: av{
		"AttributeDefinitions": []any{keyAttr("pk", "N"), keyAttr("sk", "B")},
		"KeySchema":            []any{keyElem("pk", "HASH"), keyElem("sk", "RANGE")}}}
	for i := 0; i < 60; i++ {
		it := allTypes(i)
		it["pk"], it["sk"] = av{"N": fmt.Sprintf("%d.25", i%5-2)}, av{"B": base64.StdEncoding.EncodeToString([]byte{byte(i), byte(255 - i)})}
		t3.items = append(t3.items, it)
	}
	// pk B, a GSI on a number (DYNAMODB_JSON).
	t4 := &xferTable{name: "xfer-b", format: "DYNAMODB_JSON", params: av{
		"AttributeDefinitions": []any{keyAttr("pk", "B"), keyAttr("v", "N")},
		"KeySchema":            []any{keyElem("pk", "HASH")},
		"GlobalSecondaryIndexes": []any{
			av{"IndexName": "by-v", "KeySchema": []any{keyElem("v", "HASH")}, "Projection": av{"ProjectionType": "INCLUDE", "NonKeyAttributes": []string{"s", "m"}}},
		}}}
	for i := 0; i < 60; i++ {
		it := allTypes(i)
		it["pk"], it["v"] = av{"B": base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("bin-%d", i)))}, av{"N": fmt.Sprint(i % 9)}
		t4.items = append(t4.items, it)
	}
	t4.items = append(t4.items, big(av{"pk": av{"B": base64.StdEncoding.EncodeToString([]byte("big"))}}, "pad", 400*1024-48))
	return append(out, t1, t2, t3, t4)
}

// transferPairs starts a server per backend, creates and exports the
// fixture tables on every backend that is a source of a pair, and
// imports each into every target of a pair, comparing the tables.
func transferPairs(t *testing.T, backends []string, pair func(src, dst string) bool) {
	buckets := t.TempDir()
	if err := os.Mkdir(filepath.Join(buckets, "xfer"), 0o700); err != nil {
		t.Fatal(err)
	}
	servers := map[string]*xferServer{}
	for _, b := range backends {
		servers[b] = startTransferServer(t, b, transferConfig(t, b, buckets))
	}
	tables := transferTables()
	for _, src := range backends {
		var dsts []string
		for _, dst := range backends {
			if dst != src && pair(src, dst) {
				dsts = append(dsts, dst)
			}
		}
		if len(dsts) == 0 {
			continue
		}
		s := servers[src]
		exports := exportFixtures(t, s, tables)
		for _, dst := range dsts {
			t.Run(src+"-to-"+dst, func(t *testing.T) {
				d := servers[dst]
				d.t = t
				s.t = t
				for _, tb := range tables {
					importAndCompare(t, s, d, tb, exports[tb.name])
				}
			})
		}
	}
}

// exportFixtures creates the tables on s, turns point-in-time recovery on
// and exports each; it answers each table's data prefix in the bucket.
func exportFixtures(t *testing.T, s *xferServer, tables []*xferTable) map[string]string {
	t.Helper()
	for _, tb := range tables {
		in := av{"TableName": tb.name, "BillingMode": "PAY_PER_REQUEST"}
		for k, v := range tb.params {
			in[k] = v
		}
		s.call("CreateTable", in, nil)
		var batch []any
		flush := func() {
			if len(batch) == 0 {
				return
			}
			req := av{tb.name: batch}
			for len(req) > 0 {
				var out struct{ UnprocessedItems map[string][]any }
				s.call("BatchWriteItem", av{"RequestItems": req}, &out)
				req = av{}
				for k, v := range out.UnprocessedItems {
					req[k] = v
				}
			}
			batch = nil
		}
		for _, it := range tb.items {
			if _, big := it["pad"]; big {
				s.call("PutItem", av{"TableName": tb.name, "Item": it}, nil)
				continue
			}
			batch = append(batch, av{"PutRequest": av{"Item": it}})
			if len(batch) == 25 {
				flush()
			}
		}
		flush()
		s.call("UpdateContinuousBackups", av{"TableName": tb.name,
			"PointInTimeRecoverySpecification": av{"PointInTimeRecoveryEnabled": true}}, nil)
	}
	out := map[string]string{}
	for _, tb := range tables {
		var d struct{ Table struct{ TableArn string } }
		s.call("DescribeTable", av{"TableName": tb.name}, &d)
		var e struct {
			ExportDescription struct{ ExportArn, ExportStatus string }
		}
		prefix := s.backend + "/" + tb.name
		s.call("ExportTableToPointInTime", av{"TableArn": d.Table.TableArn, "S3Bucket": "xfer", "S3Prefix": prefix,
			"ExportFormat": tb.format}, &e)
		arn := e.ExportDescription.ExportArn
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var x struct {
				ExportDescription struct {
					ExportStatus, FailureMessage string
					ItemCount                    int64
				}
			}
			s.call("DescribeExport", av{"ExportArn": arn}, &x)
			if st := x.ExportDescription.ExportStatus; st != "IN_PROGRESS" {
				if st != "COMPLETED" || x.ExportDescription.ItemCount != int64(len(tb.items)) {
					t.Fatalf("export of %s on %s: %+v, want COMPLETED with %d items", tb.name, s.backend, x.ExportDescription, len(tb.items))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("export of %s on %s still IN_PROGRESS", tb.name, s.backend)
			}
			time.Sleep(100 * time.Millisecond)
		}
		out[tb.name] = prefix + "/AWSDynamoDB/" + arn[strings.LastIndexByte(arn, '/')+1:] + "/data/"
	}
	return out
}

// importAndCompare imports a source table's export on d and compares the
// two tables and their indexes item by item.
func importAndCompare(t *testing.T, s, d *xferServer, tb *xferTable, prefix string) {
	t.Helper()
	target := s.backend + "-" + tb.name
	params := av{"TableName": target, "BillingMode": "PAY_PER_REQUEST"}
	for k, v := range tb.params {
		params[k] = v
	}
	var out struct{ ImportTableDescription struct{ ImportArn string } }
	d.call("ImportTable", av{"S3BucketSource": av{"S3Bucket": "xfer", "S3KeyPrefix": prefix}, "InputFormat": tb.format,
		"InputCompressionType": "GZIP", "TableCreationParameters": params}, &out)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var x struct {
			ImportTableDescription struct {
				ImportStatus, FailureCode, FailureMessage         string
				ProcessedItemCount, ImportedItemCount, ErrorCount int64
			}
		}
		d.call("DescribeImport", av{"ImportArn": out.ImportTableDescription.ImportArn}, &x)
		if st := x.ImportTableDescription.ImportStatus; st != "IN_PROGRESS" {
			n := int64(len(tb.items))
			if g := x.ImportTableDescription; st != "COMPLETED" || g.ImportedItemCount != n || g.ProcessedItemCount != n || g.ErrorCount != 0 {
				t.Fatalf("import of %s's %s on %s: %+v, want COMPLETED with %d items", s.backend, tb.name, d.backend, g, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("import of %s on %s still IN_PROGRESS", tb.name, d.backend)
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := scanCanonical(t, s, tb.name, "")
	if len(want) != len(tb.items) {
		t.Fatalf("%s on %s has %d items, wrote %d", tb.name, s.backend, len(want), len(tb.items))
	}
	compareItems(t, fmt.Sprintf("%s (%s) -> %s (%s)", tb.name, s.backend, target, d.backend), want, scanCanonical(t, d, target, ""))
	if gsis, ok := tb.params["GlobalSecondaryIndexes"].([]any); ok {
		for _, g := range gsis {
			idx := g.(av)["IndexName"].(string)
			w := scanCanonical(t, s, tb.name, idx)
			if len(w) == 0 {
				t.Fatalf("index %s of %s on %s is empty", idx, tb.name, s.backend)
			}
			compareItems(t, fmt.Sprintf("index %s of %s (%s) -> %s (%s)", idx, tb.name, s.backend, target, d.backend), w, scanCanonical(t, d, target, idx))
		}
	}
}

func compareItems(t *testing.T, what string, want, got []string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d items, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: item %d differs:\n got  %.400s\n want %.400s", what, i, got[i], want[i])
		}
	}
}

// scanCanonical scans a table (or index) whole and answers its items in
// a canonical form (sets sorted, map members in order), sorted.
func scanCanonical(t *testing.T, s *xferServer, table, index string) []string {
	t.Helper()
	var items []string
	var start any
	for {
		in := av{"TableName": table}
		if index == "" {
			in["ConsistentRead"] = true
		} else {
			in["IndexName"] = index
		}
		if start != nil {
			in["ExclusiveStartKey"] = start
		}
		var out struct {
			Items            []map[string]any
			LastEvaluatedKey map[string]any
		}
		s.call("Scan", in, &out)
		for _, it := range out.Items {
			b, err := json.Marshal(canonical(it))
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, string(b))
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	sort.Strings(items)
	return items
}

// canonical sorts the members of sets (unordered in DynamoDB) so that two
// equal items marshal the same (encoding/json orders map keys).
func canonical(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if arr, ok := e.([]any); ok && (k == "SS" || k == "NS" || k == "BS") {
				ss := make([]string, len(arr))
				for i, a := range arr {
					ss[i] = fmt.Sprint(a)
				}
				slices.Sort(ss)
				out[k] = ss
				continue
			}
			out[k] = canonical(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonical(e)
		}
		return out
	}
	return v
}
