package cassandra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
	"github.com/extenddb/extenddb/internal/backend/txledger"
	"github.com/extenddb/extenddb/internal/backend/txledger/ledgertest"
)

// The tests need a Cassandra node. They run when EXTENDDB_TEST_BACKENDS
// names cassandra, against EXTENDDB_TEST_CASSANDRA_HOSTS (comma-separated
// contact points; scripts/cassandra.sh start prints one); then a missing
// or unreachable node FAILS the run. Each run works in a fresh keyspace
// (random name, dropped at the end).

var (
	requested bool
	hosts     []string
	keyspace  string
	setupErr  error
)

func TestMain(m *testing.M) {
	requested = backendtest.Requested("cassandra")
	if !requested {
		fmt.Println("storage backends: cassandra not requested (EXTENDDB_TEST_BACKENDS=cassandra with EXTENDDB_TEST_CASSANDRA_HOSTS=$(scripts/cassandra.sh start) runs it)")
		os.Exit(m.Run())
	}
	if h := os.Getenv("EXTENDDB_TEST_CASSANDRA_HOSTS"); h == "" {
		setupErr = errors.New("EXTENDDB_TEST_BACKENDS names cassandra but EXTENDDB_TEST_CASSANDRA_HOSTS is empty (export EXTENDDB_TEST_CASSANDRA_HOSTS=$(scripts/cassandra.sh start))")
	} else {
		hosts = strings.Split(h, ",")
		keyspace = fmt.Sprintf("extenddb_test_%d_%08x", time.Now().Unix(), rand.Uint32())
		setupErr = reachable()
	}
	code := m.Run()
	if setupErr == nil {
		dropKeyspace(keyspace)
		fmt.Printf("storage backends exercised: cassandra (%s, keyspace %s)\n", strings.Join(hosts, ","), keyspace)
	} else {
		fmt.Printf("storage backends exercised: none — cassandra was requested and FAILED: %v\n", setupErr)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func reachable() error {
	c := gocql.NewCluster(hosts...)
	c.ConnectTimeout = 5 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		return fmt.Errorf("cassandra unreachable at %s: %w", strings.Join(hosts, ","), err)
	}
	s.Close()
	return nil
}

func dropKeyspace(ks string) {
	c := gocql.NewCluster(hosts...)
	c.Timeout = 60 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		fmt.Fprintf(os.Stderr, "drop keyspace %s: %v\n", ks, err)
		return
	}
	defer s.Close()
	if err := s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec(); err != nil {
		fmt.Fprintf(os.Stderr, "drop keyspace %s: %v\n", ks, err)
	}
}

func need(t testing.TB) {
	t.Helper()
	if !requested {
		t.Skip("cassandra not requested (EXTENDDB_TEST_BACKENDS)")
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func openT(t testing.TB, ks string) *Backend {
	t.Helper()
	need(t)
	// No background sweep: tests drain explicitly (TestOutboxSweep runs one).
	b, err := Open(context.Background(), Options{Hosts: hosts, Keyspace: ks, OutboxSweep: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestServerReachable(t *testing.T) {
	b := openT(t, keyspace)
	if err := b.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	b := openT(t, keyspace)
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

// TestSchemaRefused: RequireMigrated refuses a missing keyspace and a
// fresh one; an edited or newer migration record is refused.
func TestSchemaRefused(t *testing.T) {
	need(t)
	ctx := t.Context()
	ks := fmt.Sprintf("extenddb_schema_%08x", rand.Uint32())
	defer dropKeyspace(ks)
	_, err := Open(ctx, Options{Hosts: hosts, Keyspace: ks, RequireMigrated: true})
	if !backend.IsKind(err, backend.KindSchema) {
		t.Fatalf("missing keyspace: %v", err)
	}
	b := openT(t, ks)
	st, err := b.status(ctx)
	if err != nil || len(st.Pending) != 0 || len(st.Applied) == 0 {
		t.Fatalf("status after migrate: %+v %v", st, err)
	}
	if _, err := Open(ctx, Options{Hosts: hosts, Keyspace: ks, RequireMigrated: true}); err != nil {
		t.Fatalf("migrated keyspace refused: %v", err)
	}
	if err := b.query(ctx, `UPDATE schema_migrations SET sha256 = 'edited' WHERE version = 1`).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Hosts: hosts, Keyspace: ks}); !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("edited migration: %v", err)
	}
	if err := b.query(ctx, `INSERT INTO schema_migrations (version, name, sha256) VALUES (99, 'future', 'x')`).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Hosts: hosts, Keyspace: ks}); !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer migration: %v", err)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	need(t)
	_, err := Open(t.Context(), Options{Hosts: []string{"127.0.0.1:1"}, ConnectTimeout: time.Second})
	if !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("got %v, want KindUnavailable", err)
	}
}

