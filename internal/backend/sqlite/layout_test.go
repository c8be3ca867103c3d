package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/migrations"
)

// TestItemsOutsideKeyBTree: items and index entries are rows of rowid
// tables, and the B-trees that are searched by key (items_key, idx_key)
// hold the keys only. In a WITHOUT ROWID table the whole row is the key
// of the searched B-tree: a 1 KiB item overflows its 4 KiB page and every
// comparison of a search reads the overflow page (ADR 0022).
func TestItemsOutsideKeyBTree(t *testing.T) {
	b := openT(t, Options{Path: filepath.Join(t.TempDir(), "db.sqlite")})
	ctx := context.Background()
	for _, tc := range []struct {
		table, index string
		cols         []string
	}{
		{"items", "items_key", []string{"t", "h", "pk", "sk"}},
		{"idx", "idx_key", []string{"t", "ix", "h", "ipk", "isk", "pk", "sk"}},
	} {
		var ddl string
		if err := b.rdb.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, tc.table).Scan(&ddl); err != nil {
			t.Fatal(tc.table, err)
		}
		if strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
			t.Errorf("%s is a WITHOUT ROWID table: its items are part of the searched B-tree", tc.table)
		}
		var unique int
		err := b.rdb.QueryRowContext(ctx, `SELECT "unique" FROM pragma_index_list(?) WHERE name = ?`, tc.table, tc.index).Scan(&unique)
		if err != nil || unique != 1 {
			t.Errorf("%s: no unique index %s (%v)", tc.table, tc.index, err)
			continue
		}
		rows, err := b.rdb.QueryContext(ctx, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, tc.index)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for rows.Next() {
			var c string
			rows.Scan(&c)
			cols = append(cols, c)
		}
		rows.Close()
		if strings.Join(cols, ",") != strings.Join(tc.cols, ",") {
			t.Errorf("%s columns %v, want %v", tc.index, cols, tc.cols)
		}
	}
	// A point read is a search of the key index.
	if p := explainPlan(t, b, `SELECT item FROM items WHERE t = ? AND h = ? AND pk = ? AND sk = ?`, []any{1, 2, []byte("a"), []byte("b")}); p != "SEARCH items USING INDEX items_key (t=? AND h=? AND pk=? AND sk=?)" {
		t.Errorf("point read plan: %s", p)
	}
}

// TestMigrateToRowidItems: a database written with the WITHOUT ROWID
// layout (migrations 0001 and 0002) keeps its items and index entries
// through migrations 0003 (the change log) and 0004 (the rowid layout).
func TestMigrateToRowidItems(t *testing.T) {
	ctx := context.Background()
	old := fstest.MapFS{}
	for _, name := range []string{"0001_init.sql", "0002_backups.sql"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "migrations", "sqlite", name))
		if err != nil {
			t.Fatal(err)
		}
		old["sqlite/"+name] = &fstest.MapFile{Data: data}
	}
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	d := migrations.SQLite
	d.FS = old
	if _, err := migrations.Apply(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	item := bytes.Repeat([]byte("x"), 1500)
	pk := []byte("p")
	h := int64(backend.KeyHash(pk))
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tables(account, name, desc, version, created_at) VALUES ('a', 't', x'', 1, 0)`, nil},
		{`INSERT INTO items(t, h, pk, sk, item) VALUES (1, ?, ?, x'01', ?)`, []any{h, pk, item}},
		{`INSERT INTO items(t, h, pk, sk, item) VALUES (1, ?, ?, x'02', x'7b7d')`, []any{h, pk}},
		{`INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) VALUES (1, 'g', ?, ?, x'09', ?, x'01', ?)`, []any{h, pk, pk, item}},
	} {
		if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatal(q.sql, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	b := openT(t, Options{Path: path})
	ref := backend.TableRef{Account: "a", Name: "t", ID: 1, Version: 1}
	g, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: pk, SK: []byte{1}})
	if err != nil || !bytes.Equal(g.Item, item) {
		t.Fatalf("item after migration: %d bytes, %v", len(g.Item), err)
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, PK: pk, Forward: true})
	if err != nil || len(q.Rows) != 2 || string(q.Rows[1].Item) != "{}" {
		t.Fatalf("query after migration: %+v %v", q, err)
	}
	iq, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: pk, Forward: true})
	if err != nil || len(iq.Rows) != 1 || !bytes.Equal(iq.Rows[0].Item, item) || !bytes.Equal(iq.Rows[0].BaseSK, []byte{1}) {
		t.Fatalf("index query after migration: %+v %v", iq, err)
	}
	// Writes after the migration: a replace keeps one row per key.
	for range 2 {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: []byte{1}, Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("new"),
				PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: pk, SK: []byte{9}}, Item: []byte("new")}}}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := b.rdb.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM idx)`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows after two puts of one key: %d %v", n, err)
	}
}

// TestReputIndexEntryInPlace: an update that keeps an item's index key
// (DeleteIndex and PutIndex name the same entry, as the engine sends for
// every update of an indexed item) rewrites the entry in place: two row
// changes (item, entry), not a delete and an insert of the entry.
func TestReputIndexEntryInPlace(t *testing.T) {
	b := openT(t, Options{Path: filepath.Join(t.TempDir(), "db.sqlite")})
	ctx := context.Background()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	key := backend.IndexKey{Index: "g", PK: []byte("gp"), SK: []byte("gs")}
	put := func(item string) int64 {
		t.Helper()
		var n0, n1 int64
		err := b.submit(ctx, func(w *writer) error {
			if err := w.conn.QueryRowContext(bg, `SELECT total_changes()`).Scan(&n0); err != nil {
				return err
			}
			var res backend.WriteItemResult
			fnErr, err := w.writeItem(&backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func(old []byte) (backend.Change, error) {
				ch := backend.Change{Op: backend.Put, Item: []byte(item), PutIndex: []backend.IndexEntry{{IndexKey: key, Item: []byte(item)}}}
				if old != nil {
					ch.DeleteIndex = []backend.IndexKey{key}
				}
				return ch, nil
			}}, &res)
			if err == nil {
				err = fnErr
			}
			if err != nil {
				return err
			}
			return w.conn.QueryRowContext(bg, `SELECT total_changes()`).Scan(&n1)
		})
		if err != nil {
			t.Fatal(err)
		}
		return n1 - n0
	}
	if n := put("v1"); n != 2 {
		t.Fatalf("first put: %d row changes, want 2", n)
	}
	if n := put("v2"); n != 2 {
		t.Fatalf("update keeping the index key: %d row changes, want 2 (item and entry in place)", n)
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: key.PK, Forward: true})
	if err != nil || len(q.Rows) != 1 || string(q.Rows[0].Item) != "v2" {
		t.Fatalf("index after the update: %+v %v", q, err)
	}
}
