package backendtest

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/extenddb/extenddb/internal/backend"
)

type ixRow struct{ pk, sk, bpk, bsk, item string }

func ixRows(rows []backend.Row) []ixRow {
	out := make([]ixRow, len(rows))
	for i, r := range rows {
		out[i] = ixRow{string(r.PK), string(r.SK), string(r.BasePK), string(r.BaseSK), string(r.Item)}
	}
	return out
}

func cmpIx(a, b ixRow) int {
	return cmp.Or(cmp.Compare(a.pk, b.pk), cmp.Compare(a.sk, b.sk), cmp.Compare(a.bpk, b.bpk), cmp.Compare(a.bsk, b.bsk))
}

func (e *env) wantIx(what string, got []backend.Row, want []ixRow) {
	e.t.Helper()
	g := ixRows(got)
	if !slices.Equal(g, want) {
		e.t.Fatalf("%s:\n got  %q\n want %q", what, g, want)
	}
}

func ixe(index string, pk, sk []byte, item string) backend.IndexEntry {
	return backend.IndexEntry{IndexKey: backend.IndexKey{Index: index, PK: pk, SK: sk}, Item: []byte(item)}
}

func (e *env) write(ref backend.TableRef, pk, sk []byte, ch backend.Change) {
	e.t.Helper()
	_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func([]byte) (backend.Change, error) { return ch, nil }})
	if err != nil {
		e.t.Fatalf("write %x/%x: %v", pk, sk, err)
	}
}

func (e *env) queryIx(ref backend.TableRef, index string, pk []byte, fwd bool, page int) []backend.Row {
	return e.queryAll(backend.QueryParams{Table: ref, Index: index, PK: pk, Forward: fwd}, page)
}

func testIndex(e *env) {
	t := e.t
	ref := e.createTable("ix")
	s := strKey("s")
	g1, g2 := strKey("g1"), strKey("g2")
	u := func(i int) []byte { return strKey(fmt.Sprintf("u%d", i)) }

	// u1..u4 in gsi partition g1; u3 and u4 share an index sort key.
	isks := [][]byte{nil, strKey("d"), strKey("a"), strKey("same"), strKey("same")}
	for i := 1; i <= 4; i++ {
		e.write(ref, u(i), s, backend.Change{Op: backend.Put, Item: itemOf(u(i), s, ""), PutIndex: []backend.IndexEntry{
			ixe("gsi", g1, isks[i], fmt.Sprintf("proj-u%d", i)),
			ixe("lsi", u(i), strKey("x"), fmt.Sprintf("lsi-u%d", i)),
			ixe("gsi2", g1, isks[i], "other index"),
		}})
	}
	want := []ixRow{
		{string(g1), "a", "u2", "s", "proj-u2"},
		{string(g1), "d", "u1", "s", "proj-u1"},
		{string(g1), "same", "u3", "s", "proj-u3"},
		{string(g1), "same", "u4", "s", "proj-u4"},
	}
	for i := range want {
		want[i].bpk = string(strKey(want[i].bpk))
		want[i].bsk = string(s)
	}
	e.wantIx("gsi g1", e.queryIx(ref, "gsi", g1, true, 100), want)
	e.wantIx("gsi g1 backward", e.queryIx(ref, "gsi", g1, false, 1), reversed(want))
	e.wantIx("lsi u1", e.queryIx(ref, "lsi", u(1), true, 100), []ixRow{{string(u(1)), "x", string(u(1)), string(s), "lsi-u1"}})
	if n := len(e.queryIx(ref, "gsi", g2, true, 100)); n != 0 {
		t.Fatalf("gsi g2 has %d entries", n)
	}
	// The table does not see index entries, nor an index another's.
	if rows := e.scanAll(backend.ScanParams{Table: ref}, 100); len(rows) != 4 {
		t.Fatalf("table scan sees %d rows, want 4", len(rows))
	}
	if rows := e.scanAll(backend.ScanParams{Table: ref, Index: "gsi"}, 100); len(rows) != 4 {
		t.Fatalf("gsi scan sees %d rows, want 4", len(rows))
	}

	// Replace u1: its entries move.
	e.write(ref, u(1), s, backend.Change{Op: backend.Put, Item: itemOf(u(1), s, "v2"),
		DeleteIndex: []backend.IndexKey{{Index: "gsi", PK: g1, SK: isks[1]}, {Index: "lsi", PK: u(1), SK: strKey("x")}},
		PutIndex:    []backend.IndexEntry{ixe("gsi", g2, strKey("c"), "proj-u1-v2")},
	})
	e.wantIx("gsi g1 after move", e.queryIx(ref, "gsi", g1, true, 100), slices.Delete(slices.Clone(want), 1, 2))
	e.wantIx("gsi g2 after move", e.queryIx(ref, "gsi", g2, true, 100), []ixRow{{string(g2), "c", string(u(1)), string(s), "proj-u1-v2"}})
	if n := len(e.queryIx(ref, "lsi", u(1), true, 100)); n != 0 {
		t.Fatalf("lsi u1 still has %d entries", n)
	}
	// Replace an entry in place (same index key, new projection).
	e.write(ref, u(3), s, backend.Change{Op: backend.Put, Item: itemOf(u(3), s, "v2"),
		DeleteIndex: []backend.IndexKey{{Index: "gsi", PK: g1, SK: isks[3]}},
		PutIndex:    []backend.IndexEntry{ixe("gsi", g1, isks[3], "proj-u3-v2")},
	})
	// Delete u2 and u4 with their entries.
	for _, i := range []int{2, 4} {
		e.write(ref, u(i), s, backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{
			{Index: "gsi", PK: g1, SK: isks[i]}, {Index: "lsi", PK: u(i), SK: strKey("x")}, {Index: "gsi2", PK: g1, SK: isks[i]},
		}})
	}
	e.wantIx("gsi g1 after deletes", e.queryIx(ref, "gsi", g1, true, 100),
		[]ixRow{{string(g1), "same", string(u(3)), string(s), "proj-u3-v2"}})
	rows := e.scanAll(backend.ScanParams{Table: ref, Index: "gsi2"}, 1)
	if len(rows) != 2 {
		t.Fatalf("gsi2 scan has %d entries, want 2", len(rows))
	}
	if got := e.get(ref, u(2), s); got != nil {
		t.Fatal("deleted item still reads")
	}
}

