package sqlutil

import (
	"bytes"
	"testing"
)

func TestRowBufferLayouts(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	// Table query: sk, item under a fixed pk.
	rb := NewRowBuffer(b("P"), false, 2)
	rb.Add(b("s1"), b("i1"))
	rb.Add(b("s2"), b("i2"))
	rows := rb.Rows()
	if len(rows) != 2 || string(rows[1].PK) != "P" || string(rows[1].SK) != "s2" || string(rows[1].Item) != "i2" ||
		!bytes.Equal(rows[0].BasePK, rows[0].PK) || !bytes.Equal(rows[0].BaseSK, rows[0].SK) {
		t.Fatalf("table query rows %+v", rows)
	}
	// Index scan: ipk, isk, pk, sk, item.
	rb = NewRowBuffer(nil, true, 0)
	if rb.Columns() != 5 {
		t.Fatalf("columns %d", rb.Columns())
	}
	rb.Add(b("ip"), b("is"), b("p"), b(""), b("it"))
	r := rb.Rows()[0]
	if string(r.PK) != "ip" || string(r.SK) != "is" || string(r.BasePK) != "p" || len(r.BaseSK) != 0 || string(r.Item) != "it" {
		t.Fatalf("index scan row %+v", r)
	}
	// Appending to a row's slice must not overwrite its neighbour.
	rb = NewRowBuffer(nil, false, 0)
	rb.Add(b("a"), b("b"), b("c"))
	rb.Add(b("d"), b("e"), b("f"))
	rs := rb.Rows()
	_ = append(rs[0].PK, 'X')
	if string(rs[0].SK) != "b" {
		t.Fatal("rows share capacity")
	}
}

// TestSnapshotPages: a page built in an earlier page's memory (columns,
// offsets, rows) holds the new rows, and they read back as added.
func TestSnapshotPages(t *testing.T) {
	var p SnapshotPages
	first := p.Next()
	first.Reserve(1024)
	for range 3 {
		first.Add([]byte("old"), []byte("old"), []byte("old"))
	}
	oldRows := p.Rows(first)
	buf, ends := first.buf, first.ends

	rb := p.Next()
	rb.Add([]byte("pk1"), []byte("sk1"), []byte("item1"))
	rb.Add([]byte("pk2"), []byte(""), []byte("item2"))
	if &rb.buf[0] != &buf[0] || &rb.ends[0] != &ends[0] {
		t.Fatal("the earlier page's memory was not used")
	}
	rows := p.Rows(rb)
	if &rows[0] != &oldRows[0] {
		t.Fatal("the earlier page's rows were not reused")
	}
	if len(rows) != 2 || string(rows[0].PK) != "pk1" || string(rows[0].SK) != "sk1" || string(rows[0].Item) != "item1" ||
		string(rows[1].PK) != "pk2" || len(rows[1].SK) != 0 || string(rows[1].Item) != "item2" ||
		string(rows[1].BasePK) != "pk2" {
		t.Fatalf("rows %q", rows)
	}
	// Rows of a page larger than the earlier one's go to new memory.
	rb = p.Next()
	for range 4 {
		rb.Add([]byte("p"), []byte("s"), []byte("i"))
	}
	if rows := p.Rows(rb); len(rows) != 4 || string(rows[3].Item) != "i" {
		t.Fatalf("rows %q", rows)
	}
}
