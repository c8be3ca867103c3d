package backup

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/sqlite"
	"github.com/extenddb/extenddb/internal/store/memstore"
)

// testRestorer stands in for the engine's index rules in these tests:
// items are put by their key, without index entries.
type testRestorer struct{ descJSON }

func (testRestorer) ItemLoader(t *storage.Table) (func(item []byte) (pk, sk []byte, ch storage.Change, err error), error) {
	return func(item []byte) ([]byte, []byte, storage.Change, error) {
		it, err := attr.DecodeItem(item)
		if err != nil {
			return nil, nil, storage.Change{}, err
		}
		pk, _ := attr.KeyBytes(it["pk"])
		sk, _ := attr.KeyBytes(it["sk"])
		return pk, sk, storage.Change{Op: storage.Put, Item: item}, nil
	}, nil
}

func (testRestorer) IsRestoreTarget(t *storage.Table, arn string) bool { return true }

func (testRestorer) FinishRestore(t *storage.Table) ([]byte, error) {
	return append([]byte(nil), t.Desc...), nil
}

// countingBackend counts the item batches written.
type countingBackend struct {
	*sqlite.Backend
	writes atomic.Int64
}

func (c *countingBackend) TransactWrite(ctx context.Context, p storage.TransactWriteParams) (*storage.TransactWriteResult, error) {
	c.writes.Add(1)
	return c.Backend.TransactWrite(ctx, p)
}

// TestRestoreRefusesAnyFlippedByte: a flipped byte in any object of the
// backup (sidecar, manifest, AWS export manifests, data files) fails the
// restore before its first write, and
// the target is removed; the intact backup restores every item.
func TestRestoreRefusesAnyFlippedByte(t *testing.T) {
	raw, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir() + "/db.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	b := &countingBackend{Backend: raw}
	ref := createTable(t, b, "src")
	for i := range 500 {
		put(t, b, ref, i, "v")
	}
	st := memstore.New()
	m := newManager(t, b, st, func(c *Config) { c.Restorer = testRestorer{}; c.SpoolDir = t.TempDir() })
	rec, err := m.CreateBackup(t.Context(), account, "src", "flip")
	if err != nil {
		t.Fatal(err)
	}
	bk := *waitStatus(t, m, rec.ARN, storage.BackupAvailable)
	objs, err := st.List(t.Context(), bk.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	restore := func(name string) (*storage.Table, error) {
		create := func(ctx context.Context) (*storage.Table, error) {
			res, err := b.CreateTable(ctx, storage.CreateTableParams{Account: account, Name: name, Desc: []byte(`{"restoring":true}`)})
			if err != nil {
				return nil, err
			}
			return res.Table, nil
		}
		if err := m.RestoreTable(t.Context(), bk, account, name, create); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(20 * time.Second)
		for m.RestoringFrom(bk.ARN) {
			if time.Now().After(deadline) {
				t.Fatal("restore does not end")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cur, err := b.GetTable(t.Context(), storage.GetTableParams{Account: account, Name: name})
		if err != nil {
			return nil, err
		}
		return cur.Table, nil
	}
	checked := 0
	for i, o := range objs {
		rc, err := st.Get(t.Context(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		orig, _ := io.ReadAll(rc)
		rc.Close()
		bad := append([]byte(nil), orig...)
		bad[len(bad)/2] ^= 0x01
		if err := st.Put(t.Context(), o.Key, strings.NewReader(string(bad))); err != nil {
			t.Fatal(err)
		}
		before := b.writes.Load()
		name := "dst" + string(rune('a'+i))
		_, err = restore(name)
		// A failed job stops counting as using the backup just before it
		// removes its target (so a backend that deletes slowly does not
		// hold the backup): the removal may still be under way.
		for wait := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
			_, err = b.GetTable(t.Context(), storage.GetTableParams{Account: account, Name: name})
		}
		if !storage.IsKind(err, storage.KindTableNotFound) {
			t.Fatalf("flipped byte in %s: the target is still there (%v)", o.Key, err)
		}
		if b.writes.Load() != before {
			t.Fatalf("flipped byte in %s: %d batches were written before the failure", o.Key, b.writes.Load()-before)
		}
		if err := st.Put(t.Context(), o.Key, strings.NewReader(string(orig))); err != nil {
			t.Fatal(err)
		}
		checked++
	}
	if checked < 5 { // data, manifest-files.json, manifest-summary.json, manifest, sidecar
		t.Fatalf("only %d objects checked", checked)
	}
	tbl, err := restore("good")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var after *storage.Cursor
	for {
		res, err := b.Scan(t.Context(), storage.ScanParams{Table: tbl.Ref(), After: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n += len(res.Rows)
		if !res.More || len(res.Rows) == 0 {
			break
		}
		last := res.Rows[len(res.Rows)-1]
		after = &storage.Cursor{PK: last.PK, SK: last.SK, BasePK: last.BasePK, BaseSK: last.BaseSK}
	}
	if n != 500 {
		t.Fatalf("restored %d items, want 500", n)
	}
}
