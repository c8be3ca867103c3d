package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// TestChangeLogReopen: records survive closing and reopening the file.
func TestChangeLogReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	backendtest.ChangeLogReopen(t, func(t *testing.T) backend.Backend {
		b, err := Open(context.Background(), Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return backend.Checked(b, func(err error) { t.Error(err) })
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
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	put := func(b *Backend, k string) {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("v"), Log: []byte(k)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		put(b, k)
	}
	info, err := b.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil || info.Count != 3 {
		t.Fatalf("LogInfo %+v %v", info, err)
	}
	if tr, err := b.TrimLog(ctx, backend.TrimLogParams{Table: ref, Before: time.Now().Add(time.Hour)}); err != nil || tr.Removed != 3 {
		t.Fatalf("TrimLog %+v %v", tr, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openT(t, Options{Path: path})
	got, err := b.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil || got.First != 0 || got.Count != 0 || got.Last != info.Last {
		t.Fatalf("LogInfo after trim and reopen %+v %v, want Last %d", got, err, info.Last)
	}
	put(b, "d")
	rl, err := b.ReadLog(ctx, backend.ReadLogParams{Table: ref, Limit: 10})
	if err != nil || len(rl.Records) != 1 || rl.Records[0].Seq <= info.Last {
		t.Fatalf("ReadLog after reopen %+v %v (last before %d)", rl, err, info.Last)
	}
}

// TestChangeLogSeqsConsecutive: a canceled transaction (savepoint rolled
// back) leaves no gap, so LogInfo's Count (Last - First + 1) stays exact.
func TestChangeLogSeqsConsecutive(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{Memory: true})
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	put := func(k string) backend.WriteItemParams {
		return backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("v"), Log: []byte(k)}, nil
		}}
	}
	failing := backend.WriteItemParams{Table: ref, PK: []byte("f"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{}, errors.New("condition")
	}}
	if _, err := b.WriteItem(ctx, put("a")); err != nil {
		t.Fatal(err)
	}
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{put("b"), put("c"), failing}})
	if !backend.IsKind(err, backend.KindTransactionCanceled) {
		t.Fatalf("canceled transaction: %v", err)
	}
	if _, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{put("d"), put("e")}}); err != nil {
		t.Fatal(err)
	}
	rl, err := b.ReadLog(ctx, backend.ReadLogParams{Table: ref, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range rl.Records {
		got = append(got, r.Seq)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("Seqs %v, want [1 2 3]", got)
	}
	if info, err := b.LogInfo(ctx, backend.LogInfoParams{Table: ref}); err != nil || info.Count != 3 || info.First != 1 || info.Last != 3 {
		t.Fatalf("LogInfo %+v %v", info, err)
	}
}
