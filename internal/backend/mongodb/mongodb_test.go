package mongodb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The tests need a MongoDB-wire server. They run when
// EXTENDDB_TEST_BACKENDS names mongodb, against EXTENDDB_TEST_MONGODB_URI
// (scripts/mongodb.sh start prints one: FerretDB); then a missing or
// unreachable server FAILS the run. Each run works in a fresh database
// (random name, dropped at the end) and prints the kind of server it ran
// on (FerretDB, a standalone MongoDB or a replica set).

var (
	requested  bool
	uri        string
	testDB     string
	serverKind string
	setupErr   error
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // the process TestCrashMidTransaction kills
		return
	}
	if os.Getenv(countsChildEnv) != "" {
		countsChild() // the process TestCountsAfterKill kills
		return
	}
	requested = backendtest.Requested("mongodb")
	if !requested {
		fmt.Println("storage backends: mongodb not requested (EXTENDDB_TEST_BACKENDS=mongodb and EXTENDDB_TEST_MONGODB_URI=$(scripts/mongodb.sh start) run it)")
		os.Exit(m.Run())
	}
	uri = os.Getenv("EXTENDDB_TEST_MONGODB_URI")
	var drop func()
	if uri == "" {
		setupErr = errors.New("EXTENDDB_TEST_BACKENDS names mongodb but EXTENDDB_TEST_MONGODB_URI is empty (export EXTENDDB_TEST_MONGODB_URI=$(scripts/mongodb.sh start))")
	} else {
		testDB, drop, setupErr = createDatabase()
	}
	if setupErr == nil {
		fmt.Printf("storage backend mongodb: server %s, database %s\n", serverKind, testDB)
	}
	code := m.Run()
	if drop != nil {
		drop()
	}
	if setupErr != nil {
		fmt.Printf("storage backends exercised: none — mongodb was requested and FAILED: %v\n", setupErr)
		if code == 0 {
			code = 1
		}
	} else {
		fmt.Printf("storage backends exercised: mongodb (%s, %s)\n", redact(uri), serverKind)
	}
	os.Exit(code)
}

// createDatabase migrates a database with a random name and returns a
// function that drops it.
func createDatabase() (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("extenddb_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	// 30 s per operation: the suites run in parallel against one FerretDB
	// (SQLite underneath), beside the other CI lanes, and a request queued
	// behind others can take longer than the 10 s a server would use.
	opts := Options{URI: uri, Database: name, Timeout: 30 * time.Second}
	if _, err := Migrate(ctx, opts); err != nil {
		return "", nil, fmt.Errorf("mongodb at %s: %w", redact(uri), err)
	}
	b, err := Open(ctx, opts)
	if err != nil {
		return "", nil, err
	}
	serverKind = b.ServerKind(ctx)
	return name, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := b.db.Drop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "drop database %s: %v\n", name, err)
		}
		b.Close()
	}, nil
}

// testPool is the pool size the conformance suite runs with:
// EXTENDDB_TEST_MONGODB_POOL, else the default (16).
func testPool() uint64 {
	var n uint64
	if v := os.Getenv("EXTENDDB_TEST_MONGODB_POOL"); v != "" {
		fmt.Sscan(v, &n)
	}
	return n
}

