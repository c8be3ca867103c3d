package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/extenddb/extenddb/internal/backend"
)

// BulkLoad (backend.BulkLoader, ADR 0032) loads a restore's batch in one
// round trip of three statements, run by PostgreSQL as one implicit
// transaction (one pipelined batch, one Sync):
//
//	the catalog fence: 1 / count(table row at the expected version FOR SHARE)
//	one INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO UPDATE of the items
//	one such INSERT of the index entries
//
// No advisory lock and no read: nobody writes a table that is being
// restored but its restore (ADR 0032 argues it), and the upserts make a
// load of keys that exist (a resumed restore, a stale owner racing its
// successor) replace them in place. Rows are sent in primary key order,
// so two loads of the same keys lock them in the same order (a deadlock,
// should one happen anyway, is retried like any conflict).
//
// A failed fence statement (division by zero) rolls everything back; one
// read of the catalog row then tells KindTableNotFound from
// KindTableVersion. A load is idempotent, so a connection lost at any
// point runs it again, also after its COMMIT may have been applied.
const (
	sqlBulkItems = `INSERT INTO items(t, h, pk, sk, item) SELECT $1, u.h, u.pk, u.sk, u.item
FROM unnest($2::bigint[], $3::bytea[], $4::bytea[], $5::bytea[]) AS u(h, pk, sk, item)
ON CONFLICT (t, h, pk, sk) DO UPDATE SET item = EXCLUDED.item`
	sqlBulkIdx = `INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) SELECT $1, u.ix, u.h, u.ipk, u.isk, u.pk, u.sk, u.item
FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::bytea[], $6::bytea[], $7::bytea[], $8::bytea[]) AS u(ix, h, ipk, isk, pk, sk, item)
ON CONFLICT (t, ix, h, ipk, isk, pk, sk) DO UPDATE SET item = EXCLUDED.item`
	sqlTableVersion = `SELECT version FROM tables WHERE id = $1`
)

type bulkRow struct {
	h      int64
	pk, sk []byte
	item   []byte
}

type bulkIdxRow struct {
	ix       string
	h        int64
	ipk, isk []byte
	pk, sk   []byte
	item     []byte
}

// BulkLoad implements backend.BulkLoader.
func (b *Backend) BulkLoad(ctx context.Context, p backend.BulkLoadParams) error {
	if b.rcache != nil {
		// A bulk load replaces items without the write path's per-key
		// invalidation: nothing cached may outlive it (ADR 0037).
		defer b.rcache.Clear()
	}
	ref := p.Table
	rows := make([]bulkRow, len(p.Items))
	var ixRows []bulkIdxRow
	for i := range p.Items {
		it := &p.Items[i]
		pk, sk := nz(it.PK), nz(it.SK)
		rows[i] = bulkRow{h: hashOf(pk), pk: pk, sk: sk, item: it.Change.Item}
		for _, e := range it.Change.PutIndex {
			ipk := nz(e.PK)
			ixRows = append(ixRows, bulkIdxRow{ix: e.Index, h: hashOf(ipk), ipk: ipk, isk: nz(e.SK), pk: pk, sk: sk, item: nz(e.Item)})
		}
	}
	slices.SortFunc(rows, func(a, b bulkRow) int {
		if a.h != b.h {
			return cmp.Compare(a.h, b.h)
		}
		if c := bytes.Compare(a.pk, b.pk); c != 0 {
			return c
		}
		return bytes.Compare(a.sk, b.sk)
	})
	slices.SortFunc(ixRows, func(a, b bulkIdxRow) int {
		if a.ix != b.ix {
			return cmp.Compare(a.ix, b.ix)
		}
		if a.h != b.h {
			return cmp.Compare(a.h, b.h)
		}
		for _, c := range [...]int{bytes.Compare(a.ipk, b.ipk), bytes.Compare(a.isk, b.isk), bytes.Compare(a.pk, b.pk)} {
			if c != 0 {
				return c
			}
		}
		return bytes.Compare(a.sk, b.sk)
	})
	batch := func() *pgx.Batch {
		bt := &pgx.Batch{}
		bt.Queue(sqlSpecFence, ref.ID, ref.Version)
		// Written without reading what it replaces: the table's
		// statistics are unknown until a recount (counts.go).
		bt.Queue(sqlStatBulk, ref.ID)
		if len(rows) > 0 {
			hs, pks, sks, items := make([]int64, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows))
			for i, r := range rows {
				hs[i], pks[i], sks[i], items[i] = r.h, r.pk, r.sk, r.item
			}
			bt.Queue(sqlBulkItems, ref.ID, hs, pks, sks, items)
		}
		if n := len(ixRows); n > 0 {
			ixs, hs := make([]string, n), make([]int64, n)
			ipks, isks, pks, sks, items := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
			for i, r := range ixRows {
				ixs[i], hs[i], ipks[i], isks[i], pks[i], sks[i], items[i] = r.ix, r.h, r.ipk, r.isk, r.pk, r.sk, r.item
			}
			bt.Queue(sqlBulkIdx, ref.ID, ixs, hs, ipks, isks, pks, sks, items)
		}
		return bt
	}
	err := b.run(ctx, "postgres: bulk load", func() *attemptErr {
		c, err := b.acquire(ctx)
		if err != nil {
			return &attemptErr{err: err, retry: retryableBeforeCommit(err)}
		}
		defer c.Release()
		err = c.SendBatch(ctx, batch()).Close()
		if err == nil {
			return nil
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Severity == "ERROR" {
			// A statement failed: the implicit transaction rolled back
			// at the Sync, nothing was written.
			if !c.Conn().IsClosed() && c.Conn().PgConn().TxStatus() != 'I' {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if _, rerr := c.Exec(rctx, "ROLLBACK"); rerr != nil {
					c.Conn().Close(rctx)
				}
				cancel()
			}
			if pe.Code == "22012" { // the fence
				var v int64
				ferr := c.QueryRow(ctx, sqlTableVersion, ref.ID).Scan(&v)
				switch {
				case errors.Is(ferr, pgx.ErrNoRows):
					return &attemptErr{err: tableNotFound(ref)}
				case ferr != nil:
					return &attemptErr{err: ferr, retry: retryableBeforeCommit(ferr)}
				case v != ref.Version:
					return &attemptErr{err: backend.VersionChanged(ref, v)}
				}
				return &attemptErr{err: err, retry: true} // moved and back: cannot happen (versions grow)
			}
			return &attemptErr{err: err, retry: isConflict(err)}
		}
		// The connection failed, maybe after the COMMIT: the load is
		// idempotent, so it runs again either way.
		return &attemptErr{err: err, retry: isConnErr(err) && ctx.Err() == nil}
	})
	if err != nil {
		return err
	}
	if b.guess != nil {
		// The guesses of these keys are stale: forgotten (a miss guesses
		// "absent", which the database refuses, never a wrong write).
		for i := range rows {
			b.guessSet(guessKey(ref.ID, rows[i].pk, rows[i].sk), nil)
		}
	}
	return nil
}

var _ backend.BulkLoader = (*Backend)(nil)
