package memory

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fmt.Println("storage backends exercised: memory")
	os.Exit(code)
}

func openT(t testing.TB, opts Options) *Backend {
	t.Helper()
	b := New(opts)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestConformance runs the storage conformance suite on one shared
// backend, so the tests' writes meet on its locks.
func TestConformance(t *testing.T) {
	b := openT(t, Options{})
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

// TestConformanceOneSnapshot runs the suite with a bound of one open
// snapshot.
func TestConformanceOneSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	b := openT(t, Options{MaxSnapshots: 1})
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

func createT(t *testing.T, b *Backend, name string) backend.TableRef {
	t.Helper()
	cr, err := b.CreateTable(context.Background(), backend.CreateTableParams{Account: "a", Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	return cr.Table.Ref()
}

// TestSnapshotScenarioCatchesLiveReads: the snapshot section fails against
// a deliberately broken snapshot that reads live data, so its passing on
// this backend means something.
func TestSnapshotScenarioCatchesLiveReads(t *testing.T) {
	b := openT(t, Options{})
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

// TestKeepsNothingOfTheCaller: the backend copies keys, items and index
// entries; a caller that reuses its buffers (as the load tool and the
// benchmarks do) does not change what is stored.
func TestKeepsNothingOfTheCaller(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "t")
	pk, sk, item := []byte("pk-1"), []byte("sk-1"), []byte("item-1")
	ipk, isk, proj := []byte("g-1"), []byte("h-1"), []byte("proj-1")
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: item, PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: ipk, SK: isk}, Item: proj}}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]byte{pk, sk, item, ipk, isk, proj} {
		for i := range s {
			s[i] = 'X'
		}
	}
	g, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("pk-1"), SK: []byte("sk-1")})
	if err != nil || string(g.Item) != "item-1" {
		t.Fatalf("GetItem after the caller reused its buffers: %q %v", g.Item, err)
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("g-1"), Forward: true, Limit: 10})
	if err != nil || len(q.Rows) != 1 {
		t.Fatalf("index query: %+v %v", q, err)
	}
	r := q.Rows[0]
	if string(r.SK) != "h-1" || string(r.BasePK) != "pk-1" || string(r.BaseSK) != "sk-1" || string(r.Item) != "proj-1" {
		t.Fatalf("index row %q", [][]byte{r.PK, r.SK, r.BasePK, r.BaseSK, r.Item})
	}
	// Appending to a returned slice never writes over another.
	s, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 10})
	if err != nil || len(s.Rows) != 1 {
		t.Fatal(err)
	}
	_ = append(s.Rows[0].PK, 'Z')
	_ = append(s.Rows[0].SK, 'Z')
	if g, _ := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("pk-1"), SK: []byte("sk-1")}); string(g.Item) != "item-1" {
		t.Fatalf("append to a returned key changed the item: %q", g.Item)
	}
}

// TestUpdateTableVersion: every UpdateTable increments the version by one.
func TestUpdateTableVersion(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "v")
	for want := int64(2); want <= 5; want++ {
		u, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
			Fn: func(old *backend.Table) ([]byte, error) { return append(old.Desc, '+'), nil }})
		if err != nil {
			t.Fatal(err)
		}
		if u.Table.Version != want {
			t.Fatalf("version %d, want %d", u.Table.Version, want)
		}
	}
	g, err := b.GetTable(ctx, backend.GetTableParams{Account: ref.Account, Name: ref.Name})
	if err != nil || g.Table.Version != 5 || string(g.Table.Desc) != "d++++" {
		t.Fatalf("GetTable %+v %v", g.Table, err)
	}
	// A panicking function (recovered by backend.Checked) leaves the
	// catalog usable.
	_, err = backend.Checked(b, nil).UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { panic("boom") }})
	if !backend.IsKind(err, backend.KindInternal) {
		t.Fatalf("panicking UpdateTable: %v", err)
	}
	if _, err := b.ListTables(ctx, backend.ListTablesParams{Account: ref.Account}); err != nil {
		t.Fatal(err)
	}
}