func TestSplitCQL(t *testing.T) {
	got := splitCQL("-- c\nCREATE A (x int,\n y int);\n\nCREATE B;\n")
	if len(got) != 2 || !strings.HasPrefix(got[0], "CREATE A") || got[1] != "CREATE B" {
		t.Fatalf("%q", got)
	}
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("%v %v", ms, err)
	}
}

// TestDriverMigrateStatusOpen: the driver's status on a missing keyspace
// lists every migration pending; migrate applies them; Open (which
// requires a migrated keyspace) then works.
func TestDriverMigrateStatusOpen(t *testing.T) {
	need(t)
	ctx := t.Context()
	ks := fmt.Sprintf("extenddb_driver_%08x", rand.Uint32())
	defer dropKeyspace(ks)
	d := Driver()
	cfg := d.NewConfig().(*Config)
	cfg.Hosts, cfg.Keyspace = strings.Join(hosts, ","), ks
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	env := backend.DriverEnv{Config: cfg}
	if _, err := d.Open(ctx, env); !backend.IsKind(err, backend.KindSchema) {
		t.Fatalf("open before migrate: %v", err)
	}
	st, err := d.Status(ctx, env)
	if err != nil || st.Missing == "" || len(st.Pending) == 0 {
		t.Fatalf("status before migrate: %+v %v", st, err)
	}
	names, err := d.Migrate(ctx, env)
	if err != nil || len(names) != len(st.Pending) {
		t.Fatalf("migrate: %v %v", names, err)
	}
	st, err = d.Status(ctx, env)
	if err != nil || len(st.Pending) != 0 || len(st.Applied) != len(names) {
		t.Fatalf("status after migrate: %+v %v", st, err)
	}
	b, err := d.Open(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// TestTwoSessionsConditionalRace: two Backends (two sessions, as two
// servers would have) race 32 conditional puts on one absent key, several
// rounds; exactly one wins each round and its index entry is the only one.
func TestTwoSessionsConditionalRace(t *testing.T) {
	b1 := openT(t, keyspace)
	b2 := openT(t, keyspace)
	backendtest.TwoBackendsConditionalRace(t, b1, b2, 5)
}

// TestWriteLatency logs the latency of sequential puts and gets (one
// client; a figure for docs, not a benchmark).
func TestWriteLatency(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "lat", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const n = 200
	var lat []time.Duration
	for i := range n {
		pk := []byte(fmt.Sprintf("k%04d", i%50))
		t0 := time.Now()
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: pk}, nil
		}}); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	t0 := time.Now()
	for i := range n {
		if _, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(fmt.Sprintf("k%04d", i%50))}); err != nil {
			t.Fatal(err)
		}
	}
	get := time.Since(t0) / n
	slices.Sort(lat)
	t.Logf("WriteItem (put, %d sequential, 50 keys): p50 %v p99 %v; GetItem mean %v", n, lat[n/2], lat[n*99/100], get)
}

