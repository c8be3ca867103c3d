package backendtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

func inBounds(k []byte, lo, hi *backend.Bound) bool {
	if lo != nil {
		c := bytes.Compare(k, lo.Key)
		if c < 0 || (c == 0 && !lo.Inclusive) {
			return false
		}
	}
	if hi != nil {
		c := bytes.Compare(k, hi.Key)
		if c > 0 || (c == 0 && !hi.Inclusive) {
			return false
		}
	}
	return true
}

func fmtBound(b *backend.Bound) string {
	if b == nil {
		return "-"
	}
	if b.Inclusive {
		return fmt.Sprintf("[%x]", b.Key)
	}
	return fmt.Sprintf("(%x)", b.Key)
}

// loadSorted writes cases into one partition and returns the table and
// the keys in order.
func (e *env) loadSorted(base string, cases []sortCase) (backend.TableRef, []byte, [][]byte) {
	ref := e.createTable(base)
	pk := strKey("p")
	keys := make([][]byte, len(cases))
	for i, c := range cases {
		keys[i] = c.key
	}
	for _, i := range rand.Perm(len(cases)) {
		e.put(ref, pk, cases[i].key, itemOf(pk, cases[i].key, ""))
	}
	e.put(ref, strKey("q"), []byte{0x01}, []byte("other partition"))
	return ref, pk, keys
}

func (e *env) checkRange(ref backend.TableRef, pk []byte, keys [][]byte, lo, hi *backend.Bound, pages []int) {
	e.t.Helper()
	var want []kv
	for _, k := range keys {
		if inBounds(k, lo, hi) {
			want = append(want, kv{pk, k})
		}
	}
	for _, fwd := range []bool{true, false} {
		w := want
		if !fwd {
			w = reversed(want)
		}
		for _, page := range pages {
			got := e.queryAll(backend.QueryParams{Table: ref, PK: pk, Lower: lo, Upper: hi, Forward: fwd}, page)
			e.wantKeys(fmt.Sprintf("range %s..%s forward=%v page %d", fmtBound(lo), fmtBound(hi), fwd, page), got, w)
		}
	}
}

func testQueryBounds(e *env) {
	ref, pk, keys := e.loadSorted("bounds", binaryCases())
	candidates := [][]byte{{0x00}, {0x00, 0x00, 0x01}, {0x01, 0x02}, {0x7F}, {0x80, 0x00}, {0xFF}, {0xFF, 0xFF}, {0xFF, 0xFF, 0xFF, 0xFF}}
	bounds := []*backend.Bound{nil}
	for _, c := range candidates {
		bounds = append(bounds, &backend.Bound{Key: c, Inclusive: true}, &backend.Bound{Key: c, Inclusive: false})
	}
	n := 0
	for _, lo := range bounds {
		for _, hi := range bounds {
			pages := []int{100}
			if n%5 == 0 {
				pages = append(pages, 2)
			}
			n++
			e.checkRange(ref, pk, keys, lo, hi, pages)
		}
	}
}

// beginsWith is the range [p, PrefixSuccessor(p)), unbounded above when p
// is all 0xFF.
func beginsWith(p []byte) (*backend.Bound, *backend.Bound) {
	lo := &backend.Bound{Key: p, Inclusive: true}
	succ := attr.PrefixSuccessor(p)
	if succ == nil {
		return lo, nil
	}
	return lo, &backend.Bound{Key: succ, Inclusive: false}
}

func testBeginsWith(e *env) {
	t := e.t
	ref, pk, keys := e.loadSorted("bw", binaryCases())
	for _, p := range [][]byte{{0x00}, {0x00, 0xFF}, {0x01}, {0x01, 0x02}, {0x7F}, {0x80}, {0xFE}, {0xFF}, {0xFF, 0xFF}, {0xFF, 0xFF, 0xFF}, {0xFF, 0xFF, 0xFF, 0xFF}} {
		lo, hi := beginsWith(p)
		var want []kv
		for _, k := range keys {
			if bytes.HasPrefix(k, p) {
				want = append(want, kv{pk, k})
			}
		}
		for _, fwd := range []bool{true, false} {
			w := want
			if !fwd {
				w = reversed(want)
			}
			for _, page := range []int{100, 1} {
				got := e.queryAll(backend.QueryParams{Table: ref, PK: pk, Lower: lo, Upper: hi, Forward: fwd}, page)
				e.wantKeys(fmt.Sprintf("begins_with %x forward=%v page %d", p, fwd, page), got, w)
			}
		}
	}
	// Strings, NULs included.
	sref, spk, skeys := e.loadSorted("bws", stringCases())
	for _, p := range []string{"a", "a\x00", "\x00", "é", "\U0001F600", "\uFFFF"} {
		lo, hi := beginsWith(strKey(p))
		var want []kv
		for _, k := range skeys {
			if bytes.HasPrefix(k, strKey(p)) {
				want = append(want, kv{spk, k})
			}
		}
		if len(want) == 0 {
			t.Fatalf("test data has no string starting with %q", p)
		}
		got := e.queryAll(backend.QueryParams{Table: sref, PK: spk, Lower: lo, Upper: hi, Forward: true}, 2)
		e.wantKeys(fmt.Sprintf("begins_with %q", p), got, want)
		got = e.queryAll(backend.QueryParams{Table: sref, PK: spk, Lower: lo, Upper: hi, Forward: false}, 2)
		e.wantKeys(fmt.Sprintf("begins_with %q backward", p), got, reversed(want))
	}
}