func need(t testing.TB) {
	t.Helper()
	if !requested {
		t.Skip("mongodb not requested (EXTENDDB_TEST_BACKENDS)")
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func openT(t testing.TB, opts Options) *Backend {
	t.Helper()
	need(t)
	if opts.URI == "" {
		opts.URI = uri
	}
	if opts.Database == "" {
		opts.Database = testDB
	}
	b, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestServerReachable(t *testing.T) {
	b := openT(t, Options{})
	if err := b.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %s", b.ServerKind(t.Context()))
}

func TestConformance(t *testing.T) {
	b := openT(t, Options{MaxPoolSize: testPool()})
	t.Logf("server: %s, pool %d (0: the default)", serverKind, testPool())
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

// TestKeyEncodingOrder: the text form of keys sorts (as Go strings, i.e.
// bytewise) exactly as the tuples of key bytes do, prefixes first.
func TestKeyEncodingOrder(t *testing.T) {
	keys := [][2][]byte{}
	vals := [][]byte{{}, {0}, {0, 0}, {0, 1}, {1}, {0x7f}, {0x80}, {0xff}, {0xff, 0}, {0xff, 0xff}, []byte("a"), []byte("ab")}
	for _, pk := range vals[1:] {
		for _, sk := range vals {
			keys = append(keys, [2][]byte{pk, sk})
		}
	}
	byTuple := func(a, b [2][]byte) int {
		ha, hb := backend.KeyHash(a[0]), backend.KeyHash(b[0])
		if ha != hb {
			if ha < hb {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return bytes.Compare(a[1], b[1])
	}
	for _, a := range keys {
		for _, b := range keys {
			want := byTuple(a, b)
			got := strings.Compare(itemID(a[0], a[1]), itemID(b[0], b[1]))
			if want != got {
				t.Fatalf("%x/%x vs %x/%x: text order %d, key order %d", a[0], a[1], b[0], b[1], got, want)
			}
			gi := strings.Compare(indexKey(a[0], a[1], b[0], b[1]), indexKey(b[0], b[1], a[0], a[1]))
			wi := byTuple(a, b)
			if wi == 0 {
				wi = bytes.Compare(b[0], a[0])
				if wi == 0 {
					wi = bytes.Compare(b[1], a[1])
				}
			}
			if gi != wi {
				t.Fatalf("index %x/%x/%x/%x: text order %d, key order %d", a[0], a[1], b[0], b[1], gi, wi)
			}
		}
	}
	for _, k := range keys {
		got, err := splitKey(itemID(k[0], k[1]), 2)
		if err != nil || !bytes.Equal(got[0], k[0]) || !bytes.Equal(got[1], k[1]) {
			t.Fatalf("round trip %x/%x: %x (%v)", k[0], k[1], got, err)
		}
	}
}

// TestSchemaChecksum: a database where a shipped migration was applied
// with another checksum, or that has a migration this build does not
// know, is refused with KindSchema; an unmigrated one too.
func TestSchemaChecksum(t *testing.T) {
	need(t)
	ctx := t.Context()
	for _, tc := range []string{"unmigrated", "edited", "newer"} {
		name := fmt.Sprintf("extenddb_test_schema_%s_%08x", tc, rand.Uint32())
		opts := Options{URI: uri, Database: name}
		admin, err := Open(ctx, Options{URI: uri, Database: name, SkipSchemaCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.db.Drop(context.Background()); admin.Close() })
		if tc != "unmigrated" {
			if _, err := Migrate(ctx, opts); err != nil {
				t.Fatal(err)
			}
			st, pend, err := Status(ctx, opts)
			if err != nil || len(st) != len(migrationList) || len(pend) != 0 {
				t.Fatalf("status after migrate: %v %v %v", st, pend, err)
			}
		}
		switch tc {
		case "edited":
			_, err = admin.db.Collection(migrationsColl).UpdateOne(ctx, bson.D{{Key: "_id", Value: migrationList[0].Name}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "checksum", Value: "0000"}}}})
		case "newer":
			_, err = admin.db.Collection(migrationsColl).InsertOne(ctx, bson.D{{Key: "_id", Value: "9999_future"}, {Key: "checksum", Value: "x"}})
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, opts)
		if !backend.IsKind(err, backend.KindSchema) {
			t.Fatalf("%s: Open answered %v, want KindSchema", tc, err)
		}
	}
}

// TestTwoClientsConditionalRace: two Backends (two pools, as two servers
// would have) race 32 conditional puts on one absent key, several rounds;
// exactly one wins each round, and its index entry is the only one.
func TestTwoClientsConditionalRace(t *testing.T) {
	b1 := openT(t, Options{})
	b2 := openT(t, Options{})
	backendtest.TwoBackendsConditionalRace(t, b1, b2, 10)
}

// TestTwoClientsConcurrentIncrements: two Backends (two servers' pools)
// increment one counter concurrently; every increment must count. FerretDB
// v1.24 applies an update's filter in a read before writing by _id, so a
// version-conditioned update alone lost increments here (163 of 200); the
// version claims (an insert per version) make it exact (ADR 0017).
func TestTwoClientsConcurrentIncrements(t *testing.T) {
	b1 := openT(t, Options{})
	b2 := openT(t, Options{})
	ctx := t.Context()
	cr, err := b1.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "incr2", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		be := b1
		if w%2 == 1 {
			be = b2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("counter"), Fn: func(old []byte) (backend.Change, error) {
					n := 0
					if old != nil {
						fmt.Sscan(string(old), &n)
					}
					return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprint(n + 1))}, nil
				}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	g, err := b1.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("counter")})
	if err != nil {
		t.Fatal(err)
	}
	if string(g.Item) != fmt.Sprint(workers*each) {
		t.Fatalf("counter %s after %d increments through two connections (server: %s)", g.Item, workers*each, serverKind)
	}
}