func TestOutboxEncoding(t *testing.T) {
	ch := backend.Change{
		DeleteIndex: []backend.IndexKey{{Index: "g", PK: []byte("a"), SK: nil}, {Index: "", PK: []byte{}, SK: []byte{0, 0xFF}}},
		PutIndex:    []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "lsi", PK: []byte("p"), SK: []byte("s")}, Item: []byte(`{"x":1}`)}},
	}
	got, err := decodeOutbox(encodeOutbox(ch))
	if err != nil || len(got.DeleteIndex) != 2 || len(got.PutIndex) != 1 || got.DeleteIndex[1].SK[1] != 0xFF ||
		string(got.PutIndex[0].Item) != `{"x":1}` || got.PutIndex[0].Index != "lsi" {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range [][]byte{{5}, {1, 9, 'a'}, append(encodeOutbox(ch), 0)} {
		if _, err := decodeOutbox(bad); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}

// TestOutboxRecovery: a writer that dies after its conditional batch
// (item + outbox row) but before applying the index change leaves the
// index behind; the sweep (drainAll) applies it, in version order per
// item whatever the order of application, and DropIndex drains before it
// deletes, so a late application cannot bring a dropped entry back.
func TestOutboxRecovery(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "outbox", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	put := func(pk, gsk string) backend.Change {
		ch := backend.Change{Op: backend.Put, Item: []byte(pk + gsk),
			PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("gp"), SK: []byte(gsk)}, Item: []byte(pk + gsk)}}}
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func(old []byte) (backend.Change, error) {
			if old != nil {
				ch.DeleteIndex = []backend.IndexKey{{Index: "g", PK: []byte("gp"), SK: []byte(old[len(pk):])}}
			}
			return ch, nil
		}}); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	entries := func() []string {
		q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("gp"), Forward: true, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range q.Rows {
			out = append(out, string(r.Item))
		}
		return out
	}
	b.skipApply = true
	put("a", "1")
	put("a", "2") // moves a's entry from 1 to 2
	put("b", "3")
	b.skipApply = false
	if got := entries(); len(got) != 0 {
		t.Fatalf("entries before the sweep: %v", got)
	}
	n, err := b.drainAll(ctx)
	if err != nil || n < 3 {
		t.Fatalf("drained %d (%v)", n, err)
	}
	if got := fmt.Sprint(entries()); got != "[a2 b3]" {
		t.Fatalf("entries after the sweep: %s", got)
	}
	// Applying a's first change again (a late, duplicate application)
	// changes nothing: its timestamp is older than the move.
	if err := b.applyIndex(ctx, ref.ID, []byte("a"), []byte{}, 1, backend.Change{PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("gp"), SK: []byte("1")}, Item: []byte("a1")}}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(entries()); got != "[a2 b3]" {
		t.Fatalf("entries after a late application: %s", got)
	}
	// A pending outbox row, then DropIndex: nothing of g survives, also
	// when the dead writer's application lands afterwards.
	b.skipApply = true
	late := put("c", "4")
	b.skipApply = false
	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "g"}); err != nil {
		t.Fatal(err)
	}
	cur, err := b.readForWrite(ctx, ref.ID, []byte("c"), []byte{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.applyIndex(ctx, ref.ID, []byte("c"), []byte{}, *cur.ver, late); err != nil {
		t.Fatal(err)
	}
	if got := entries(); len(got) != 0 {
		t.Fatalf("entries after DropIndex and a late application: %v", got)
	}
}

// TestOutboxSweep: the background sweep applies an outbox row left by a
// writer that died after its LWT.
func TestOutboxSweep(t *testing.T) {
	need(t)
	ks := fmt.Sprintf("extenddb_sweep_%08x", rand.Uint32())
	defer dropKeyspace(ks)
	w := openT(t, ks)
	ctx := t.Context()
	cr, err := w.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "sweep", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	w.skipApply = true
	if _, err := w.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("v"), PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("gp"), SK: []byte("s")}, Item: []byte("v")}}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Hosts: hosts, Keyspace: ks, OutboxSweep: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		q, err := w.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("gp"), Forward: true, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Rows) == 1 {
			// The GSI lag metric: the sweep's application is counted, and
			// nothing is left pending in either process (the sweeper
			// removes the outbox row just after the entry appeared).
			for st := s.Stats(); !st.HasOutbox || st.OutboxRecovered < 1 || st.OutboxPending != 0 || st.OutboxOldest != 0; st = s.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("sweeper stats after the sweep: %+v", st)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if st := w.Stats(); st.OutboxPending != 0 || st.OutboxRecovered != 0 {
				t.Fatalf("writer stats: %+v", st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweep did not apply the outbox row")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPendingUpdateRolledForward: an UpdateTable whose coordinator died
// after recording the pending description (step 1) is finished by the
// next writer: the writer at the old version is refused with
// KindTableVersion, every partition is fenced at the new version, and the
// table shows the new description.
func TestPendingUpdateRolledForward(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "pending", Desc: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	v1 := cr.Table.Ref()
	put := func(ref backend.TableRef, pk string) error {
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(pk)}, nil
		}})
		return err
	}
	if err := put(v1, "a"); err != nil {
		t.Fatal(err)
	}
	// Step 1 of an UpdateTable, then its coordinator "dies".
	if ok, err := b.query(ctx, `UPDATE tables SET pending_descr = ?, pending_version = 2 WHERE id = ? IF version = 1 AND pending_version = null`,
		[]byte("v2"), v1.ID).MapScanCAS(map[string]any{}); err != nil || !ok {
		t.Fatalf("pending: %v %v", ok, err)
	}
	t0 := time.Now()
	for _, pk := range []string{"a", "new"} {
		if err := put(v1, pk); !backend.IsKind(err, backend.KindTableVersion) {
			t.Fatalf("write %s at the old version during a dead update: %v", pk, err)
		}
	}
	t.Logf("refused after %v (the writer waits up to 2 s, then finishes the update)", time.Since(t0).Round(time.Millisecond))
	g, err := b.GetTable(ctx, backend.GetTableParams{Account: v1.Account, Name: v1.Name})
	if err != nil || g.Table.Version != 2 || string(g.Table.Desc) != "v2" {
		t.Fatalf("table after roll-forward: %+v %v", g, err)
	}
	cur, err := b.readForWrite(ctx, v1.ID, []byte("a"), []byte{}, true)
	if err != nil || cur.tv == nil || *cur.tv != 2 {
		t.Fatalf("partition a not fenced at 2: %+v %v", cur, err)
	}
	v2 := g.Table.Ref()
	if err := put(v2, "a"); err != nil {
		t.Fatalf("write at the new version: %v", err)
	}
	// A concurrent UpdateTable meeting a pending one finishes it first.
	if _, err := b.query(ctx, `UPDATE tables SET pending_descr = ?, pending_version = 3 WHERE id = ? IF version = 2 AND pending_version = null`,
		[]byte("v3"), v1.ID).MapScanCAS(map[string]any{}); err != nil {
		t.Fatal(err)
	}
	u, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: v1.Account, Name: v1.Name, Fn: func(old *backend.Table) ([]byte, error) {
		if old.Version != 3 || string(old.Desc) != "v3" {
			return nil, fmt.Errorf("Fn saw version %d %q, want the finished pending update 3", old.Version, old.Desc)
		}
		return []byte("v4"), nil
	}})
	if err != nil || u.Table.Version != 4 {
		t.Fatalf("UpdateTable over a pending one: %+v %v", u, err)
	}
}

