package memory

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/storagetest"
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
	storagetest.Run(t, func(*testing.T) storage.Backend { return b })
}

// TestConformanceOneSnapshot runs the suite with a bound of one open
// snapshot.
func TestConformanceOneSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	b := openT(t, Options{MaxSnapshots: 1})
	storagetest.Run(t, func(*testing.T) storage.Backend { return b })
}

func createT(t *testing.T, b *Backend, name string) storage.TableRef {
	t.Helper()
	cr, err := b.CreateTable(context.Background(), storage.CreateTableParams{Account: "a", Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	return storage.TableRef{Account: "a", Name: name, ID: cr.Table.ID}
}

// TestSnapshotScenarioCatchesLiveReads: the snapshot section fails against
// a deliberately broken snapshot that reads live data, so its passing on
// this backend means something.
func TestSnapshotScenarioCatchesLiveReads(t *testing.T) {
	b := openT(t, Options{})
	key := func(i int) ([]byte, []byte) { return []byte(fmt.Sprintf("p%d", i%7)), []byte(fmt.Sprintf("s%04d", i)) }
	err := storagetest.SnapshotScenario(t.Context(), b, storagetest.LiveReadSnapshot(b), "acct", "live-reads", key, 70, 10)
	if err == nil {
		t.Fatal("the snapshot scenario passed against a snapshot that reads live data")
	}
	t.Logf("caught, as it must be: %v", err)
	if err := storagetest.SnapshotScenario(t.Context(), b, b, "acct", "real", key, 70, 10); err != nil {
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
	if _, err := b.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func([]byte) (storage.Change, error) {
		return storage.Change{Op: storage.Put, Item: item, PutIndex: []storage.IndexEntry{{IndexKey: storage.IndexKey{Index: "g", PK: ipk, SK: isk}, Item: proj}}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]byte{pk, sk, item, ipk, isk, proj} {
		for i := range s {
			s[i] = 'X'
		}
	}
	g, err := b.GetItem(ctx, storage.GetItemParams{Table: ref, PK: []byte("pk-1"), SK: []byte("sk-1")})
	if err != nil || string(g.Item) != "item-1" {
		t.Fatalf("GetItem after the caller reused its buffers: %q %v", g.Item, err)
	}
	q, err := b.Query(ctx, storage.QueryParams{Table: ref, Index: "g", PK: []byte("g-1"), Forward: true, Limit: 10})
	if err != nil || len(q.Rows) != 1 {
		t.Fatalf("index query: %+v %v", q, err)
	}
	r := q.Rows[0]
	if string(r.SK) != "h-1" || string(r.BasePK) != "pk-1" || string(r.BaseSK) != "sk-1" || string(r.Item) != "proj-1" {
		t.Fatalf("index row %q", [][]byte{r.PK, r.SK, r.BasePK, r.BaseSK, r.Item})
	}
	// Appending to a returned slice never writes over another.
	s, err := b.Scan(ctx, storage.ScanParams{Table: ref, Limit: 10})
	if err != nil || len(s.Rows) != 1 {
		t.Fatal(err)
	}
	_ = append(s.Rows[0].PK, 'Z')
	_ = append(s.Rows[0].SK, 'Z')
	if g, _ := b.GetItem(ctx, storage.GetItemParams{Table: ref, PK: []byte("pk-1"), SK: []byte("sk-1")}); string(g.Item) != "item-1" {
		t.Fatalf("append to a returned key changed the item: %q", g.Item)
	}
}

// TestUpdateTableVersion: every UpdateTable increments the version by one.
func TestUpdateTableVersion(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "v")
	for want := int64(2); want <= 5; want++ {
		u, err := b.UpdateTable(ctx, storage.UpdateTableParams{Account: ref.Account, Name: ref.Name,
			Fn: func(old *storage.Table) ([]byte, error) { return append(old.Desc, '+'), nil }})
		if err != nil {
			t.Fatal(err)
		}
		if u.Table.Version != want {
			t.Fatalf("version %d, want %d", u.Table.Version, want)
		}
	}
	g, err := b.GetTable(ctx, storage.GetTableParams{Account: ref.Account, Name: ref.Name})
	if err != nil || g.Table.Version != 5 || string(g.Table.Desc) != "d++++" {
		t.Fatalf("GetTable %+v %v", g.Table, err)
	}
	// A panicking function leaves the catalog usable.
	_, err = b.UpdateTable(ctx, storage.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*storage.Table) ([]byte, error) { panic("boom") }})
	if !storage.IsKind(err, storage.KindInternal) {
		t.Fatalf("panicking UpdateTable: %v", err)
	}
	if _, err := b.ListTables(ctx, storage.ListTablesParams{Account: ref.Account}); err != nil {
		t.Fatal(err)
	}
}

// TestPanicReleasesLocks: a write function that panics answers an error
// and leaves its key writable.
func TestPanicReleasesLocks(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{})
	ref := createT(t, b, "p")
	for _, tx := range []bool{false, true} {
		var err error
		boom := func([]byte) (storage.Change, error) { panic("boom") }
		if tx {
			_, err = b.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{
				{Table: ref, PK: []byte("k"), Fn: boom}, {Table: ref, PK: []byte("j"), Fn: boom}}})
		} else {
			_, err = b.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: []byte("k"), Fn: boom})
		}
		if err == nil {
			t.Fatal("a panicking write function succeeded")
		}
		if _, err := b.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (storage.Change, error) {
			return storage.Change{Op: storage.Put, Item: []byte("v")}, nil
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
	_, err := b.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{
		{Table: ref, PK: []byte("k"), Fn: func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Put, Item: []byte("one")}, nil }},
		{Table: ref, PK: []byte("k"), Fn: func(old []byte) (storage.Change, error) {
			seen = old
			return storage.Change{Op: storage.Put, Item: append(bytes.Clone(old), "+two"...)}, nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(seen) != "one" {
		t.Fatalf("second operation saw %q", seen)
	}
	g, _ := b.GetItem(ctx, storage.GetItemParams{Table: ref, PK: []byte("k")})
	if string(g.Item) != "one+two" {
		t.Fatalf("item %q", g.Item)
	}
	if c, n := b.stats(ref.ID); c != 1 || n != int64(len("one+two")) {
		t.Fatalf("stats %d items %d bytes", c, n)
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
	_, err := b.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func([]byte) (storage.Change, error) { return storage.Change{}, nil }})
	if !storage.IsKind(err, storage.KindUnavailable) {
		t.Fatalf("write after Close: %v", err)
	}
	if _, err := b.GetItem(ctx, storage.GetItemParams{Table: ref, PK: []byte("k")}); !storage.IsKind(err, storage.KindUnavailable) {
		t.Fatalf("read after Close: %v", err)
	}
	if err := b.Ping(ctx); !storage.IsKind(err, storage.KindUnavailable) {
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
		if _, err := b.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (storage.Change, error) {
			return storage.Change{Op: storage.Put, Item: []byte(v)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 {
		put(fmt.Sprint(i), "a")
	}
	snap, err := b.OpenTableSnapshot(ctx, storage.OpenSnapshotParams{Account: ref.Account, Name: ref.Name, PageSize: 100})
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
