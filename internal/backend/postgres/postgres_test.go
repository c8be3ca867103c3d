package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
	"github.com/extenddb/extenddb/internal/backend/sqlutil"
	"github.com/extenddb/extenddb/migrations"
)

// The tests need a PostgreSQL server. They run when EXTENDDB_TEST_BACKENDS
// names postgres, against EXTENDDB_TEST_POSTGRES_DSN (scripts/postgres.sh
// start prints one); then a missing or unreachable server FAILS the run.
// Each run works in a fresh database (random name, dropped at the end);
// tests that need a database of their own create more.

var (
	requested bool
	adminDSN  string // the DSN given (a maintenance database)
	testDSN   string // the run's database
	setupErr  error
)

func TestMain(m *testing.M) {
	requested = backendtest.Requested("postgres")
	if !requested {
		fmt.Println("storage backends: postgres not requested (the default; make test-all or EXTENDDB_TEST_BACKENDS=sqlite,postgres runs it)")
		os.Exit(m.Run())
	}
	adminDSN = os.Getenv("EXTENDDB_TEST_POSTGRES_DSN")
	var dropRun func()
	if adminDSN == "" {
		setupErr = errors.New("EXTENDDB_TEST_BACKENDS names postgres but EXTENDDB_TEST_POSTGRES_DSN is empty (export EXTENDDB_TEST_POSTGRES_DSN=$(scripts/postgres.sh start))")
	} else {
		testDSN, dropRun, setupErr = createDatabase(adminDSN)
	}
	code := m.Run()
	if dropRun != nil {
		dropRun()
	}
	if setupErr != nil {
		fmt.Printf("storage backends exercised: none — postgres was requested and FAILED: %v\n", setupErr)
		if code == 0 {
			code = 1
		}
	} else {
		fmt.Printf("storage backends exercised: postgres (%s)\n", redact(adminDSN))
	}
	os.Exit(code)
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		u.User = nil
		return u.Host + u.Path
	}
	return "DSN from EXTENDDB_TEST_POSTGRES_DSN"
}

// withDatabase returns dsn naming database db.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	return dsn + " dbname=" + db, nil
}

// createDatabase creates a database with a random name and returns its
// DSN and a function that drops it.
func createDatabase(admin string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("postgres unreachable at %s: %w", redact(admin), err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("extenddb_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'"); err != nil {
		// The locale may not exist; the schema must not depend on it anyway.
		if _, err2 := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 ENCODING 'UTF8'"); err2 != nil {
			return "", nil, fmt.Errorf("create database: %w", err2)
		}
	}
	dsn, err := withDatabase(admin, name)
	if err != nil {
		return "", nil, err
	}
	return dsn, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drop database %s: %v\n", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "drop database %s: %v\n", name, err)
		}
	}, nil
}