// TestKilledHoldersExpire: what a killed process leaves behind (a writer's
// registration, an item version claim, a catalog claim) holds its table or
// item only until its lease ends; then writes and catalog changes go on,
// and a taken-over item claim still writes exactly once.
func TestKilledHoldersExpire(t *testing.T) {
	// Every round trip of a write must finish within its lease: on a
	// FerretDB that shares two cores with CI's other lanes, a round trip
	// takes several hundred milliseconds at times.
	const lease = 1500 * time.Millisecond
	b := openT(t, Options{LeaseDuration: lease})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "killed", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	put := func(ref backend.TableRef, v string) error {
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(v)}, nil
		}})
		return err
	}
	if err := put(ref, "1"); err != nil {
		t.Fatal(err)
	}

	// A writer registered and was killed: UpdateTable waits for its lease.
	if _, err := b.register(ctx, ref); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ut, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { return []byte("d2"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < lease/2 || el > 10*lease {
		t.Fatalf("UpdateTable after a killed writer took %v (lease %v)", el, lease)
	}
	ref = ut.Table.Ref()
	if err := put(ref, "2"); err != nil {
		t.Fatal(err)
	}

	// A writer claimed the item's next version and was killed.
	id := itemID([]byte("k"), nil)
	cur, err := b.readDoc(ctx, b.items(ref.ID), id)
	if err != nil || cur == nil {
		t.Fatal(cur, err)
	}
	if ok, _, err := b.claimVersion(ctx, ref.ID, id, cur.v, time.Now().Add(lease), nonce()); err != nil || !ok {
		t.Fatal(ok, err)
	}
	start = time.Now()
	if err := put(ref, "3"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < lease/2 {
		t.Fatalf("write over a live item claim took only %v", el)
	}
	g, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("k")})
	if err != nil || string(g.Item) != "3" {
		t.Fatalf("item %q (%v), want 3", g.Item, err)
	}
	// The claims of past versions are gone (the taken-over one included).
	if n, err := b.claims(ref.ID).CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d claims left (%v), want 0", n, err)
	}

	// A catalog change claimed the table and was killed: writes wait for
	// its lease (3 leases), then go on.
	gen, _, err := b.latestClaim(ctx, ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	cid := fmt.Sprintf("%s%016d", claimPrefix(ref.ID), gen+1)
	if _, err := b.fence.InsertOne(ctx, fenceDoc{ID: cid, T: ref.ID, Exp: time.Now().Add(lease).UnixMilli(), Gen: gen + 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: ref.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: cid}}}}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := put(ref, "4"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < lease/2 {
		t.Fatalf("write under a live catalog claim took only %v", el)
	}
	if _, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { return []byte("d3"), nil }}); err != nil {
		t.Fatal(err)
	}
	if err := put(ref, "5"); !backend.IsKind(err, backend.KindTableVersion) {
		t.Fatalf("write at the old version after UpdateTable: %v, want KindTableVersion", err)
	}
}

