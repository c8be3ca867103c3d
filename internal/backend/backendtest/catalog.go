package backendtest

import (
	"bytes"
	"errors"
	"slices"
	"sort"

	"github.com/extenddb/extenddb/internal/backend"
)

func testCatalog(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	name := e.tableName("cat")

	_, err := b.GetTable(ctx, backend.GetTableParams{Account: e.account, Name: name})
	wantKind(t, "GetTable missing", err, backend.KindTableNotFound)

	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: e.account, Name: name, Desc: []byte("d1")})
	if err != nil {
		t.Fatal(err)
	}
	tb := cr.Table
	if tb.ID == 0 || tb.Name != name || tb.Account != e.account || string(tb.Desc) != "d1" || tb.CreatedAt.IsZero() {
		t.Fatalf("CreateTable returned %+v", tb)
	}
	_, err = b.CreateTable(ctx, backend.CreateTableParams{Account: e.account, Name: name, Desc: []byte("d2")})
	wantKind(t, "CreateTable twice", err, backend.KindTableExists)

	gr, err := b.GetTable(ctx, backend.GetTableParams{Account: e.account, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	g := gr.Table
	if g.ID != tb.ID || string(g.Desc) != "d1" || g.Version != tb.Version || !g.CreatedAt.Equal(tb.CreatedAt) {
		t.Fatalf("GetTable %+v, created %+v", g, tb)
	}

	// Same name in another account is another table.
	other, err := b.CreateTable(ctx, backend.CreateTableParams{Account: e.account + "-other", Name: name, Desc: []byte("o")})
	if err != nil {
		t.Fatal(err)
	}
	if other.Table.ID == tb.ID {
		t.Fatal("two accounts' tables share an ID")
	}
	t.Cleanup(func() {
		b.DeleteTable(ctx, backend.DeleteTableParams{Account: e.account + "-other", Name: name})
	})

	// UpdateTable: Fn sees the current table; version increases.
	ur, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: e.account, Name: name, Fn: func(old *backend.Table) ([]byte, error) {
		if old.ID != tb.ID || string(old.Desc) != "d1" || old.Version != tb.Version {
			return nil, errors.New("the update function saw the wrong table")
		}
		return []byte("d2"), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(ur.Table.Desc) != "d2" || ur.Table.Version <= tb.Version || ur.Table.ID != tb.ID {
		t.Fatalf("UpdateTable returned %+v (was version %d)", ur.Table, tb.Version)
	}
	gr, _ = b.GetTable(ctx, backend.GetTableParams{Account: e.account, Name: name})
	if string(gr.Table.Desc) != "d2" || gr.Table.Version != ur.Table.Version {
		t.Fatalf("after update GetTable %+v", gr.Table)
	}

	// An Fn error is returned unchanged and changes nothing.
	_, err = b.UpdateTable(ctx, backend.UpdateTableParams{Account: e.account, Name: name, Fn: func(*backend.Table) ([]byte, error) {
		return nil, errCond
	}})
	if !errors.Is(err, errCond) {
		t.Fatalf("UpdateTable Fn error: got %v", err)
	}
	gr, _ = b.GetTable(ctx, backend.GetTableParams{Account: e.account, Name: name})
	if string(gr.Table.Desc) != "d2" || gr.Table.Version != ur.Table.Version {
		t.Fatalf("failed update changed the table: %+v", gr.Table)
	}
	_, err = b.UpdateTable(ctx, backend.UpdateTableParams{Account: e.account, Name: name + "-missing", Fn: func(*backend.Table) ([]byte, error) {
		return []byte("x"), nil
	}})
	wantKind(t, "UpdateTable missing", err, backend.KindTableNotFound)

	// DeleteTable.
	dr, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: e.account, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if dr.Table == nil || dr.Table.ID != tb.ID {
		t.Fatalf("DeleteTable returned %+v", dr.Table)
	}
	_, err = b.GetTable(ctx, backend.GetTableParams{Account: e.account, Name: name})
	wantKind(t, "GetTable deleted", err, backend.KindTableNotFound)
	_, err = b.DeleteTable(ctx, backend.DeleteTableParams{Account: e.account, Name: name})
	wantKind(t, "DeleteTable twice", err, backend.KindTableNotFound)

	// A new incarnation gets a new ID.
	cr2, err := b.CreateTable(ctx, backend.CreateTableParams{Account: e.account, Name: name, Desc: []byte("d3")})
	if err != nil {
		t.Fatal(err)
	}
	if cr2.Table.ID == tb.ID {
		t.Fatal("re-created table reused the old ID")
	}
}

func testListTables(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	res, err := b.ListTables(ctx, backend.ListTablesParams{Account: e.account})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Names) != 0 {
		t.Fatalf("empty account lists %q", res.Names)
	}
	// Byte order differs from case-insensitive and locale order.
	bases := []string{"b", "a", "B", "_x", "a0", "Z", "z", "é", "A-1", "a.b", "0"}
	var names []string
	for _, n := range bases {
		names = append(names, e.createTable(n).Name)
	}
	// Another account's tables never show.
	e2 := *e
	e2.account = e.account + "-x"
	e2.createTable("zzz")

	sort.Strings(names) // bytewise
	res, err = b.ListTables(ctx, backend.ListTablesParams{Account: e.account})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Names, names) {
		t.Fatalf("ListTables:\n got  %q\n want %q", res.Names, names)
	}
	for _, page := range []int{1, 2, 3, 5, len(names), len(names) + 1} {
		var got []string
		after := ""
		for i := 0; ; i++ {
			if i > len(names)+2 {
				t.Fatalf("paging by %d does not end", page)
			}
			r, err := b.ListTables(ctx, backend.ListTablesParams{Account: e.account, StartAfter: after, Limit: page})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Names) > page {
				t.Fatalf("ListTables limit %d returned %d", page, len(r.Names))
			}
			got = append(got, r.Names...)
			if len(r.Names) < page {
				break
			}
			after = r.Names[len(r.Names)-1]
		}
		if !slices.Equal(got, names) {
			t.Fatalf("paging by %d:\n got  %q\n want %q", page, got, names)
		}
	}
	// StartAfter a name that is not a table.
	r, err := b.ListTables(ctx, backend.ListTablesParams{Account: e.account, StartAfter: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range names {
		if n > "a" {
			want = append(want, n)
		}
	}
	if !slices.Equal(r.Names, want) {
		t.Fatalf("StartAfter a:\n got  %q\n want %q", r.Names, want)
	}
	e.b.DeleteTable(ctx, backend.DeleteTableParams{Account: e2.account, Name: e2.tableName("zzz")})
}

func testItemCRUD(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("crud")
	pk, sk := strKey("p"), numKey("1")
	if got := e.get(ref, pk, sk); got != nil {
		t.Fatalf("missing item reads %q", got)
	}
	item1 := itemOf(pk, sk, "one")
	res, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func(old []byte) (backend.Change, error) {
		if old != nil {
			return backend.Change{}, errors.New("old should be nil")
		}
		return backend.Change{Op: backend.Put, Item: item1}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Old != nil || res.Change.Op != backend.Put || !bytes.Equal(res.Change.Item, item1) {
		t.Fatalf("first put result %+v", res)
	}
	if got := e.get(ref, pk, sk); !bytes.Equal(got, item1) {
		t.Fatalf("GetItem %q, want %q", got, item1)
	}
	// Other keys of the partition and other partitions stay absent.
	if got := e.get(ref, pk, numKey("2")); got != nil {
		t.Fatal("wrong sort key reads an item")
	}
	if got := e.get(ref, strKey("q"), sk); got != nil {
		t.Fatal("wrong partition reads an item")
	}

	// Keep: returns the old item, changes nothing.
	res, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func(old []byte) (backend.Change, error) {
		if !bytes.Equal(old, item1) {
			return backend.Change{}, errors.New("the write function saw the wrong old item")
		}
		return backend.Change{Op: backend.Keep}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Old, item1) || res.Change.Op != backend.Keep {
		t.Fatalf("Keep result %+v", res)
	}
	if got := e.get(ref, pk, sk); !bytes.Equal(got, item1) {
		t.Fatal("Keep changed the item")
	}

	// Put over an item returns the old one.
	item2 := itemOf(pk, sk, "two")
	res, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: putFn(item2)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Old, item1) {
		t.Fatalf("overwrite Old %q", res.Old)
	}
	if got := e.get(ref, pk, sk); !bytes.Equal(got, item2) {
		t.Fatal("overwrite not visible")
	}

	// Delete.
	res, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Old, item2) || res.Change.Op != backend.Delete {
		t.Fatalf("delete result %+v", res)
	}
	if got := e.get(ref, pk, sk); got != nil {
		t.Fatal("deleted item still reads")
	}
	// Delete of an absent item is fine.
	res, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete}, nil
	}})
	if err != nil || res.Old != nil {
		t.Fatalf("delete absent: %+v %v", res, err)
	}
	// A stored item is returned byte for byte, whatever it holds.
	odd := []byte{0, 1, 2, 0xFF, 0, '"'}
	e.put(ref, pk, sk, odd)
	if got := e.get(ref, pk, sk); !bytes.Equal(got, odd) {
		t.Fatalf("item bytes changed: %x", got)
	}
}

