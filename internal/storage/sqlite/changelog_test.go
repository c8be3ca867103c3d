package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/storagetest"
)

// TestChangeLogReopen: records survive closing and reopening the file.
func TestChangeLogReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	storagetest.ChangeLogReopen(t, func(t *testing.T) storage.Backend {
		b, err := Open(context.Background(), Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return storage.Checked(b, func(err error) { t.Error(err) })
	})
}

// TestChangeLogTrimmedLastSurvivesReopen: after trimming every record
// and reopening, LogInfo still tells the last Seq and a new record gets a
// higher one (changelog_last).
func TestChangeLogTrimmedLastSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	b, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.CreateTable(ctx, storage.CreateTableParams{Account: "a", Name: "t", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	put := func(b *Backend, k string) {
		if _, err := b.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (storage.Change, error) {
			return storage.Change{Op: storage.Put, Item: []byte("v"), Log: []byte(k)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		put(b, k)
	}
	info, err := b.LogInfo(ctx, storage.LogInfoParams{Table: ref})
	if err != nil || info.Count != 3 {
		t.Fatalf("LogInfo %+v %v", info, err)
	}
	if tr, err := b.TrimLog(ctx, storage.TrimLogParams{Table: ref, Before: time.Now().Add(time.Hour)}); err != nil || tr.Removed != 3 {
		t.Fatalf("TrimLog %+v %v", tr, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openT(t, Options{Path: path})
	got, err := b.LogInfo(ctx, storage.LogInfoParams{Table: ref})
	if err != nil || got.First != 0 || got.Count != 0 || got.Last != info.Last {
		t.Fatalf("LogInfo after trim and reopen %+v %v, want Last %d", got, err, info.Last)
	}
	put(b, "d")
	rl, err := b.ReadLog(ctx, storage.ReadLogParams{Table: ref, Limit: 10})
	if err != nil || len(rl.Records) != 1 || rl.Records[0].Seq <= info.Last {
		t.Fatalf("ReadLog after reopen %+v %v (last before %d)", rl, err, info.Last)
	}
}
