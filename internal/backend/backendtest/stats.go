package backendtest

import (
	"fmt"
	"reflect"

	"github.com/extenddb/extenddb/internal/backend"
)

// testTableStats: TableStats counts the live items and index entries of
// one table, sums Size (or the byte length) over them, follows overwrites,
// deletes and moved index entries, ignores other tables, and answers
// KindTableNotFound for a dead table ID.
func testTableStats(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("stats")
	other := e.createTable("statsother")
	stats := func(size func([]byte) int64) *backend.TableStatsResult {
		t.Helper()
		res, err := b.TableStats(ctx, backend.TableStatsParams{Table: ref, Size: size})
		if err != nil {
			t.Fatalf("TableStats: %v", err)
		}
		return res
	}
	want := func(what string, got *backend.TableStatsResult, count, size int64, ix map[string]backend.IndexStats) {
		t.Helper()
		if got.ItemCount != count || got.SizeBytes != size {
			t.Fatalf("%s: items %d, %d bytes; want %d, %d", what, got.ItemCount, got.SizeBytes, count, size)
		}
		if len(got.Indexes) != len(ix) || (len(ix) > 0 && !reflect.DeepEqual(got.Indexes, ix)) {
			t.Fatalf("%s: indexes %v, want %v", what, got.Indexes, ix)
		}
	}
	want("empty", stats(nil), 0, 0, nil)

	// 10 items of 5 bytes ("item0".."item9"); the even ones in index "a"
	// (entry "ax", 2 bytes), every one in "b" ("bxyz", 4 bytes).
	for i := range 10 {
		pk := strKey(fmt.Sprintf("k%d", i))
		entries := []backend.IndexEntry{ixe("b", strKey("g"), pk, "bxyz")}
		if i%2 == 0 {
			entries = append(entries, ixe("a", strKey(fmt.Sprintf("g%d", i)), nil, "ax"))
		}
		e.write(ref, pk, nil, backend.Change{Op: backend.Put, Item: []byte(fmt.Sprintf("item%d", i)), PutIndex: entries})
	}
	e.write(other, strKey("k0"), nil, backend.Change{Op: backend.Put, Item: []byte("elsewhere"),
		PutIndex: []backend.IndexEntry{ixe("a", strKey("g"), nil, "zz")}})
	want("after puts", stats(nil), 10, 50, map[string]backend.IndexStats{"a": {ItemCount: 5, SizeBytes: 10}, "b": {ItemCount: 10, SizeBytes: 40}})
	seven := func([]byte) int64 { return 7 }
	want("with Size", stats(seven), 10, 70, map[string]backend.IndexStats{"a": {ItemCount: 5, SizeBytes: 35}, "b": {ItemCount: 10, SizeBytes: 70}})

	// Overwrite k0 with a longer item whose "a" entry moves; delete k1 and
	// its "b" entry.
	k0, k1 := strKey("k0"), strKey("k1")
	e.write(ref, k0, nil, backend.Change{Op: backend.Put, Item: []byte("item0-longer"),
		DeleteIndex: []backend.IndexKey{{Index: "a", PK: strKey("g0")}},
		PutIndex:    []backend.IndexEntry{ixe("a", strKey("moved"), nil, "axx")}})
	e.write(ref, k1, nil, backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "b", PK: strKey("g"), SK: k1}}})
	want("after overwrite and delete", stats(nil), 9, 50-5-5+12, map[string]backend.IndexStats{
		"a": {ItemCount: 5, SizeBytes: 11}, "b": {ItemCount: 9, SizeBytes: 36}})

	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "b"}); err != nil {
		t.Fatal(err)
	}
	want("after DropIndex", stats(nil), 9, 52, map[string]backend.IndexStats{"a": {ItemCount: 5, SizeBytes: 11}})

	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	_, err := b.TableStats(ctx, backend.TableStatsParams{Table: ref})
	wantKind(t, "TableStats of a deleted table", err, backend.KindTableNotFound)
}