func testHashOnly(e *env) {
	t := e.t
	ref := e.createTable("hashonly")
	keys := [][]byte{strKey("a"), strKey(""), numKey("0"), {0}, {0xFF}}
	for i, k := range keys {
		e.put(ref, k, nil, itemOf(k, nil, string(rune('a'+i))))
	}
	for i, k := range keys {
		got := e.get(ref, k, nil)
		if !bytes.Equal(got, itemOf(k, nil, string(rune('a'+i)))) {
			t.Fatalf("hash-only get %x: %q", k, got)
		}
		// nil and empty sort keys are the same key.
		if got2 := e.get(ref, k, []byte{}); !bytes.Equal(got, got2) {
			t.Fatalf("nil and empty sort key differ for %x", k)
		}
	}
	rows := e.scanAll(backend.ScanParams{Table: ref}, 100)
	if len(rows) != len(keys) {
		t.Fatalf("scan found %d items, want %d", len(rows), len(keys))
	}
	for _, r := range rows {
		if len(r.SK) != 0 {
			t.Fatalf("hash-only row has sort key %x", r.SK)
		}
	}
}

func testFnError(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("fnerr")
	pk, sk := strKey("k"), strKey("s")
	idx := backend.IndexEntry{IndexKey: backend.IndexKey{Index: "gsi", PK: strKey("g"), SK: strKey("h")}, Item: []byte("x")}
	// On an absent item.
	calls := 0
	_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func(old []byte) (backend.Change, error) {
		calls++
		return backend.Change{Op: backend.Put, Item: []byte("no"), PutIndex: []backend.IndexEntry{idx}}, errCond
	}})
	if err != errCond {
		t.Fatalf("Fn error not returned unchanged: %v", err)
	}
	if calls == 0 {
		t.Fatal("Fn not called")
	}
	if got := e.get(ref, pk, sk); got != nil {
		t.Fatal("failed Fn wrote an item")
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "gsi", PK: strKey("g"), Forward: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Rows) != 0 {
		t.Fatal("failed Fn wrote an index entry")
	}
	// On an existing item: it stays.
	item := itemOf(pk, sk, "keep")
	e.put(ref, pk, sk, item)
	_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func(old []byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete}, errCond
	}})
	if !errors.Is(err, errCond) {
		t.Fatalf("got %v", err)
	}
	if got := e.get(ref, pk, sk); !bytes.Equal(got, item) {
		t.Fatal("failed Fn changed the item")
	}
}

func testPing(e *env) {
	if err := e.b.Ping(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	if e.b.Name() == "" {
		e.t.Fatal("empty backend name")
	}
}
