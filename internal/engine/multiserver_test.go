package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/postgres"
)

// Several servers sharing one PostgreSQL database, as two engines with
// two backends (two pools) in one process. These tests run when
// EXTENDDB_TEST_BACKENDS names postgres, against a fresh database created
// through EXTENDDB_TEST_POSTGRES_DSN; then a missing or unreachable server
// FAILS them (it never skips), as in internal/backend/postgres.

// needPostgres returns the DSN of a fresh database dropped at the end of
// the test.
func needPostgres(t *testing.T) string {
	t.Helper()
	requested := false
	for _, b := range strings.Split(os.Getenv("EXTENDDB_TEST_BACKENDS"), ",") {
		if strings.TrimSpace(b) == "postgres" {
			requested = true
		}
	}
	if !requested {
		t.Skip("postgres not requested (EXTENDDB_TEST_BACKENDS)")
	}
	admin := os.Getenv("EXTENDDB_TEST_POSTGRES_DSN")
	if admin == "" {
		t.Fatal("EXTENDDB_TEST_BACKENDS names postgres but EXTENDDB_TEST_POSTGRES_DSN is empty")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("postgres was requested and is unreachable: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("extenddb_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 ENCODING 'UTF8'"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		return u.String()
	}
	return admin + " dbname=" + name
}

const msAccount = "000000000001"

// openServer is one server: its own pool on the database and an engine
// with its background work started.
func openServer(t *testing.T, dsn string, opt Options) (*Engine, backend.Backend) {
	t.Helper()
	b := openPool(t, dsn, 8)
	return startEngine(t, b, opt), b
}

// openPool opens a backend (a connection pool of its own) on the database.
func openPool(t *testing.T, dsn string, conns int32) backend.Backend {
	t.Helper()
	b, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, MaxConns: conns, ItemSize: ItemSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return checked(t, b)
}

func startEngine(t *testing.T, b backend.Backend, opt Options) *Engine {
	e := New(b, opt)
	e.Start(context.Background(), []string{msAccount})
	t.Cleanup(e.Stop)
	return e
}

// ok fails the test on an error: ok(t)(e.PutItem(...)).
func ok(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func sv(s string) attr.Value { return attr.StrValue(s) }

func createHashTable(t *testing.T, e *Engine, name string) {
	t.Helper()
	ok(t)(e.CreateTable(t.Context(), msAccount, &CreateTableInput{TableName: ptr(name),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST"}))
}

func addGSI(t *testing.T, e *Engine, table, index, attrName, attrType string) {
	t.Helper()
	ok(t)(e.UpdateTable(t.Context(), msAccount, &UpdateTableInput{TableName: ptr(table),
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}, {AttributeName: attrName, AttributeType: attrType}},
		GlobalSecondaryIndexUpdates: []GlobalSecondaryIndexUpdate{{Create: &CreateGSIAction{IndexName: index,
			KeySchema: []KeySchemaElement{{AttributeName: attrName, KeyType: "HASH"}}, Projection: &Projection{ProjectionType: "ALL"}}}}}))
}

// waitBackfilled waits until no index of the table (user or TTL) is
// being created.
func waitBackfilled(t *testing.T, e *Engine, name string, timeout time.Duration) *table {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		e.tables.drop(msAccount, name)
		tb, err := e.loadTable(t.Context(), msAccount, name)
		if err != nil {
			t.Fatal(err)
		}
		busy := false
		for _, ix := range tb.allIndexes() {
			if ix.Status != "ACTIVE" {
				busy = true
			}
		}
		if !busy {
			return tb
		}
		if time.Now().After(deadline) {
			t.Fatalf("table %s: indexes still being created after %v", name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queryPKs answers a Query of a hash-only index for one string value,
// with the table keys of the items it returns.
func queryPKs(t *testing.T, e *Engine, table, index, attrName, value string) []string {
	t.Helper()
	out, err := e.Query(t.Context(), msAccount, &QueryInput{TableName: ptr(table), IndexName: ptr(index),
		KeyConditionExpression:    ptr("#a = :v"),
		ExpressionAttributeNames:  map[string]string{"#a": attrName},
		ExpressionAttributeValues: map[string]attr.Value{":v": sv(value)}})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	if out.Items != nil {
		for _, raw := range *out.Items {
			it, err := attr.DecodeItem(raw)
			if err != nil {
				t.Fatal(err)
			}
			pks = append(pks, it["pk"].Str)
		}
	}
	sort.Strings(pks)
	return pks
}

// scanRows reads every row of a table (index "") or of an index.
func scanRows(t *testing.T, b backend.Backend, ref backend.TableRef, index string) []backend.Row {
	t.Helper()
	var out []backend.Row
	var after *backend.Cursor
	for {
		res, err := b.Scan(t.Context(), backend.ScanParams{Table: ref, Index: index, After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Rows...)
		if !res.More || len(res.Rows) == 0 {
			return out
		}
		last := res.Rows[len(res.Rows)-1]
		after = &backend.Cursor{PK: last.PK, SK: last.SK, BasePK: last.BasePK, BaseSK: last.BaseSK}
	}
}

// checkIndexes compares every index of the table (the TTL index
// included) with a recomputation from the table's items: the same
// entries, no stale, orphan or duplicate one, none missing.
func checkIndexes(t *testing.T, e *Engine, name string) {
	t.Helper()
	e.tables.drop(msAccount, name)
	tb, err := e.loadTable(t.Context(), msAccount, name)
	if err != nil {
		t.Fatal(err)
	}
	items := scanRows(t, e.backend, tb.ref, "")
	for _, ix := range tb.allIndexes() {
		want := map[string]bool{}
		for _, r := range items {
			it, err := attr.DecodeItem(r.Item)
			if err != nil {
				t.Fatal(err)
			}
			pk, sk, ok, err := ix.keyOf(it)
			if err != nil || !ok {
				continue
			}
			want[entryID(pk, sk, r.PK, r.SK, ix.project(tb, it, r.Item))] = true
		}
		got := map[string]int{}
		for _, r := range scanRows(t, e.backend, tb.ref, ix.Name) {
			got[entryID(r.PK, r.SK, r.BasePK, r.BaseSK, r.Item)]++
		}
		var stale, dup, missing int
		for k, n := range got {
			if !want[k] {
				stale += n
			} else if n > 1 {
				dup += n - 1
			}
		}
		for k := range want {
			if got[k] == 0 {
				missing++
			}
		}
		if stale+dup+missing > 0 {
			t.Errorf("index %s of %s: %d entries that match no item (stale or orphan), %d duplicates, %d missing (%d items)",
				ix.Name, name, stale, dup, missing, len(items))
		}
	}
}

func entryID(ipk, isk, pk, sk, item []byte) string {
	return strconv.Quote(string(ipk)) + "/" + strconv.Quote(string(isk)) + "/" + strconv.Quote(string(pk)) + "/" +
		strconv.Quote(string(sk)) + "/" + strconv.Quote(string(item))
}

// TestTwoServersGSICreation: server B caches the table without the index while server A creates it; both
// then write. With the index ACTIVE it must hold exactly what the table
// says: no stale entry for x, no orphan for the deleted y.
func TestTwoServersGSICreation(t *testing.T) {
	dsn := needPostgres(t)
	ctx := t.Context()
	a, _ := openServer(t, dsn, Options{TableCacheTTL: 200 * time.Millisecond, SweepInterval: time.Hour})
	b, _ := openServer(t, dsn, Options{TableCacheTTL: time.Minute, SweepInterval: time.Hour})
	const name = "two-servers-gsi"
	createHashTable(t, a, name)
	for _, pk := range []string{"x", "y"} {
		ok(t)(a.PutItem(ctx, msAccount, &PutItemInput{TableName: ptr(name), Item: attr.Item{"pk": sv(pk)}}))
	}
	// B reads x: it caches the description without the index.
	ok(t)(b.GetItem(ctx, msAccount, &GetItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv("x")}}))

	addGSI(t, a, name, "by_g", "g", "S")
	set := func(e *Engine, pk, g string) {
		ok(t)(e.UpdateItem(ctx, msAccount, &UpdateItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv(pk)},
			UpdateExpression: ptr("SET g = :g"), ExpressionAttributeValues: map[string]attr.Value{":g": sv(g)}}))
	}
	set(a, "x", "viaA")
	set(b, "x", "viaB")
	set(a, "y", "viaA")
	ok(t)(b.DeleteItem(ctx, msAccount, &DeleteItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv("y")}}))

	waitBackfilled(t, a, name, 30*time.Second)
	if got := queryPKs(t, a, name, "by_g", "g", "viaA"); len(got) != 0 {
		t.Errorf(`g = "viaA" returns %v; want nothing (x now has viaB, y is deleted)`, got)
	}
	if got := queryPKs(t, a, name, "by_g", "g", "viaB"); len(got) != 1 || got[0] != "x" {
		t.Errorf(`g = "viaB" returns %v; want [x]`, got)
	}
	checkIndexes(t, a, name)
}

// countingBackend counts the TTL sweeper's index reads (to tell a sweeper
// that waits from one that spins) and the writes refused as computed from
// a stale description.
type countingBackend struct {
	backend.Backend
	ttlQueries atomic.Int64
	refused    atomic.Int64
}

// Capabilities: none (the inner backend's would bypass the counts).
func (c *countingBackend) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (c *countingBackend) WriteItem(ctx context.Context, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	res, err := c.Backend.WriteItem(ctx, p)
	if backend.IsKind(err, backend.KindTableVersion) {
		c.refused.Add(1)
	}
	return res, err
}

func (c *countingBackend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	res, err := c.Backend.TransactWrite(ctx, p)
	if backend.IsKind(err, backend.KindTableVersion) {
		c.refused.Add(1)
	}
	return res, err
}

func (c *countingBackend) Query(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	if p.Index == ttlIndexName {
		c.ttlQueries.Add(1)
	}
	return c.Backend.Query(ctx, p)
}

// TestTwoServersTTLEnable: A enables TTL
// and writes 600 items already expired; B, with a description cached
// from before, overwrites them with a future expiry. The items must stay,
// the genuinely expired items behind them in the TTL order must be
// deleted, and the sweeper must then wait instead of spinning.
func TestTwoServersTTLEnable(t *testing.T) {
	dsn := needPostgres(t)
	ctx := t.Context()
	a, _ := openServer(t, dsn, Options{TableCacheTTL: 200 * time.Millisecond, SweepInterval: time.Hour})
	b, _ := openServer(t, dsn, Options{TableCacheTTL: time.Minute, SweepInterval: time.Hour})
	const name = "two-servers-ttl"
	createHashTable(t, a, name)
	ok(t)(b.GetItem(ctx, msAccount, &GetItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv("x")}}))

	ok(t)(a.UpdateTimeToLive(ctx, msAccount, &UpdateTimeToLiveInput{TableName: ptr(name),
		TimeToLiveSpecification: &TimeToLiveSpecification{Enabled: ptr(true), AttributeName: ptr("exp")}}))
	now := time.Now().Unix()
	batch := func(e *Engine, prefix string, n int, exp int64) {
		for i := 0; i < n; i += 25 {
			var reqs []WriteRequest
			for j := i; j < i+25 && j < n; j++ {
				reqs = append(reqs, WriteRequest{PutRequest: &PutRequest{Item: attr.Item{"pk": sv(fmt.Sprintf("%s%03d", prefix, j)),
					"exp": attr.MustNum(strconv.FormatInt(exp, 10))}}})
			}
			ok(t)(e.BatchWriteItem(ctx, msAccount, &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{name: reqs}}))
		}
	}
	batch(a, "s", 600, now-100)  // expired...
	batch(b, "s", 600, now+3600) // ...then kept for an hour by B
	batch(a, "g", 50, now-10)    // genuinely expired, after them in TTL order
	waitBackfilled(t, a, name, 30*time.Second)

	// A sweeper on a third pool, counting its TTL index reads.
	counter := &countingBackend{Backend: openPool(t, dsn, 4)}
	startEngine(t, counter, Options{SweepInterval: 100 * time.Millisecond})

	exists := func(pk string) bool {
		out, err := a.GetItem(ctx, msAccount, &GetItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv(pk)}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := 0
		for i := 0; i < 50; i++ {
			if exists(fmt.Sprintf("g%03d", i)) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 50 expired items still there after 20s (the sweeper never gets past the items B kept)", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < 600; i++ {
		if pk := fmt.Sprintf("s%03d", i); !exists(pk) {
			t.Fatalf("item %s, kept by B for an hour, was deleted", pk)
		}
	}
	// Idle: the sweeper waits SweepInterval (100ms) between passes.
	time.Sleep(300 * time.Millisecond)
	before := counter.ttlQueries.Load()
	time.Sleep(time.Second)
	if n := counter.ttlQueries.Load() - before; n > 30 {
		t.Errorf("idle sweeper: %d TTL index reads in 1s (SweepInterval 100ms): it does not back off", n)
	}
	checkIndexes(t, a, name)
}