// TestPanicReleasesLocks: a write function that panics (recovered by
// backend.Checked, as the server runs every backend) answers an error and
// leaves its key writable.
func TestPanicReleasesLocks(t *testing.T) {
	ctx := context.Background()
	mb := openT(t, Options{})
	ref := createT(t, mb, "p")
	b := backend.Checked(mb, nil)
	for _, tx := range []bool{false, true} {
		var err error
		boom := func([]byte) (backend.Change, error) { panic("boom") }
		if tx {
			_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
				{Table: ref, PK: []byte("k"), Fn: boom}, {Table: ref, PK: []byte("j"), Fn: boom}}})
		} else {
			_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: boom})
		}
		if err == nil {
			t.Fatal("a panicking write function succeeded")
		}
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("v")}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSameKeyTwiceInATransaction: a later operation sees the earlier
// one's result, and the last one wins.
func TestSameKeyTwiceInATransaction(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "s")
	var seen []byte
	_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte("one")}, nil }},
		{Table: ref, PK: []byte("k"), Fn: func(old []byte) (backend.Change, error) {
			seen = old
			return backend.Change{Op: backend.Put, Item: append(bytes.Clone(old), "+two"...)}, nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(seen) != "one" {
		t.Fatalf("second operation saw %q", seen)
	}
	g, _ := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("k")})
	if string(g.Item) != "one+two" {
		t.Fatalf("item %q", g.Item)
	}
	if st := statsT(t, b, ref); st.ItemCount != 1 || st.SizeBytes != int64(len("one+two")) {
		t.Fatalf("stats %+v", st)
	}
}

// TestClosed: every call after Close answers KindUnavailable.
func TestClosed(t *testing.T) {
	ctx := context.Background()
	b := New(Options{})
	ref := createT(t, b, "c")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (backend.Change, error) { return backend.Change{}, nil }})
	if !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("write after Close: %v", err)
	}
	if _, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("k")}); !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("read after Close: %v", err)
	}
	if err := b.Ping(ctx); !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("Ping after Close: %v", err)
	}
}

// TestSnapshotDoesNotBlockWrites: while a snapshot is open and unread,
// writes to its table go on, and the snapshot still drains its instant.
func TestSnapshotDoesNotBlockWrites(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "snap")
	put := func(k, v string) {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(v)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 {
		put(fmt.Sprint(i), "a")
	}
	snap, err := b.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: ref.Account, Name: ref.Name, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Items.Close()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 2000; i += 4 {
				put(fmt.Sprint(i), "b")
			}
		}()
	}
	wg.Wait()
	n := 0
	for {
		r, err := snap.Items.Next(ctx)
		if err != nil {
			break
		}
		if string(r.Item) != "a" {
			t.Fatalf("snapshot row %s = %q", r.PK, r.Item)
		}
		n++
	}
	if n != 1000 {
		t.Fatalf("snapshot has %d rows, want 1000", n)
	}
}

// TestTransfersKeepTheSum: transactions move amounts between 16 keys of
// two tables (so their stripes and table locks overlap); every TransactGet
// of all keys and every one-page Scan of a table sees whole transactions
// only (the sum of all keys, and of each table's keys moved within it,
// never changes).
func TestTransfersKeepTheSum(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ta, tb := createT(t, b, "ta"), createT(t, b, "tb")
	const n, start = 8, 100
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%d", i)) }
	num := func(v []byte) int {
		var x int
		fmt.Sscan(string(v), &x)
		return x
	}
	set := func(v int) backend.WriteFunc {
		return func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprint(v))}, nil
		}
	}
	add := func(d int) backend.WriteFunc {
		return func(old []byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprint(num(old) + d))}, nil
		}
	}
	for _, ref := range []backend.TableRef{ta, tb} {
		for i := range n {
			if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: key(i), Fn: set(start)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ref := ta
				if (i+w)%2 == 1 {
					ref = tb
				}
				x, y := (i*3+w)%n, (i*5+w+1)%n
				if x == y {
					continue
				}
				// Within one table: that table's sum stays n*start.
				if _, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
					{Table: ref, PK: key(x), Fn: add(-3)}, {Table: ref, PK: key(y), Fn: add(3)},
				}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	keys := make([]backend.GetItemParams, 0, 2*n)
	for _, ref := range []backend.TableRef{ta, tb} {
		for i := range n {
			keys = append(keys, backend.GetItemParams{Table: ref, PK: key(i)})
		}
	}
	for range 300 {
		g, err := b.TransactGet(ctx, backend.TransactGetParams{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		sa, sb := 0, 0
		for i, it := range g.Items {
			if i < n {
				sa += num(it)
			} else {
				sb += num(it)
			}
		}
		if sa != n*start || sb != n*start {
			t.Fatalf("TransactGet sums %d and %d, want %d", sa, sb, n*start)
		}
		s, err := b.Scan(ctx, backend.ScanParams{Table: tb, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, r := range s.Rows {
			sum += num(r.Item)
		}
		if sum != n*start {
			t.Fatalf("Scan sum %d, want %d", sum, n*start)
		}
	}
}

// TestDeleteTableUnderWrites: writes racing a DeleteTable either succeed
// (before it) or answer KindTableNotFound; the new incarnation is empty.
func TestDeleteTableUnderWrites(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "del")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				pk := []byte(fmt.Sprintf("w%d-%d", w, i))
				var err error
				if i%2 == 0 {
					_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) {
						return backend.Change{Op: backend.Put, Item: pk, PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("g")}, Item: pk}}}, nil
					}})
				} else {
					_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
						{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: pk}, nil }},
						{Table: ref, PK: append(pk, 'x'), Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: pk}, nil }},
					}})
				}
				if err != nil && !backend.IsKind(err, backend.KindTableNotFound) {
					t.Error(err)
					return
				}
			}
		}()
	}
	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	again := createT(t, b, "del")
	s, err := b.Scan(ctx, backend.ScanParams{Table: again, Limit: 10})
	if err != nil || len(s.Rows) != 0 {
		t.Fatalf("new incarnation: %d rows, %v", len(s.Rows), err)
	}
	if st := statsT(t, b, again); st.ItemCount != 0 || st.SizeBytes != 0 || len(st.Indexes) != 0 {
		t.Fatalf("new incarnation stats %+v", st)
	}
}