func testIndexPaging(e *env) {
	t := e.t
	ref := e.createTable("ixpage")
	g := strKey("g")
	var want []ixRow
	var all []ixRow
	for i := range 40 {
		bpk := numKey(fmt.Sprint(i%13 - 6))
		bsk := []byte{byte(i), 0}
		isk := []byte{"ab"[i%2]}
		ipk := g
		if i%5 == 0 {
			ipk = strKey(fmt.Sprintf("g%d", i))
		}
		item := fmt.Sprintf("p%d", i)
		e.write(ref, bpk, bsk, backend.Change{Op: backend.Put, Item: []byte(item), PutIndex: []backend.IndexEntry{ixe("gsi", ipk, isk, item)}})
		r := ixRow{string(ipk), string(isk), string(bpk), string(bsk), item}
		all = append(all, r)
		if bytes.Equal(ipk, g) {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, cmpIx)
	for _, page := range []int{1, 3, 7, 32, 33} {
		e.wantIx(fmt.Sprintf("index page %d", page), e.queryIx(ref, "gsi", g, true, page), want)
		e.wantIx(fmt.Sprintf("index page %d backward", page), e.queryIx(ref, "gsi", g, false, page), reversed(want))
	}
	// Bounds on the index sort key with paging.
	var onlyB []ixRow
	for _, r := range want {
		if r.sk == "b" {
			onlyB = append(onlyB, r)
		}
	}
	for _, fwd := range []bool{true, false} {
		got := e.queryAll(backend.QueryParams{Table: ref, Index: "gsi", PK: g, Forward: fwd,
			Lower: &backend.Bound{Key: []byte("a"), Inclusive: false}, Upper: &backend.Bound{Key: []byte("b"), Inclusive: true}}, 4)
		w := onlyB
		if !fwd {
			w = reversed(onlyB)
		}
		e.wantIx(fmt.Sprintf("index bounds forward=%v", fwd), got, w)
	}
	// Index scan with segments covers every entry once, in scan order.
	for _, total := range []int{1, 3} {
		var got []ixRow
		for seg := range total {
			rows := e.scanAll(backend.ScanParams{Table: ref, Index: "gsi", Segment: seg, TotalSegments: total}, 3)
			checkScanOrder(e, rows)
			got = append(got, ixRows(rows)...)
		}
		slices.SortFunc(got, cmpIx)
		w := slices.Clone(all)
		slices.SortFunc(w, cmpIx)
		if !slices.Equal(got, w) {
			t.Fatalf("index scan %d segments:\n got  %q\n want %q", total, got, w)
		}
	}
}

// testDropIndex: DropIndex removes every entry of one index and nothing
// else; a dead table ID answers KindTableNotFound.
func testDropIndex(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("dropix")
	for i := range 30 {
		pk := []byte(fmt.Sprintf("k%02d", i))
		e.write(ref, pk, nil, backend.Change{Op: backend.Put, Item: pk, PutIndex: []backend.IndexEntry{
			ixe("gone", []byte(fmt.Sprintf("g%d", i%3)), pk, "x"), ixe("kept", []byte("g"), pk, "y"),
		}})
	}
	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "gone"}); err != nil {
		t.Fatal(err)
	}
	if rows := e.scanAll(backend.ScanParams{Table: ref, Index: "gone"}, 100); len(rows) != 0 {
		t.Fatalf("dropped index still has %d entries", len(rows))
	}
	if rows := e.scanAll(backend.ScanParams{Table: ref, Index: "kept"}, 100); len(rows) != 30 {
		t.Fatalf("other index has %d entries, want 30", len(rows))
	}
	if rows := e.scanAll(backend.ScanParams{Table: ref}, 100); len(rows) != 30 {
		t.Fatalf("table has %d items, want 30", len(rows))
	}
	// Dropping an index without entries is fine.
	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "never"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	_, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "kept"})
	wantKind(t, "DropIndex on a deleted table", err, backend.KindTableNotFound)
}

