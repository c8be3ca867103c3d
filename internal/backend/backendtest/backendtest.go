// Package backendtest is the storage conformance suite: the behaviours
// every backend.Backend must have (catalog, item writes, key order for
// every key shape, range bounds, paging, segments, index entries,
// conditional-write races, transactions, consistent reads). A backend is
// done when Run passes against it.
//
// Every test works in its own account with table names derived from the
// test name and a random suffix, so tests run in parallel on one backend
// and a failed run leaves recognisable evidence.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// Run runs the suite. open returns the backend a test uses; it may return
// one shared backend (tests isolate themselves by account and table
// names) and is responsible for closing it (t.Cleanup). The subtests run
// in parallel and are all finished when Run returns.
func Run(t *testing.T, open func(t *testing.T) backend.Backend) {
	tests := []struct {
		name string
		fn   func(e *env)
	}{
		{"Catalog", testCatalog},
		{"ListTables", testListTables},
		{"ItemCRUD", testItemCRUD},
		{"HashOnlyTable", testHashOnly},
		{"FnErrorWritesNothing", testFnError},
		{"OrderHashOnly", testOrderHashOnly},
		{"OrderStringSort", testOrderString},
		{"OrderNumberSort", testOrderNumber},
		{"OrderBinarySort", testOrderBinary},
		{"QueryBounds", testQueryBounds},
		{"QueryBeginsWith", testBeginsWith},
		{"QueryPaging", testQueryPaging},
		{"ScanSegmentsPaging", testScanSegments},
		{"IndexEntries", testIndex},
		{"IndexPaging", testIndexPaging},
		{"CursorBesideBounds", testCursorBesideBounds},
		{"DropIndex", testDropIndex},
		{"TableStats", testTableStats},
		{"Counts", testCounts},
		{"CountsConcurrent", testCountsConcurrent},
		{"CountsBulk", testCountsBulk},
		{"RecountBesideWrites", testRecountBesideWrites},
		{"IndexUnderConcurrentWrites", testIndexUnderConcurrentWrites},
		{"ConditionalPutRace", testConditionalRace},
		{"ConcurrentIncrements", testIncrements},
		{"ConcurrentMixedOutcomes", testMixedOutcomes},
		{"EventualReadsOwnWrites", testEventualReadsOwnWrites},
		{"TransactWriteAtomic", testTransactWrite},
		{"TransactGetConsistent", testTransactGetConsistent},
		{"DeletedTable", testDeletedTable},
		{"Snapshot", testSnapshot},
		{"BackupCatalog", testBackupCatalog},
		{"BackupCatalogID", testCatalogID},
		{"BackupCatalogRemoveRepoint", testBackupRemoveRepoint},
		{"RestoreCatalog", testRestoreCatalog},
		{"JobCatalog", testJobCatalog},
		{"JobCatalogEdges", testJobCatalogEdges},
		{"JobCatalogInsertRace", testJobInsertRace},
		{"BackupExpiry", testBackupExpiry},
		{"FenceStaleWrite", testFenceStaleWrite},
		{"FenceConcurrentUpdateTable", testFenceConcurrentUpdateTable},
		{"DeleteAbsentRemovesIndexKeys", testDeleteAbsentRemovesIndexKeys},
		{"ChangeLogAtomic", testChangeLogAtomic},
		{"ChangeLogLimits", testChangeLogLimits},
		{"ChangeLogTrim", testChangeLogTrim},
		{"ChangeLogLifetime", testChangeLogLifetime},
		{"ChangeLogConcurrent", testChangeLogConcurrent},
		{"BulkLoad", testBulkLoad},
		{"BulkLoadFence", testBulkLoadFence},
		{"BulkLoadConcurrent", testBulkLoadConcurrent},
		{"Ping", testPing},
	}
	t.Run("conformance", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				// Every backend runs under the contract checks; a
				// violation fails the test that met it.
				b := backend.Checked(open(t), func(err error) { t.Errorf("%v", err) })
				tc.fn(newEnv(t, b))
			})
		}
	})
}

// ---- helpers ----

type env struct {
	t       *testing.T
	b       backend.Backend
	ctx     context.Context
	account string
	suffix  string
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func newEnv(t *testing.T, b backend.Backend) *env {
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	return &env{t: t, b: b, ctx: t.Context(), account: "acct-" + name + "-" + suffix, suffix: suffix}
}

// tableName is a table name unique to this test.
func (e *env) tableName(base string) string {
	return base + "-" + unsafeChars.ReplaceAllString(e.t.Name(), "_") + "-" + e.suffix
}

func (e *env) createTable(base string) backend.TableRef {
	e.t.Helper()
	name := e.tableName(base)
	res, err := e.b.CreateTable(e.ctx, backend.CreateTableParams{Account: e.account, Name: name, Desc: []byte("desc:" + name)})
	if err != nil {
		e.t.Fatalf("CreateTable %s: %v", name, err)
	}
	return res.Table.Ref()
}

func putFn(item []byte, idx ...backend.IndexEntry) backend.WriteFunc {
	return func(old []byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: item, PutIndex: idx}, nil
	}
}

func (e *env) put(ref backend.TableRef, pk, sk, item []byte) {
	e.t.Helper()
	if _, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: putFn(item)}); err != nil {
		e.t.Fatalf("put %x/%x: %v", pk, sk, err)
	}
}

