package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
	"github.com/extenddb/extenddb/internal/backend/sqlutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fmt.Println("storage backends exercised: sqlite (file database and memory mode)")
	os.Exit(code)
}

func openT(t testing.TB, opts Options) *Backend {
	t.Helper()
	b, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// sharedOpen returns one backend for all the suite's tests of a run, so
// their writes meet in the writer's batches.
func sharedOpen(t *testing.T, opts Options) func(t *testing.T) backend.Backend {
	b := openT(t, opts)
	return func(*testing.T) backend.Backend { return b }
}

func TestConformanceFile(t *testing.T) {
	backendtest.Run(t, sharedOpen(t, Options{Path: filepath.Join(t.TempDir(), "db.sqlite")}))
}

func TestConformanceMemory(t *testing.T) {
	backendtest.Run(t, sharedOpen(t, Options{Memory: true}))
}

// TestConformanceSmallBatches runs the suite with a batch bound of 2.
func TestConformanceSmallBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	backendtest.Run(t, sharedOpen(t, Options{Memory: true, MaxBatch: 2, Readers: 2}))
}

func TestMemoryRemovedOnClose(t *testing.T) {
	b, err := Open(context.Background(), Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := b.tmpDir
	if _, err := os.Stat(filepath.Join(dir, "extenddb.db")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("memory database directory still exists: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = b.WriteItem(context.Background(), backend.WriteItemParams{Fn: func([]byte) (backend.Change, error) { return backend.Change{}, nil }})
	if !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("write after Close: %v", err)
	}
}

// TestReopenKeepsData: a file database survives Close/Open; migrations
// are not applied twice; RequireMigrated accepts a migrated database.
func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	b, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("v")}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openT(t, Options{Path: path, RequireMigrated: true})
	g, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("k")})
	if err != nil || string(g.Item) != "v" {
		t.Fatalf("after reopen: %q %v", g, err)
	}
}

func TestRequireMigratedRefusesFreshDatabase(t *testing.T) {
	_, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "db.sqlite"), RequireMigrated: true})
	if !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("got %v", err)
	}
}

// TestCloseDrainsWriter: writes queued when Close starts are all answered
// and committed.
func TestCloseDrainsWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	b, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	var wg, started sync.WaitGroup
	var mu sync.Mutex
	ok := map[string]bool{}
	for i := range 200 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprint(i)
			started.Done()
			_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
				return backend.Change{Op: backend.Put, Item: []byte(k)}, nil
			}})
			if err == nil {
				mu.Lock()
				ok[k] = true
				mu.Unlock()
			} else if !backend.IsKind(err, backend.KindUnavailable) {
				t.Error(err)
			}
		}()
	}
	started.Wait()
	b.Close()
	wg.Wait()
	b = openT(t, Options{Path: path})
	res, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(ok) {
		t.Fatalf("%d items stored, %d writes acknowledged", len(res.Rows), len(ok))
	}
	t.Logf("%d of 200 writes were queued before Close", len(ok))
}

// TestKeysAreBlobs: keys are stored as BLOBs, the empty sort key too, and
// the query plans are range scans of the primary keys (no sort step).
func TestKeysAreBlobs(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{Memory: true})
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	for _, sk := range [][]byte{nil, []byte("1"), {0xFF}} {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("123"), SK: sk, Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("{}"),
				PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("9"), SK: sk}, Item: []byte("{}")}}}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := b.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM items WHERE typeof(pk) != 'blob' OR typeof(sk) != 'blob'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d non-blob item keys (%v)", n, err)
	}
	if err := b.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM idx WHERE typeof(ipk) != 'blob' OR typeof(isk) != 'blob' OR typeof(pk) != 'blob' OR typeof(sk) != 'blob'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d non-blob index keys (%v)", n, err)
	}
	// A TEXT key is refused by the schema.
	if _, err := b.w.conn.ExecContext(ctx, `INSERT INTO items(t, h, pk, sk, item) VALUES (1, 1, 'text', x'', x'')`); err == nil {
		t.Fatal("schema accepted a TEXT key")
	}
	// memcmp order of blobs.
	var less int
	if err := b.rdb.QueryRowContext(ctx, `SELECT x'7F' < x'80' AND x'00' < x'0000' AND x'FF' > x'FE00' AND x'' < x'00'`).Scan(&less); err != nil || less != 1 {
		t.Fatalf("blob comparison is not memcmp: %d %v", less, err)
	}
	for _, sh := range sqlutil.SQLShapes() {
		q := sqliteSelect(sh)
		nargs := strings.Count(q, "?")
		args := make([]any, nargs)
		for i := range args {
			args[i] = []byte{1}
		}
		rows, err := b.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			rows.Scan(&id, &parent, &notused, &detail)
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if strings.Contains(p, "TEMP B-TREE") || !(strings.Contains(p, "USING INDEX items_key") || strings.Contains(p, "USING INDEX idx_key")) || strings.HasPrefix(p, "SCAN") {
			t.Errorf("%s\n  plan: %s", q, p)
		}
	}
}