// TestTwoClientsChangeLog: the change log scenario with the writers spread
// over two Backends (two servers' pools and publishers) on one database:
// one record per acknowledged write, per-item commit order, no late gaps.
func TestTwoClientsChangeLog(t *testing.T) {
	b1 := openT(t, Options{})
	b2 := openT(t, Options{})
	cr, err := b1.CreateTable(t.Context(), backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "log2", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.ChangeLogScenario(t, []backend.Backend{b1, b2}, []backend.ChangeLog{b1, b2}, cr.Table.Ref(), 8, 30, 50)
}

// TestChangeLogReopen: records survive closing and reopening the backend.
func TestChangeLogReopen(t *testing.T) {
	need(t)
	backendtest.ChangeLogReopen(t, func(t *testing.T) backend.Backend { return openT(t, Options{}) })
}

// TestChangeLogKeyMigration: records of the first log layout (_id the Seq
// as a number, with a trim marker) are rewritten by migration
// 0004_changelog_seq_keys so ReadLog, LogInfo and the next publication see
// them; a second run changes nothing.
func TestChangeLogKeyMigration(t *testing.T) {
	b := openT(t, Options{})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "logkeys", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	coll := b.logColl(ref.ID)
	at := time.Now().Add(-time.Minute).UnixMicro()
	old := []any{
		bson.D{{Key: "_id", Value: int64(1)}, {Key: "r", Value: "a@1"}, {Key: "at", Value: at}, {Key: "d", Value: []byte{}}, {Key: "x", Value: true}},
		bson.D{{Key: "_id", Value: int64(2)}, {Key: "r", Value: "b@1"}, {Key: "at", Value: at}, {Key: "d", Value: []byte("two")}},
		bson.D{{Key: "_id", Value: int64(3)}, {Key: "r", Value: "c@1"}, {Key: "at", Value: at + 1}, {Key: "d", Value: []byte("three")}},
	}
	if _, err := coll.InsertMany(ctx, old); err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		if err := migrateLogKeys(ctx, b.db); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	info, err := b.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil || *info != (backend.LogInfoResult{First: 2, Last: 3, Count: 2}) {
		t.Fatalf("LogInfo after the migration: %+v %v", info, err)
	}
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("v"), Log: []byte("four")}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.ReadLog(ctx, backend.ReadLogParams{Table: ref, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Records {
		got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Data))
	}
	if strings.Join(got, ",") != "2:two,3:three,4:four" {
		t.Fatalf("records after the migration: %v", got)
	}
}

// TestChangeLogPublishConflictInBatch: a publication of more records than
// one FerretDB insert batch (100), one of them already in the log, still
// numbers every record once, contiguously, At never decreasing (FerretDB
// v1.24 goes on with the next batch of an ordered insert after an error).
func TestChangeLogPublishConflictInBatch(t *testing.T) {
	b := openT(t, Options{})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "logbatch", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const n = 150
	for i := 0; i < n; i++ {
		data := fmt.Appendf(nil, "rec%03d", i)
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: fmt.Appendf(nil, "k%03d", i), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("v"), Log: data}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	// Record 10 is published already (as by another server's publisher
	// that has not deleted its hint yet).
	if err := b.ensureLogIndex(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	r10 := recordID(itemID([]byte("k010"), nil), 1)
	if _, err := b.logColl(ref.ID).InsertOne(ctx, logRec{ID: seqKey(1), Seq: 1, R: r10, At: time.Now().UnixMicro(), D: []byte("rec010")}); err != nil {
		t.Fatal(err)
	}
	cl := backend.Checked(b, func(err error) { t.Error(err) }).Capabilities().ChangeLog
	res, err := cl.ReadLog(ctx, backend.ReadLogParams{Table: ref, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, r := range res.Records {
		if r.Seq != int64(i+1) || seen[string(r.Data)] {
			t.Fatalf("record %d: Seq %d, data %s (seen before: %v)", i, r.Seq, r.Data, seen[string(r.Data)])
		}
		seen[string(r.Data)] = true
	}
	if len(res.Records) != n {
		t.Fatalf("%d records, want %d", len(res.Records), n)
	}
}
