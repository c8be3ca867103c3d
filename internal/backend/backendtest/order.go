package backendtest

import (
	"bytes"
	"cmp"
	"math/big"
	"math/rand/v2"
	"slices"

	"github.com/extenddb/extenddb/internal/backend"
)

// Strings whose UTF-8 byte order (DynamoDB's order, equal to code point
// order) differs from locale, case-insensitive and UTF-16 order, with NUL
// bytes inside.
var orderStrings = []string{
	"a", "Z", "A", "z", "é", "e", "f", "ä", "ÿ", "Ā", "中", " ", "~", "0", "9",
	"\x00", "\x01", "a\x00", "a\x00b", "a\x00\x00", "ab", "aa", "a\x01",
	"\uD7FF", "\uE000", "\uFFFD", "\uFFFC", "\uFFFF", "\U00010000", "\U0001F600", "\U0010FFFF",
	"\u00e9\u0301", "Ω", "ω",
}

// Numbers whose text order differs from numeric order: negative,
// fractional, tiny, huge and 38-digit.
var orderNumbers = []string{
	"-1E+125", "-9.9999999999999999999999999999999999999E+125",
	"-99999999999999999999999999999999999999", "-12345678901234567890123456789012345678",
	"-1000", "-100", "-99.5", "-10", "-9", "-1.5", "-1", "-0.5", "-0.05", "-0.0000001", "-1E-130",
	"0", "1E-130", "0.0000001", "0.05", "0.5", "1", "1.0000000000000000000000000000000000001", "1.5", "2", "9",
	"10", "10.5", "99.5", "100", "101", "1000", "1E+3", "12345678901234567890123456789012345678",
	"99999999999999999999999999999999999999", "1E+38", "1E+125", "9.9999999999999999999999999999999999999E+125",
	"0.12345678901234567890123456789012345678", "123456789012345678.90123456789012345678",
}

var orderBinaries = [][]byte{
	{0x00}, {0x00, 0x00}, {0x00, 0xFF}, {0x01}, {0x01, 0x02}, {0x01, 0x02, 0x03}, {0x7F}, {0x80},
	{0xFE}, {0xFE, 0xFF}, {0xFF}, {0xFF, 0x00}, {0xFF, 0xFF}, {0xFF, 0xFF, 0xFF}, {0x00, 0x01, 0x00},
}

func compareCodePoints(a, b string) int {
	return slices.Compare([]rune(a), []rune(b))
}

func numRat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("big.Rat cannot parse " + s)
	}
	return r
}

type sortCase struct {
	key  []byte
	name string
}

// sortKeys returns the sort keys of values in the independently computed
// expected order (code points, exact rationals, bytes), with duplicates
// (numbers equal in value) removed.
func stringCases() []sortCase {
	s := slices.Clone(orderStrings)
	slices.SortFunc(s, compareCodePoints)
	s = slices.Compact(s)
	out := make([]sortCase, len(s))
	for i, v := range s {
		out[i] = sortCase{strKey(v), v}
	}
	return out
}

func numberCases() []sortCase {
	s := slices.Clone(orderNumbers)
	slices.SortFunc(s, func(a, b string) int { return numRat(a).Cmp(numRat(b)) })
	s = slices.CompactFunc(s, func(a, b string) bool { return numRat(a).Cmp(numRat(b)) == 0 })
	out := make([]sortCase, len(s))
	for i, v := range s {
		out[i] = sortCase{numKey(v), v}
	}
	return out
}

func binaryCases() []sortCase {
	s := slices.Clone(orderBinaries)
	slices.SortFunc(s, bytes.Compare)
	out := make([]sortCase, len(s))
	for i, v := range s {
		out[i] = sortCase{v, ""}
	}
	return out
}