// explainPlan returns the EXPLAIN QUERY PLAN details of a statement, "; "
// separated.
func explainPlan(t *testing.T, b *Backend, q string, args []any) string {
	t.Helper()
	rows, err := b.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

// TestPagesSeekFromCursor: a Scan or index Query page that resumes from a
// cursor starts its range read at the cursor (the row value is a
// constraint of the primary key search), whatever the segment or sort
// key bound beside it, so a page costs the same at any position.
func TestPagesSeekFromCursor(t *testing.T) {
	b := openT(t, Options{Memory: true})
	ref := backend.TableRef{Account: "a", Name: "t", ID: 1}
	k := []byte("k")
	at := &backend.Cursor{PK: k, SK: []byte("m"), BasePK: k, BaseSK: k}
	// A cursor whose partition hash lies in segment 2 of 4.
	lo2, _ := backend.SegmentRange(2, 4)
	var in2 []byte
	for i := 0; ; i++ {
		in2 = fmt.Appendf(nil, "k%d", i)
		if h := backend.KeyHash(in2); h >= lo2 && h < lo2+1<<30 {
			break
		}
	}
	at2 := &backend.Cursor{PK: in2, SK: k, BasePK: k, BaseSK: k}
	const tableSeek = "SEARCH items USING INDEX items_key (t=? AND (h,pk,sk)>(?,?,?)"
	const indexSeek = "SEARCH idx USING INDEX idx_key (t=? AND ix=? AND (h,ipk,isk,pk,sk)>(?,?,?,?,?)"
	check := func(what string, plan sqlutil.SQLPlan, want string) {
		t.Helper()
		args := append(append([]any{ref.ID}, plan.Args...), int64(101))
		q := sqliteSelect(plan.Shape)
		if p := explainPlan(t, b, q, args); !strings.HasPrefix(p, want) {
			t.Errorf("%s: plan %q, want it to start with %q (statement %s)", what, p, want, q)
		}
	}
	for _, tc := range []struct {
		what string
		p    backend.ScanParams
		want string
	}{
		{"table scan", backend.ScanParams{Table: ref, After: at}, tableSeek},
		{"table scan, segment", backend.ScanParams{Table: ref, After: at2, Segment: 2, TotalSegments: 4}, tableSeek},
		{"index scan", backend.ScanParams{Table: ref, Index: "g", After: at}, indexSeek},
		{"index scan, segment", backend.ScanParams{Table: ref, Index: "g", After: at2, Segment: 2, TotalSegments: 4}, indexSeek},
	} {
		check(tc.what, sqlutil.PlanScan(tc.p), tc.want)
	}
	bd := func(key string, incl bool) *backend.Bound { return &backend.Bound{Key: []byte(key), Inclusive: incl} }
	const ixq = "SEARCH idx USING INDEX idx_key (t=? AND ix=? AND h=? AND ipk=? AND "
	for _, tc := range []struct {
		what         string
		lower, upper *backend.Bound
		forward      bool
		want         string
	}{
		{"index query", nil, nil, true, ixq + "(isk,pk,sk)>(?,?,?))"},
		{"index query, lower bound", bd("a", true), nil, true, ixq + "(isk,pk,sk)>(?,?,?))"},
		{"index query, both bounds", bd("a", false), bd("z", true), true, ixq + "(isk,pk,sk)>(?,?,?) AND isk<?)"},
		{"index query backward", nil, nil, false, ixq + "(isk,pk,sk)<(?,?,?))"},
		{"index query backward, upper bound", nil, bd("z", false), false, ixq + "(isk,pk,sk)<(?,?,?))"},
		{"index query backward, both bounds", bd("a", true), bd("z", true), false, ixq + "isk>? AND (isk,pk,sk)<(?,?,?))"},
	} {
		check(tc.what, sqlutil.PlanQuery(backend.QueryParams{Table: ref, Index: "g", PK: k, Lower: tc.lower, Upper: tc.upper, Forward: tc.forward, After: at, Limit: 100}), tc.want)
	}
}

// TestPragmas: the connection settings the design relies on.
func TestPragmas(t *testing.T) {
	be := openT(t, Options{Path: filepath.Join(t.TempDir(), "p.db")})
	ctx := context.Background()
	get := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, p string) string {
		var v string
		if err := q.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
			t.Fatal(p, err)
		}
		return v
	}
	for p, want := range map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "0", "busy_timeout": "5000", "wal_autocheckpoint": "0"} {
		if got := get(be.w.conn, p); got != want {
			t.Errorf("writer %s = %s, want %s", p, got, want)
		}
	}
	for p, want := range map[string]string{"journal_mode": "wal", "query_only": "1", "foreign_keys": "0", "busy_timeout": "5000"} {
		if got := get(be.rdb, p); got != want {
			t.Errorf("reader %s = %s, want %s", p, got, want)
		}
	}
}

func TestSecondProcessRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	openT(t, Options{Path: path})
	if _, err := Open(context.Background(), Options{Path: path}); err == nil || !strings.Contains(err.Error(), "in use by another extenddb process") {
		t.Fatalf("second open of one database: %v", err)
	}
}

// TestSnapshotScenarioCatchesLiveReads: the snapshot section fails against
// a deliberately broken snapshot that reads live data, so its passing on
// this backend means something.
func TestSnapshotScenarioCatchesLiveReads(t *testing.T) {
	b := openT(t, Options{Memory: true})
	key := func(i int) ([]byte, []byte) { return []byte(fmt.Sprintf("p%d", i%7)), []byte(fmt.Sprintf("s%04d", i)) }
	err := backendtest.SnapshotScenario(t.Context(), b, backendtest.LiveReadSnapshot(b), "acct", "live-reads", key, 70, 10)
	if err == nil {
		t.Fatal("the snapshot scenario passed against a snapshot that reads live data")
	}
	t.Logf("caught, as it must be: %v", err)
	if err := backendtest.SnapshotScenario(t.Context(), b, b, "acct", "real", key, 70, 10); err != nil {
		t.Fatalf("the real snapshot fails the same scenario: %v", err)
	}
}

// TestSnapshotPlan: a snapshot reads the items_key index in Scan order,
// the order a restore appends keys to the index in (ADR 0034), with no
// sort of the table.
func TestSnapshotPlan(t *testing.T) {
	b := openT(t, Options{Memory: true})
	rows, err := b.rdb.Query("EXPLAIN QUERY PLAN "+sqlSnapshotItems, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if strings.Join(plan, "; ") != "SEARCH items USING INDEX items_key (t=?)" {
		t.Fatalf("snapshot plan: %q", plan)
	}
}

// sqliteSelect is the statement the backend prepares for a shape.
func sqliteSelect(sh sqlutil.SQLShape) string {
	return sh.Select("", "?", func() string { return "?" })
}

// TestCountsRestart: the figures are exact after a close and reopen,
// and in a copy of the files taken while the backend is open (what a
// crash leaves: the database and its WAL, no Close).
func TestCountsRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db.sqlite")
	open := func(path string) backend.Backend {
		b, err := Open(context.Background(), Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b := open(path)
	backendtest.CountsAfter(t, b, func() { b.Close() }, func() backend.Backend { return open(path) })

	b = open(filepath.Join(dir, "live.sqlite"))
	crash := filepath.Join(dir, "crash.sqlite")
	backendtest.CountsAfter(t, b, func() {
		for _, suffix := range []string{"", "-wal"} {
			data, err := os.ReadFile(filepath.Join(dir, "live.sqlite"+suffix))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(crash+suffix, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}, func() backend.Backend { return open(crash) })
}