func (e *env) get(ref backend.TableRef, pk, sk []byte) []byte {
	e.t.Helper()
	res, err := e.b.GetItem(e.ctx, backend.GetItemParams{Table: ref, PK: pk, SK: sk})
	if err != nil {
		e.t.Fatalf("GetItem %x/%x: %v", pk, sk, err)
	}
	return res.Item
}

// pageAll pages through Query or Scan results from start: fetch reads
// one page of at most page rows after a cursor. maxPages bounds a backend
// that never says it is done.
func (e *env) pageAll(what string, page, maxPages int, start *backend.Cursor, fetch func(after *backend.Cursor) ([]backend.Row, bool, error)) []backend.Row {
	e.t.Helper()
	var out []backend.Row
	after := start
	for i := 0; ; i++ {
		if i > maxPages {
			e.t.Fatalf("%s paging does not end", what)
		}
		rows, more, err := fetch(after)
		if err != nil {
			e.t.Fatalf("%s: %v", what, err)
		}
		if len(rows) > page {
			e.t.Fatalf("%s returned %d rows, limit %d", what, len(rows), page)
		}
		out = append(out, rows...)
		if !more {
			return out
		}
		if len(rows) == 0 {
			e.t.Fatalf("%s: More with no rows", what)
		}
		last := rows[len(rows)-1]
		after = &backend.Cursor{PK: last.PK, SK: last.SK, BasePK: last.BasePK, BaseSK: last.BaseSK}
	}
}

// queryAll pages through a query with the given page size.
func (e *env) queryAll(p backend.QueryParams, page int) []backend.Row {
	e.t.Helper()
	p.Limit = page
	return e.pageAll("Query", page, 10000, p.After, func(after *backend.Cursor) ([]backend.Row, bool, error) {
		p.After = after
		res, err := e.b.Query(e.ctx, p)
		if err != nil {
			return nil, false, err
		}
		return res.Rows, res.More, nil
	})
}

func (e *env) scanAll(p backend.ScanParams, page int) []backend.Row {
	e.t.Helper()
	p.Limit = page
	return e.pageAll("Scan", page, 100000, p.After, func(after *backend.Cursor) ([]backend.Row, bool, error) {
		p.After = after
		res, err := e.b.Scan(e.ctx, p)
		if err != nil {
			return nil, false, err
		}
		return res.Rows, res.More, nil
	})
}

func strKey(s string) []byte {
	b, _ := attr.KeyBytes(attr.StrValue(s))
	return b
}

func numKey(s string) []byte {
	b, ok := attr.KeyBytes(attr.MustNum(s))
	if !ok {
		panic("bad number " + s)
	}
	return b
}

// itemOf is a canonical item naming its keys (the backend treats it as
// opaque bytes).
func itemOf(pk, sk []byte, extra string) []byte {
	it := attr.Item{"pk": attr.BinValue(pk), "sk": attr.BinValue(sk)}
	if extra != "" {
		it["x"] = attr.StrValue(extra)
	}
	return attr.EncodeItem(it)
}

type kv struct{ pk, sk []byte }

func keysOf(rows []backend.Row) []kv {
	out := make([]kv, len(rows))
	for i, r := range rows {
		out[i] = kv{r.PK, r.SK}
	}
	return out
}

func fmtKeys(ks []kv) string {
	var b bytes.Buffer
	for _, k := range ks {
		fmt.Fprintf(&b, "[%x/%x] ", k.pk, k.sk)
	}
	return b.String()
}

func sameKeys(a, b []kv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].pk, b[i].pk) || !bytes.Equal(a[i].sk, b[i].sk) {
			return false
		}
	}
	return true
}

func (e *env) wantKeys(what string, got []backend.Row, want []kv) {
	e.t.Helper()
	g := keysOf(got)
	if !sameKeys(g, want) {
		e.t.Fatalf("%s:\n got  %s\n want %s", what, fmtKeys(g), fmtKeys(want))
	}
	for _, r := range got {
		if r.SK == nil && r.PK == nil {
			e.t.Fatalf("%s: row without keys", what)
		}
	}
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

var errCond = errors.New("backendtest: condition failed")

func wantKind(t *testing.T, what string, err error, k backend.Kind) {
	t.Helper()
	if !backend.IsKind(err, k) {
		t.Fatalf("%s: got error %v, want kind %v", what, err, k)
	}
}

func itemNum(t *testing.T, item []byte) int {
	t.Helper()
	it, err := attr.DecodeItem(item)
	if err != nil {
		t.Fatalf("decode %s: %v", item, err)
	}
	n, err := strconv.Atoi(it["v"].Str)
	if err != nil {
		t.Fatalf("item %s: %v", item, err)
	}
	return n
}

func numItem(n int) []byte {
	return attr.EncodeItem(attr.Item{"v": attr.MustNum(strconv.Itoa(n))})
}

// Requested reports whether EXTENDDB_TEST_BACKENDS names a backend: its
// tests then run, and a missing or unreachable server fails them.
func Requested(name string) bool {
	for _, b := range strings.Split(os.Getenv("EXTENDDB_TEST_BACKENDS"), ",") {
		if strings.TrimSpace(b) == name {
			return true
		}
	}
	return false
}