func testQueryPaging(e *env) {
	t := e.t
	ref := e.createTable("paging")
	pks := [][]byte{strKey("p1"), strKey("p2"), strKey("p3")}
	var sks [][]byte
	for i := -5; i < 25; i++ {
		sks = append(sks, numKey(strconv.Itoa(i)))
	}
	for _, pk := range pks {
		for _, i := range rand.Perm(len(sks)) {
			e.put(ref, pk, sks[i], itemOf(pk, sks[i], ""))
		}
	}
	lo := &backend.Bound{Key: numKey("0"), Inclusive: true}
	hi := &backend.Bound{Key: numKey("20"), Inclusive: false}
	for _, pk := range pks[:2] {
		var all, mid []kv
		for i, k := range sks {
			all = append(all, kv{pk, k})
			if i >= 5 && i < 25 {
				mid = append(mid, kv{pk, k})
			}
		}
		for _, page := range []int{1, 2, 7, 29, 30, 31} {
			e.wantKeys(fmt.Sprintf("page %d fwd", page), e.queryAll(backend.QueryParams{Table: ref, PK: pk, Forward: true}, page), all)
			e.wantKeys(fmt.Sprintf("page %d back", page), e.queryAll(backend.QueryParams{Table: ref, PK: pk, Forward: false}, page), reversed(all))
			e.wantKeys(fmt.Sprintf("bounded page %d fwd", page), e.queryAll(backend.QueryParams{Table: ref, PK: pk, Lower: lo, Upper: hi, Forward: true}, page), mid)
			e.wantKeys(fmt.Sprintf("bounded page %d back", page), e.queryAll(backend.QueryParams{Table: ref, PK: pk, Lower: lo, Upper: hi, Forward: false}, page), reversed(mid))
		}
	}
	// More is false once nothing remains; a cursor at the last row yields
	// nothing.
	res, err := e.b.Query(e.ctx, backend.QueryParams{Table: ref, PK: pks[0], Forward: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.More || len(res.Rows) != len(sks) {
		t.Fatalf("full query: %d rows, More=%v", len(res.Rows), res.More)
	}
	last := res.Rows[len(res.Rows)-1]
	res, err = e.b.Query(e.ctx, backend.QueryParams{Table: ref, PK: pks[0], Forward: true, Limit: 10, After: &backend.Cursor{PK: last.PK, SK: last.SK}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 0 || res.More {
		t.Fatalf("after the last row: %d rows, More=%v", len(res.Rows), res.More)
	}
	// A missing partition is empty.
	res, err = e.b.Query(e.ctx, backend.QueryParams{Table: ref, PK: strKey("nope"), Forward: true, Limit: 10})
	if err != nil || len(res.Rows) != 0 || res.More {
		t.Fatalf("missing partition: %+v %v", res, err)
	}
}

func testScanSegments(e *env) {
	t := e.t
	ref := e.createTable("segs")
	href := e.createTable("hsegs")
	type key struct{ pk, sk string }
	want := map[key]bool{}
	hwant := map[key]bool{}
	for i := range 50 {
		pk := numKey(strconv.Itoa(i*7 - 100))
		for j := range 4 {
			sk := []byte{byte(j), 0xFF}
			e.put(ref, pk, sk, itemOf(pk, sk, ""))
			want[key{string(pk), string(sk)}] = true
		}
	}
	for i := range 150 {
		pk := []byte(fmt.Sprintf("h%03d", i))
		e.put(href, pk, nil, itemOf(pk, nil, ""))
		hwant[key{string(pk), ""}] = true
	}
	for _, tc := range []struct {
		ref  backend.TableRef
		want map[key]bool
	}{{ref, want}, {href, hwant}} {
		for _, total := range []int{1, 2, 3, 4, 7} {
			for _, page := range []int{1, 5, 1000} {
				if page == 1 && total > 3 {
					continue
				}
				seen := map[key]int{}
				for seg := range max(total, 1) {
					rows := e.scanAll(backend.ScanParams{Table: tc.ref, Segment: seg, TotalSegments: total}, page)
					checkScanOrder(e, rows)
					lo, hi := backend.SegmentRange(seg, total)
					for _, r := range rows {
						if h := backend.KeyHash(r.PK); h < lo || h > hi {
							t.Fatalf("segment %d/%d returned hash %08x outside [%08x, %08x]", seg, total, h, lo, hi)
						}
						if !bytes.Equal(r.Item, itemOf(r.PK, r.SK, "")) && !(len(r.SK) == 0 && bytes.Equal(r.Item, itemOf(r.PK, nil, ""))) {
							t.Fatalf("row item %q does not match its keys", r.Item)
						}
						seen[key{string(r.PK), string(r.SK)}]++
					}
				}
				if len(seen) != len(tc.want) {
					t.Fatalf("%d segments page %d: %d distinct items, want %d", total, page, len(seen), len(tc.want))
				}
				for k, n := range seen {
					if n != 1 || !tc.want[k] {
						t.Fatalf("%d segments page %d: item %x/%x seen %d times (expected=%v)", total, page, k.pk, k.sk, n, tc.want[k])
					}
				}
			}
		}
	}
}