// need skips when postgres was not requested and fails when it was but
// cannot be used.
func need(t testing.TB) {
	t.Helper()
	if !requested {
		t.Skip("postgres not requested (EXTENDDB_TEST_BACKENDS)")
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

// ownDatabase creates a database for one test, dropped at its end.
func ownDatabase(t testing.TB) string {
	t.Helper()
	need(t)
	dsn, drop, err := createDatabase(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return dsn
}

func openT(t testing.TB, opts Options) *Backend {
	t.Helper()
	b, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestServerReachable(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	if err := b.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

// TestConformanceSmallPool runs the suite on a pool of 2 connections, so
// parallel tests queue for connections.
func TestConformanceSmallPool(t *testing.T) {
	need(t)
	if testing.Short() {
		t.Skip("short")
	}
	b := openT(t, Options{DSN: testDSN, MaxConns: 2})
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

func createTable(t testing.TB, b *Backend, name string) backend.TableRef {
	t.Helper()
	acct := fmt.Sprintf("acct-%08x", rand.Uint32())
	cr, err := b.CreateTable(context.Background(), backend.CreateTableParams{Account: acct, Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	return cr.Table.Ref()
}

var errExists = errors.New("item exists")

// TestTwoPoolsConditionalRace: two Backends (two pools, as two servers
// would have) race 32 conditional puts on one absent key, several rounds;
// exactly one wins each round.
func TestTwoPoolsConditionalRace(t *testing.T) {
	need(t)
	b1 := openT(t, Options{DSN: testDSN, MaxConns: 16})
	b2 := openT(t, Options{DSN: testDSN, MaxConns: 16})
	backendtest.TwoBackendsConditionalRace(t, b1, b2, 10)
}

// TestNoWriteSkew: two transactions each check that the other's key is
// absent and write their own; they must not both commit.
func TestNoWriteSkew(t *testing.T) {
	need(t)
	b1 := openT(t, Options{DSN: testDSN})
	b2 := openT(t, Options{DSN: testDSN})
	ref := createTable(t, b1, "skew")
	ctx := t.Context()
	absent := func(old []byte) (backend.Change, error) {
		if old != nil {
			return backend.Change{}, errExists
		}
		return backend.Change{Op: backend.Keep}, nil
	}
	put := func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte("x")}, nil }
	for round := range 20 {
		x, y := []byte(fmt.Sprintf("x%d", round)), []byte(fmt.Sprintf("y%d", round))
		var wg sync.WaitGroup
		var ok atomic.Int32
		for i, be := range []*Backend{b1, b2} {
			mine, other := x, y
			if i == 1 {
				mine, other = y, x
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := be.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
					{Table: ref, PK: other, Fn: absent}, {Table: ref, PK: mine, Fn: put}}})
				if err == nil {
					ok.Add(1)
				} else if !backend.IsKind(err, backend.KindTransactionCanceled) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 1 {
			t.Fatalf("round %d: %d of 2 transactions committed, want 1", round, ok.Load())
		}
	}
}

// TestKilledConnections: while 8 writers put distinct keys, an admin
// connection terminates the backend's server processes several times.
// Writes answer success or KindUnavailable (nothing else), and every
// acknowledged write is present afterwards.
func TestKilledConnections(t *testing.T) {
	dsn := ownDatabase(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if i := strings.IndexAny(db, "?"); i >= 0 {
		db = db[:i]
	}
	if strings.Contains(dsn, "dbname=") {
		db = dsn[strings.LastIndex(dsn, "dbname=")+len("dbname="):]
	}
	b := openT(t, Options{DSN: dsn, MaxConns: 8})
	ref := createTable(t, b, "kill")
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	var mu sync.Mutex
	acked := map[string]bool{}
	var unavailable, okCount atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("w%d-%05d", w, i)
				var err error
				if i%4 == 3 {
					_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
						{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte(k)}, nil }},
					}})
				} else {
					_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
						return backend.Change{Op: backend.Put, Item: []byte(k)}, nil
					}})
				}
				switch {
				case err == nil:
					okCount.Add(1)
					mu.Lock()
					acked[k] = true
					mu.Unlock()
				case backend.IsKind(err, backend.KindUnavailable):
					unavailable.Add(1)
				default:
					t.Errorf("write %s: %v (kind not Unavailable)", k, err)
					return
				}
			}
		}()
	}
	kills := 0
	for range 6 {
		time.Sleep(150 * time.Millisecond)
		var n int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		kills += n
	}
	time.Sleep(150 * time.Millisecond)
	close(stop)
	wg.Wait()
	if kills == 0 {
		t.Fatal("no server process was terminated")
	}
	// Reads through the same pool recover too.
	var rows []backend.Row
	var after *backend.Cursor
	for {
		res, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 1000, After: after})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, res.Rows...)
		if !res.More {
			break
		}
		last := res.Rows[len(res.Rows)-1]
		after = &backend.Cursor{PK: last.PK, SK: last.SK}
	}
	present := map[string]bool{}
	for _, r := range rows {
		present[string(r.PK)] = true
		if string(r.Item) != string(r.PK) {
			t.Fatalf("item %q under key %q", r.Item, r.PK)
		}
	}
	for k := range acked {
		if !present[k] {
			t.Errorf("acknowledged write %s is lost", k)
		}
	}
	t.Logf("%d processes terminated; %d writes acknowledged, %d KindUnavailable, %d transparent retries, %d rows present",
		kills, okCount.Load(), unavailable.Load(), b.Retries(), len(rows))
	if okCount.Load() == 0 {
		t.Fatal("no write succeeded")
	}
}

// TestPoolExhaustedIsUnavailable: a pool whose only connection is held
// answers KindUnavailable after AcquireTimeout.
func TestPoolExhaustedIsUnavailable(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN, MaxConns: 1, AcquireTimeout: 200 * time.Millisecond})
	c, err := b.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	_, err = b.GetTable(t.Context(), backend.GetTableParams{Account: "a", Name: "b"})
	if !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("got %v, want KindUnavailable", err)
	}
}

// TestUnreachableIsUnavailable: a server that does not answer is
// KindUnavailable, not internal.
func TestUnreachableIsUnavailable(t *testing.T) {
	need(t)
	_, err := Open(t.Context(), Options{DSN: "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"})
	if !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("got %v, want KindUnavailable", err)
	}
}