// TestScanSkipsGhostRows: deleted items stay as ghost rows; a Scan page
// whose per-partition quota is filled by ghosts reads the partition on,
// so no live row is skipped, whatever the page size.
func TestScanSkipsGhostRows(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "ghosts", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	write := func(pk, sk string, op backend.ChangeOp) {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), SK: []byte(sk), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: op, Item: []byte(pk + "/" + sk)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, pk := range []string{"a", "b", "c"} {
		for i := range 10 {
			write(pk, fmt.Sprintf("s%02d", i), backend.Put)
		}
		for i := range 10 {
			if i < 8 || pk == "b" {
				write(pk, fmt.Sprintf("s%02d", i), backend.Delete)
			}
		}
	}
	rows, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows.Rows {
		want = append(want, string(r.Item))
	}
	if len(want) != 4 {
		t.Fatalf("whole scan: %v", want)
	}
	for page := 1; page <= 5; page++ {
		var got []string
		var after *backend.Cursor
		for range 20 {
			res, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: page, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Rows {
				got = append(got, string(r.Item))
			}
			if !res.More {
				break
			}
			last := res.Rows[len(res.Rows)-1]
			after = &backend.Cursor{PK: last.PK, SK: last.SK}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("page %d: %v, want %v", page, got, want)
		}
	}
}

