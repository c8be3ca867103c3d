package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPipeStatements: the write path's pipeline commits every statement
// at its Sync or none; a failed statement rolls back those before it and
// leaves the connection idle and usable; arguments that do not match the
// parameters' types are refused before anything is sent.
func TestPipeStatements(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	ref := createTable(t, b, "pipeline")
	ctx := t.Context()
	c, err := b.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	conn := c.Conn()
	pk := func(s string) []byte { return []byte(s) }
	item := func(k string) []byte {
		var it []byte
		err := conn.QueryRow(ctx, `SELECT item FROM items WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4`,
			ref.ID, hashOf(pk(k)), pk(k), empty).Scan(&it)
		if err != nil {
			return nil
		}
		return it
	}
	ins := func(k, v string) specStmt {
		return specStmt{sqlInsItem, []any{ref.ID, hashOf(pk(k)), pk(k), empty, []byte(v)}}
	}

	// All statements succeed: committed at the Sync.
	last, err := pipeStatements(ctx, conn, []specStmt{
		{sqlLockKey, []any{lockKey(ref.ID, pk("a"), empty)}},
		{sqlSpecFence, []any{ref.ID, ref.Version}},
		ins("a", "1"),
		{sqlPutIdx, []any{ref.ID, "gsi", hashOf(pk("x")), pk("x"), empty, pk("a"), empty, []byte("1"), int64(1)}},
	})
	if err != nil || !last {
		t.Fatalf("pipeline: lastDone %v err %v", last, err)
	}
	if got := item("a"); string(got) != "1" {
		t.Fatalf("item a = %q after the pipeline", got)
	}

	// A statement fails (the item exists): the insert before it is rolled
	// back, the rest skipped, the connection idle.
	last, err = pipeStatements(ctx, conn, []specStmt{
		ins("b", "2"),
		{sqlSpecAbsent, []any{ref.ID, hashOf(pk("a")), pk("a"), empty}},
		ins("c", "3"),
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" || last {
		t.Fatalf("refused pipeline: lastDone %v err %v, want division by zero", last, err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' {
		t.Fatalf("transaction status %q after a refused pipeline", st)
	}
	if item("b") != nil || item("c") != nil {
		t.Fatal("a refused pipeline wrote")
	}

	// The connection serves the next pipeline.
	if last, err := pipeStatements(ctx, conn, []specStmt{ins("d", "4")}); err != nil || !last {
		t.Fatalf("after a refusal: lastDone %v err %v", last, err)
	}
	if got := item("d"); string(got) != "4" {
		t.Fatalf("item d = %q", got)
	}

	// Arguments of the wrong type or number: nothing is sent.
	for _, bad := range [][]specStmt{
		{ins("e", "5"), {sqlLockKey, []any{"not a bigint"}}},
		{ins("e", "5"), {sqlLockKey, []any{int32(1)}}},
		{ins("e", "5"), {sqlLockKey, []any{int64(1), int64(2)}}},
	} {
		last, err := pipeStatements(ctx, conn, bad)
		var ns errNotSent
		if !errors.As(err, &ns) || last {
			t.Fatalf("bad arguments: lastDone %v err %v, want errNotSent", last, err)
		}
		if conn.IsClosed() || conn.PgConn().TxStatus() != 'I' {
			t.Fatal("bad arguments left the connection unusable")
		}
	}
	if item("e") != nil {
		t.Fatal("a pipeline refused before sending wrote")
	}
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("connection after the refusals: %v", err)
	}
}