// TestNoLimit: a Query or Scan with Limit 0 returns every row.
func TestNoLimit(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "nolimit")
	for i := range 100 {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("p"), SK: []byte(fmt.Sprintf("%03d", i)),
			Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte("v")}, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, PK: []byte("p"), Forward: true})
	if err != nil || len(q.Rows) != 100 || q.More {
		t.Fatalf("query without limit: %d rows, more %v, %v", len(q.Rows), q.More, err)
	}
	s, err := b.Scan(ctx, backend.ScanParams{Table: ref})
	if err != nil || len(s.Rows) != 100 || s.More {
		t.Fatalf("scan without limit: %d rows, more %v, %v", len(s.Rows), s.More, err)
	}
}

// statsT is TableStats from the counters the apply function keeps (no
// Size function); it checks they agree with a full walk (Size = length).
func statsT(t *testing.T, b *Backend, ref backend.TableRef) *backend.TableStatsResult {
	t.Helper()
	fast, err := b.TableStats(context.Background(), backend.TableStatsParams{Table: ref})
	if err != nil {
		t.Fatal(err)
	}
	walk, err := b.TableStats(context.Background(), backend.TableStatsParams{Table: ref, Size: func(item []byte) int64 { return int64(len(item)) }})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*fast) != fmt.Sprint(*walk) {
		t.Fatalf("counted stats %+v, walked %+v", *fast, *walk)
	}
	return fast
}

// TestStats: item and index entry counts and bytes follow puts,
// overwrites, deletes, entry moves and DropIndex.
func TestStats(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "stats")
	w := func(pk string, ch backend.Change) {
		t.Helper()
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) { return ch, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	e := func(ix, pk, item string) backend.IndexEntry {
		return backend.IndexEntry{IndexKey: backend.IndexKey{Index: ix, PK: []byte(pk)}, Item: []byte(item)}
	}
	k := func(ix, pk string) backend.IndexKey { return backend.IndexKey{Index: ix, PK: []byte(pk)} }
	w("a", backend.Change{Op: backend.Put, Item: []byte("12345"), PutIndex: []backend.IndexEntry{e("g", "x", "123"), e("l", "a", "1")}})
	w("b", backend.Change{Op: backend.Put, Item: []byte("1"), PutIndex: []backend.IndexEntry{e("g", "x", "1")}})
	// Overwrite a: its g entry moves, its l entry is replaced in place.
	w("a", backend.Change{Op: backend.Put, Item: []byte("12"), DeleteIndex: []backend.IndexKey{k("g", "x"), k("l", "a")},
		PutIndex: []backend.IndexEntry{e("g", "y", "12"), e("l", "a", "12")}})
	want := backend.TableStatsResult{ItemCount: 2, SizeBytes: 3, Indexes: map[string]backend.IndexStats{"g": {ItemCount: 2, SizeBytes: 3}, "l": {ItemCount: 1, SizeBytes: 2}}}
	if st := statsT(t, b, ref); fmt.Sprint(*st) != fmt.Sprint(want) {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	w("b", backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{k("g", "x")}})
	w("zz", backend.Change{Op: backend.Delete}) // absent: nothing changes
	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "l"}); err != nil {
		t.Fatal(err)
	}
	want = backend.TableStatsResult{ItemCount: 1, SizeBytes: 2, Indexes: map[string]backend.IndexStats{"g": {ItemCount: 1, SizeBytes: 2}}}
	if st := statsT(t, b, ref); fmt.Sprint(*st) != fmt.Sprint(want) {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}