// TestSweepFinishesYoungDeadTransaction: a transaction whose coordinator
// died after its commit and before releasing its items, less than a lock
// timeout before a server starts, is too young for the sweep at start;
// its index changes (written when the locks are released) land at the
// sweep's second round, one lock timeout later — not a sweep interval
// (a minute) later.
func TestSweepFinishesYoungDeadTransaction(t *testing.T) {
	w := openT(t, keyspace)
	ks := keyspace
	ctx := t.Context()
	cr, err := w.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: fmt.Sprintf("young_%08x", rand.Uint32()), Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	indexed := func(pk string) backend.WriteItemParams {
		return backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(pk), PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("gp"), SK: []byte(pk)}, Item: []byte(pk)}}}, nil
		}}
	}
	// Kill the coordinator after ever more store calls until one dies
	// between its commit and its releases.
	var keys []txledger.Key
	for after := int64(1); ; after++ {
		if after > 40 {
			t.Fatal("no crash point left a committed transaction holding its locks")
		}
		a, b := fmt.Sprintf("a%d", after), fmt.Sprintf("b%d", after)
		cs := &ledgertest.CrashStore{Items: txStore{w}, After: after}
		_, _ = txledger.New(cs, txledger.Options{}).TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{indexed(a), indexed(b)}})
		rec, err := txStore{w}.ReadItem(ctx, txledger.Key{Table: ref, PK: []byte(b)})
		if err != nil {
			t.Fatal(err)
		}
		if rec.Lock == nil {
			continue
		}
		tx, err := txStore{w}.ReadTx(ctx, rec.Lock.Tx)
		if err != nil {
			t.Fatal(err)
		}
		if tx != nil && tx.State == txledger.Committed {
			keys = append(keys, txledger.Key{Table: ref, PK: []byte(b)})
			break
		}
	}
	// The "restarted server": its first sweep round runs now, while the
	// transaction is younger than the lock timeout (4 s here).
	start := time.Now()
	s, err := Open(ctx, Options{Hosts: hosts, Keyspace: ks, Tx: txledger.Options{LockTimeout: 4 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		rec, err := txStore{w}.ReadItem(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		q, err := w.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("gp"), Forward: true, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range q.Rows {
			found = found || string(r.Item) == string(keys[0].PK)
		}
		if rec.Lock == nil && found {
			t.Logf("released and indexed %v after the start", time.Since(start).Round(time.Millisecond))
			return
		}
		// The bound leaves room for two rounds' walk of the keyspace's
		// other tables; the round after is a minute away.
		if time.Since(start) > 45*time.Second {
			t.Fatalf("after %v: locked %v, indexed %v (the sweep's next round is a minute away)", time.Since(start), rec.Lock != nil, found)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTxLockTimeoutKey: storage.cassandra.tx_lock_timeout (and its flag)
// reaches the transaction ledger of the opened backend.
func TestTxLockTimeoutKey(t *testing.T) {
	d := Driver()
	c := d.NewConfig().(*Config)
	if c.TxLockTimeout.Duration != 5*time.Second {
		t.Fatalf("default tx_lock_timeout %s", c.TxLockTimeout)
	}
	c.TxLockTimeout.Duration = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "tx_lock_timeout") {
		t.Fatalf("tx_lock_timeout 0: %v", err)
	}
	flag := false
	for _, f := range d.Flags {
		flag = flag || (f.Name == "cassandra-tx-lock-timeout" && f.Key == "tx_lock_timeout")
	}
	if !flag {
		t.Fatal("no --cassandra-tx-lock-timeout flag for tx_lock_timeout")
	}
	need(t)
	c.Hosts, c.Keyspace, c.TxLockTimeout.Duration = strings.Join(hosts, ","), keyspace, 4321*time.Millisecond
	o := c.options() // what the driver opens with (plus RequireMigrated)
	o.OutboxSweep = -1
	b, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.tx.Options().LockTimeout; got != 4321*time.Millisecond {
		t.Fatalf("the ledger's lock timeout is %s, want 4.321s", got)
	}
}

// TestDeprecatedMillisecondKeys: the whole-millisecond keys that the
// duration keys replaced are still honoured, each winning over its
// duration key, and each set one is a startup warning naming its
// replacement.
func TestDeprecatedMillisecondKeys(t *testing.T) {
	c := Driver().NewConfig().(*Config)
	if w := c.Deprecations(); len(w) != 0 {
		t.Fatalf("warnings without deprecated keys: %v", w)
	}
	o := c.options()
	if o.Timeout != 10*time.Second || o.ConnectTimeout != 5*time.Second || o.Tx.LockTimeout != 5*time.Second {
		t.Fatalf("default options %+v", o)
	}
	c.TimeoutMS, c.ConnectTimeoutMS, c.TxLockTimeoutMS = 1500, 700, 4321
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	o = c.options()
	if o.Timeout != 1500*time.Millisecond || o.ConnectTimeout != 700*time.Millisecond || o.Tx.LockTimeout != 4321*time.Millisecond {
		t.Fatalf("options %+v", o)
	}
	w := c.Deprecations()
	if len(w) != 3 || !strings.Contains(w[0], "storage.cassandra.timeout_ms is deprecated") || !strings.Contains(w[2], `tx_lock_timeout = "4.321s"`) {
		t.Fatalf("warnings %q", w)
	}
	c.ConnectTimeoutMS = -5
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "connect_timeout_ms") {
		t.Fatalf("connect_timeout_ms -5: %v", err)
	}
}