func (e *env) checkSortOrder(base string, cases []sortCase) {
	t := e.t
	ref := e.createTable(base)
	pk := strKey("partition")
	// Neighbour partitions with the same sort keys must not leak in.
	neighbours := [][]byte{strKey("partitio"), strKey("partition\x00"), strKey("partitioo")}
	for _, i := range rand.Perm(len(cases)) {
		e.put(ref, pk, cases[i].key, itemOf(pk, cases[i].key, cases[i].name))
		for _, n := range neighbours {
			e.put(ref, n, cases[i].key, itemOf(n, cases[i].key, cases[i].name))
		}
	}
	want := make([]kv, len(cases))
	for i, c := range cases {
		want[i] = kv{pk, c.key}
	}
	for _, page := range []int{1000, 4} {
		fwd := e.queryAll(backend.QueryParams{Table: ref, PK: pk, Forward: true}, page)
		e.wantKeys(base+" query forward", fwd, want)
		for i, r := range fwd {
			if !bytes.Equal(r.Item, itemOf(pk, cases[i].key, cases[i].name)) {
				t.Fatalf("row %d item %q", i, r.Item)
			}
		}
		back := e.queryAll(backend.QueryParams{Table: ref, PK: pk, Forward: false}, page)
		e.wantKeys(base+" query backward", back, reversed(want))
	}
	// Scan: (hash, pk, sk) order, so each partition's sort keys in order.
	rows := e.scanAll(backend.ScanParams{Table: ref}, 7)
	if len(rows) != len(cases)*(1+len(neighbours)) {
		t.Fatalf("scan found %d rows, want %d", len(rows), len(cases)*(1+len(neighbours)))
	}
	checkScanOrder(e, rows)
	var mine []backend.Row
	for _, r := range rows {
		if bytes.Equal(r.PK, pk) {
			mine = append(mine, r)
		}
	}
	e.wantKeys(base+" scan", mine, want)
}

// checkScanOrder checks that rows are in strictly ascending
// (KeyHash(pk), pk, sk) order.
func checkScanOrder(e *env, rows []backend.Row) {
	e.t.Helper()
	for i := 1; i < len(rows); i++ {
		if scanCmp(rows[i-1], rows[i]) >= 0 {
			e.t.Fatalf("scan order broken at %d: %x/%x then %x/%x", i, rows[i-1].PK, rows[i-1].SK, rows[i].PK, rows[i].SK)
		}
	}
}

func scanCmp(a, b backend.Row) int {
	return cmp.Or(
		cmp.Compare(backend.KeyHash(a.PK), backend.KeyHash(b.PK)),
		bytes.Compare(a.PK, b.PK),
		bytes.Compare(a.SK, b.SK),
		bytes.Compare(a.BasePK, b.BasePK),
		bytes.Compare(a.BaseSK, b.BaseSK),
	)
}

func testOrderString(e *env) { e.checkSortOrder("ordS", stringCases()) }
func testOrderNumber(e *env) { e.checkSortOrder("ordN", numberCases()) }
func testOrderBinary(e *env) { e.checkSortOrder("ordB", binaryCases()) }

// testOrderHashOnly: hash-only tables of S, N and B partition keys scan in
// (KeyHash(pk), pk) order, every key found exactly once, every key
// readable.
func testOrderHashOnly(e *env) {
	t := e.t
	for _, shape := range []struct {
		base  string
		cases []sortCase
	}{{"hS", stringCases()}, {"hN", numberCases()}, {"hB", binaryCases()}} {
		ref := e.createTable(shape.base)
		for _, i := range rand.Perm(len(shape.cases)) {
			c := shape.cases[i]
			e.put(ref, c.key, nil, itemOf(c.key, nil, c.name))
		}
		want := make([]kv, len(shape.cases))
		for i, c := range shape.cases {
			want[i] = kv{c.key, []byte{}}
		}
		slices.SortFunc(want, func(a, b kv) int {
			return cmp.Or(cmp.Compare(backend.KeyHash(a.pk), backend.KeyHash(b.pk)), bytes.Compare(a.pk, b.pk))
		})
		for _, page := range []int{1000, 3} {
			rows := e.scanAll(backend.ScanParams{Table: ref}, page)
			got := keysOf(rows)
			for i := range got {
				got[i].sk = []byte{}
				if len(rows[i].SK) != 0 {
					t.Fatalf("%s: hash-only row has sort key %x", shape.base, rows[i].SK)
				}
			}
			if !sameKeys(got, want) {
				t.Fatalf("%s scan:\n got  %s\n want %s", shape.base, fmtKeys(got), fmtKeys(want))
			}
		}
		for _, c := range shape.cases {
			if got := e.get(ref, c.key, nil); !bytes.Equal(got, itemOf(c.key, nil, c.name)) {
				t.Fatalf("%s: get %x = %q", shape.base, c.key, got)
			}
			// A single-partition query of a hash-only table finds the item.
			q := e.queryAll(backend.QueryParams{Table: ref, PK: c.key, Forward: true}, 10)
			if len(q) != 1 || !bytes.Equal(q[0].PK, c.key) || len(q[0].SK) != 0 {
				t.Fatalf("%s: query %x = %d rows", shape.base, c.key, len(q))
			}
		}
	}
	// Sanity of the generator: numbers equal in value are one key.
	if !bytes.Equal(numKey("1E+3"), numKey("1000")) || !bytes.Equal(numKey("5"), numKey("5.0")) {
		t.Fatal("attr number keys are not normalized")
	}
}