func TestErrorMapping(t *testing.T) {
	// Pure: no server needed.
	cases := []struct {
		code string
		kind backend.Kind
	}{
		{"57P01", backend.KindUnavailable}, {"53300", backend.KindUnavailable}, {"08006", backend.KindUnavailable},
		{"25006", backend.KindUnavailable}, {"40P01", backend.KindTransactionConflict}, {"40001", backend.KindTransactionConflict},
		{"23505", backend.KindInternal}, {"42P01", backend.KindInternal},
	}
	for _, c := range cases {
		err := mapErr(fmt.Errorf("wrapped: %w", &pgconn.PgError{Severity: "FATAL", Code: c.code}), "x")
		if !backend.IsKind(err, c.kind) {
			t.Errorf("%s: %v, want %v", c.code, err, c.kind)
		}
	}
	if !backend.IsKind(mapErr(context.DeadlineExceeded, "x"), backend.KindUnavailable) {
		t.Error("deadline")
	}
}

// TestSchemaRefused: RequireMigrated refuses a fresh database; a database
// with a newer migration or an edited one is refused by Open.
func TestSchemaRefused(t *testing.T) {
	ctx := t.Context()
	dsn := ownDatabase(t)
	_, err := Open(ctx, Options{DSN: dsn, RequireMigrated: true})
	if !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("RequireMigrated on a fresh database: %v", err)
	}
	b, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, err = Open(ctx, Options{DSN: dsn, RequireMigrated: true})
	if err != nil {
		t.Fatalf("RequireMigrated on a migrated database: %v", err)
	}
	b.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	shipped, _ := migrations.Load(migrations.Postgres)

	// Newer: a version this build does not know.
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations(version, name, sha256, applied_at) VALUES ($1, 'future', 'x', 0)`, len(shipped)+1); err != nil {
		t.Fatal(err)
	}
	for _, req := range []bool{false, true} {
		_, err = Open(ctx, Options{DSN: dsn, RequireMigrated: req})
		if !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("newer schema (RequireMigrated=%v): %v", req, err)
		}
	}
	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version = $1`, len(shipped)+1); err != nil {
		t.Fatal(err)
	}
	// Edited: the recorded checksum differs from the shipped file.
	if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET sha256 = 'edited' WHERE version = 1`); err != nil {
		t.Fatal(err)
	}
	for _, req := range []bool{false, true} {
		_, err = Open(ctx, Options{DSN: dsn, RequireMigrated: req})
		if !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "differs") {
			t.Fatalf("edited migration (RequireMigrated=%v): %v", req, err)
		}
	}
}

// TestConcurrentOpenMigrates: several servers opening a fresh database at
// once all succeed and the migrations are applied once.
func TestConcurrentOpenMigrates(t *testing.T) {
	dsn := ownDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := Open(t.Context(), Options{DSN: dsn, MaxConns: 2})
			errs[i] = err
			if err == nil {
				b.Close()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeysAreBytea: keys compare bytewise in the database (not by a
// collation), the hash is stored unsigned, and every Query/Scan variant is
// an ordered index scan without a sort step.
func TestKeysAreBytea(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	ctx := t.Context()
	var ok bool
	if err := b.pool.QueryRow(ctx, `SELECT '\x7f'::bytea < '\x80'::bytea AND '\x00'::bytea < '\x0000'::bytea AND '\xff'::bytea > '\xfe00'::bytea AND ''::bytea < '\x00'::bytea`).Scan(&ok); err != nil || !ok {
		t.Fatalf("bytea comparison is not bytewise: %v %v", ok, err)
	}
	ref := createTable(t, b, "keys")
	hi := []byte{0xFF, 0xFF, 0xFF} // find a key with KeyHash >= 2^31
	for i := 0; backend.KeyHash(hi) < 1<<31; i++ {
		hi = []byte(fmt.Sprint("k", i))
	}
	lo := []byte("k")
	for i := 0; backend.KeyHash(lo) >= 1<<31; i++ {
		lo = []byte(fmt.Sprint("l", i))
	}
	for _, pk := range [][]byte{hi, lo} {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: pk}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 10})
	if err != nil || len(res.Rows) != 2 || string(res.Rows[0].PK) != string(lo) {
		t.Fatalf("scan order by unsigned hash: %v %v", res, err)
	}
	var minH int64
	if err := b.pool.QueryRow(ctx, `SELECT min(h) FROM items WHERE t = $1`, ref.ID).Scan(&minH); err != nil || minH < 0 {
		t.Fatalf("min h %d %v", minH, err)
	}
	// Plans: the planner's choice on a tiny table depends on statistics
	// (it may prefer a bitmap scan plus a sort), so steer it the way a big
	// table would: sorts, bitmap and sequential scans are priced out. A
	// disabled step still shows when nothing else can answer, so a Sort in
	// the plan means the primary key cannot give the order.
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, set := range []string{"SET enable_sort = off", "SET enable_bitmapscan = off", "SET enable_seqscan = off"} {
		if _, err := conn.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	defer conn.Exec(context.Background(), "RESET ALL")
	for _, sh := range sqlutil.SQLShapes() {
		q := variant(sh)
		nargs := strings.Count(q, "$")
		args := make([]any, nargs)
		args[0] = ref.ID
		for i := 1; i < nargs; i++ {
			args[i] = []byte{1}
		}
		args[nargs-1] = int64(26)
		if sh.Index() {
			args[1] = "g"
		}
		plan := explain(t, conn.Conn(), q, sh.Kind, args)
		if strings.Contains(plan, "Sort") || !strings.Contains(plan, "Index") {
			t.Errorf("%s\n  plan: %s", q, plan)
		}
	}
}

// explain returns the generic plan of a Query/Scan statement.
func explain(t *testing.T, c *pgx.Conn, q string, kind sqlutil.SQLKind, args []any) string {
	t.Helper()
	// Hash arguments are bigint.
	switch kind {
	case sqlutil.SQLTableQuery:
		args[1] = int64(1)
	case sqlutil.SQLIndexQuery:
		args[2] = int64(1)
	case sqlutil.SQLTableScan:
		args[1], args[2] = int64(0), int64(1<<32-1)
	case sqlutil.SQLIndexScan:
		args[2], args[3] = int64(0), int64(1<<32-1)
	}
	rows, err := c.Query(t.Context(), "EXPLAIN "+q, fixCursorHash(q, args)...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "; ")
}

// fixCursorHash makes the cursor's hash argument of a Scan a bigint.
func fixCursorHash(q string, args []any) []any {
	i := strings.Index(q, ") > ($")
	if i < 0 || !strings.Contains(q, "(h, ") {
		return args
	}
	var n int
	fmt.Sscanf(q[i+len(") > ($"):], "%d", &n)
	args[n-1] = int64(5)
	return args
}

// TestSnapshotPlan: a snapshot's cursor reads the primary key in Scan
// order, the order a restore appends keys in (ADR 0034), without a sort.
func TestSnapshotPlan(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	ctx := t.Context()
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, sqlSnapshotPlan); err != nil {
		t.Fatal(err)
	}
	q := strings.TrimPrefix(fmt.Sprintf(sqlSnapshotDeclare, 1), "DECLARE extenddb_snapshot NO SCROLL CURSOR FOR ")
	rows, err := tx.Query(ctx, "EXPLAIN "+q)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	p := strings.Join(lines, "\n")
	if !strings.HasPrefix(p, "Index Scan using items_pkey on items") || strings.Contains(p, "Sort") {
		t.Fatalf("snapshot plan:\n%s", p)
	}
}

// TestSnapshotMarker: the snapshot's marker is the exported snapshot id,
// which another session could import (SET TRANSACTION SNAPSHOT) while the
// snapshot is open.
func TestSnapshotMarker(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	ref := createTable(t, b, "snapmarker")
	s, err := b.OpenTableSnapshot(t.Context(), backend.OpenSnapshotParams{Account: ref.Account, Name: ref.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Items.Close()
	if s.Descriptor.Kind != SnapshotKind || !regexp.MustCompile(`^[0-9A-F]+-[0-9A-F]+-[0-9]+$`).MatchString(s.Descriptor.Marker) {
		t.Fatalf("descriptor %+v", s.Descriptor)
	}
	c, err := b.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	tx, err := c.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), "SET TRANSACTION SNAPSHOT '"+s.Descriptor.Marker+"'"); err != nil {
		t.Fatalf("importing the marker: %v", err)
	}
}

// TestCountsHandles: two backends on one database write one table at
// once (their deltas go to one log, folded by both); a third opened after
// both closed reads exact figures.
func TestCountsHandles(t *testing.T) {
	need(t)
	backendtest.CountsHandles(t, func(t *testing.T) backend.Backend { return openT(t, Options{DSN: testDSN}) })
}

// TestCountsRestart: the figures survive a close and reopen, deltas not
// yet folded included.
func TestCountsRestart(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	backendtest.CountsAfter(t, b, func() { b.Close() }, func() backend.Backend { return openT(t, Options{DSN: testDSN}) })
}