// testCursorBesideBounds: a cursor resumes strictly after its position
// and the bounds still hold, whichever of the two is the tighter start:
// an index Query whose cursor lies before, on or after the start-side
// sort key bound (inclusive or exclusive), in both directions, and a
// Scan segment whose cursor's partition hash lies before, inside or
// after the segment.
func testCursorBesideBounds(e *env) {
	t := e.t
	ref := e.createTable("cursorbounds")
	g := strKey("g")
	var all []ixRow // index partition g, in index order
	for i := range 12 {
		bpk := strKey(fmt.Sprintf("b%02d", i))
		isk := strKey(string("abcd"[i%4]))
		item := fmt.Sprintf("i%d", i)
		e.write(ref, bpk, nil, backend.Change{Op: backend.Put, Item: []byte(item), PutIndex: []backend.IndexEntry{ixe("gsi", g, isk, item)}})
		all = append(all, ixRow{string(g), string(isk), string(bpk), "", item})
	}
	slices.SortFunc(all, cmpIx)
	bd := func(k string, incl bool) *backend.Bound { return &backend.Bound{Key: strKey(k), Inclusive: incl} }
	in := func(r ixRow, lo, hi *backend.Bound) bool { return inBounds([]byte(r.sk), lo, hi) }
	for _, lo := range []*backend.Bound{nil, bd("b", true), bd("b", false), bd("c", true)} {
		for _, hi := range []*backend.Bound{nil, bd("c", true), bd("c", false), bd("b", true)} {
			for _, fwd := range []bool{true, false} {
				order := all
				if !fwd {
					order = reversed(all)
				}
				for ci, c := range order {
					after := &backend.Cursor{PK: []byte(c.pk), SK: []byte(c.sk), BasePK: []byte(c.bpk), BaseSK: []byte(c.bsk)}
					var want []ixRow
					for _, r := range order[ci+1:] {
						if in(r, lo, hi) {
							want = append(want, r)
						}
					}
					for _, page := range []int{2, 100} {
						got := e.queryAll(backend.QueryParams{Table: ref, Index: "gsi", PK: g, Lower: lo, Upper: hi, Forward: fwd, After: after}, page)
						e.wantIx(fmt.Sprintf("query %s..%s forward=%v after %q/%q page %d", fmtBound(lo), fmtBound(hi), fwd, c.sk, c.bpk, page), got, want)
					}
				}
			}
		}
	}

	// Scan: cursors taken from the whole table's order, used on every
	// segment of 3.
	sref := e.createTable("cursorsegs")
	for i := range 60 {
		pk := strKey(fmt.Sprintf("k%02d", i))
		e.put(sref, pk, nil, itemOf(pk, nil, ""))
	}
	whole := e.scanAll(backend.ScanParams{Table: sref}, 1000)
	if len(whole) != 60 {
		t.Fatalf("scan: %d rows, want 60", len(whole))
	}
	for seg := range 3 {
		lo, hi := backend.SegmentRange(seg, 3)
		for ci := -1; ci < len(whole); ci += 7 {
			var after *backend.Cursor
			var want []kv
			for i, r := range whole {
				if h := backend.KeyHash(r.PK); i > ci && h >= lo && h <= hi {
					want = append(want, kv{r.PK, r.SK})
				}
			}
			if ci >= 0 {
				c := whole[ci]
				after = &backend.Cursor{PK: c.PK, SK: c.SK, BasePK: c.BasePK, BaseSK: c.BaseSK}
			}
			for _, page := range []int{3, 100} {
				got := e.scanAll(backend.ScanParams{Table: sref, Segment: seg, TotalSegments: 3, After: after}, page)
				e.wantKeys(fmt.Sprintf("segment %d after row %d page %d", seg, ci, page), got, want)
			}
		}
	}
}
