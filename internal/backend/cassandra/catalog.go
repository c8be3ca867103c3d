package cassandra

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// tableRow is a row of the tables catalog.
type tableRow struct {
	id, version    int64
	account, name  string
	desc           []byte
	createdAt      time.Time
	pendingDesc    []byte
	pendingVersion *int64
	// The snapshot fence (snapshot.go): the committed counter, an open in
	// progress and its heartbeat, the open epochs with their expiry, and
	// the coordinator's clock when the row was read (ms).
	sf          *int64
	pendingSF   *int64
	pendingSFAt *int64
	snaps       map[int64]time.Time
	dbNow       int64
	// dropped: the description version at which each index name was
	// last dropped (counts.go).
	dropped map[string]int64
}

func (r *tableRow) table() *backend.Table {
	return &backend.Table{Account: r.account, Name: r.name, ID: r.id, Desc: r.desc, Version: r.version, CreatedAt: r.createdAt}
}

// byID reads a table incarnation; nil when absent. The catalog changes
// only through LWTs, whose commits are quorum writes, so a quorum read sees
// every change whose LWT has returned; an LWT still in progress is ordered
// after the read (the fence argument of ADR 0016 needs no more).
func (b *Backend) byID(ctx context.Context, id int64) (*tableRow, error) {
	r := &tableRow{id: id}
	err := b.quorum(ctx, `SELECT account, name, descr, version, created_at, pending_descr, pending_version, sf, pending_sf, pending_sf_at, snaps, toUnixTimestamp(now()), dropped FROM tables WHERE id = ?`, id).
		Scan(&r.account, &r.name, &r.desc, &r.version, &r.createdAt, &r.pendingDesc, &r.pendingVersion, &r.sf, &r.pendingSF, &r.pendingSFAt, &r.snaps, &r.dbNow, &r.dropped)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, "read table")
	}
	return r, nil
}

// byName resolves a name to its live incarnation; nil when absent.
func (b *Backend) byName(ctx context.Context, account, name string) (*tableRow, error) {
	var id int64
	err := b.quorum(ctx, `SELECT id FROM tables_by_name WHERE account = ? AND name = ?`, account, name).Scan(&id)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, "read table name")
	}
	r, err := b.byID(ctx, id)
	if err != nil || r != nil {
		return r, err
	}
	// A name whose incarnation is gone (a DeleteTable that died between
	// its two steps): the table is absent; tidy the name row.
	_, _ = b.query(ctx, `DELETE FROM tables_by_name WHERE account = ? AND name = ? IF id = ?`, account, name, id).MapScanCAS(map[string]any{})
	return nil, nil
}

func (b *Backend) CreateTable(ctx context.Context, p backend.CreateTableParams) (*backend.CreateTableResult, error) {
	id := rand.Int64N(1<<62) + 1
	now := time.Now().UTC().Truncate(time.Millisecond)
	// The incarnation first (unreachable until the name points at it).
	if applied, err := b.query(ctx, `INSERT INTO tables (id, account, name, descr, version, created_at) VALUES (?, ?, ?, ?, 1, ?) IF NOT EXISTS`,
		id, p.Account, p.Name, p.Desc, now).MapScanCAS(map[string]any{}); err != nil || !applied {
		if err == nil {
			err = errors.New("table id collision")
		}
		return nil, mapErr(err, "create table")
	}
	// Its statistics (zero) before it is reachable.
	if err := b.startFigures(ctx, id); err != nil {
		return nil, err
	}
	for {
		m := map[string]any{}
		applied, err := b.query(ctx, `INSERT INTO tables_by_name (account, name, id) VALUES (?, ?, ?) IF NOT EXISTS`, p.Account, p.Name, id).MapScanCAS(m)
		if err != nil {
			return nil, mapErr(err, "create table name")
		}
		if applied {
			break
		}
		old, _ := m["id"].(int64)
		live, err := b.byID(ctx, old)
		if err != nil {
			return nil, err
		}
		if live != nil {
			_ = b.query(ctx, `DELETE FROM tables WHERE id = ?`, id).Exec()
			return nil, backend.Errorf(backend.KindTableExists, "table %q exists", p.Name)
		}
		// A stale name row: take it over.
		if ok, err := b.query(ctx, `UPDATE tables_by_name SET id = ? WHERE account = ? AND name = ? IF id = ?`, id, p.Account, p.Name, old).MapScanCAS(map[string]any{}); err != nil {
			return nil, mapErr(err, "create table name")
		} else if ok {
			break
		}
	}
	return &backend.CreateTableResult{Table: &backend.Table{Account: p.Account, Name: p.Name, ID: id, Desc: p.Desc, Version: 1, CreatedAt: now}}, nil
}

func (b *Backend) GetTable(ctx context.Context, p backend.GetTableParams) (*backend.GetTableResult, error) {
	r, err := b.byName(ctx, p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", p.Name)
	}
	return &backend.GetTableResult{Table: r.table()}, nil
}

func (b *Backend) ListTables(ctx context.Context, p backend.ListTablesParams) (*backend.ListTablesResult, error) {
	q := b.query(ctx, `SELECT name FROM tables_by_name WHERE account = ? AND name > ?`, p.Account, p.StartAfter)
	if p.Limit > 0 {
		q = b.query(ctx, `SELECT name FROM tables_by_name WHERE account = ? AND name > ? LIMIT ?`, p.Account, p.StartAfter, p.Limit)
	}
	iter := q.Iter()
	out := []string{}
	var n string
	for iter.Scan(&n) {
		out = append(out, n)
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "list tables")
	}
	return &backend.ListTablesResult{Names: out}, nil
}

// UpdateTable runs Fn on the current description and installs its result
// in two steps (ADR 0016): the new description is recorded as pending
// with an LWT on the catalog row's version; every item partition is then
// fenced at the new version; only then does the pending description
// become current. Any writer or UpdateTable that meets a pending
// description finishes it (it is a pure value, so finishing is safe from
// anywhere).
func (b *Backend) UpdateTable(ctx context.Context, p backend.UpdateTableParams) (*backend.UpdateTableResult, error) {
	for {
		r, err := b.byName(ctx, p.Account, p.Name)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", p.Name)
		}
		if r.pendingVersion != nil {
			if err := b.finishPending(ctx, r); err != nil {
				return nil, err
			}
			continue
		}
		desc, err := p.Fn(r.table())
		if err != nil {
			return nil, err
		}
		nv := r.version + 1
		applied, err := b.query(ctx, `UPDATE tables SET pending_descr = ?, pending_version = ? WHERE id = ? IF version = ? AND pending_version = null`,
			desc, nv, r.id, r.version).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, mapErr(err, "update table")
		}
		if !applied {
			continue // lost a race (or the table is gone): read again
		}
		r.pendingDesc, r.pendingVersion = desc, &nv
		if err := b.finishPending(ctx, r); err != nil {
			return nil, err
		}
		t := r.table()
		t.Desc, t.Version = desc, nv
		return &backend.UpdateTableResult{Table: t}, nil
	}
}

// finishPending fences every item partition of the table at the pending
// version, then makes the pending description current. Idempotent.
func (b *Backend) finishPending(ctx context.Context, r *tableRow) error {
	pv := *r.pendingVersion
	err := b.eachPartition(ctx, r.id, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		return true, b.fencePartition(ctx, r.id, pk, pv)
	})
	if err != nil {
		return err
	}
	_, err = b.query(ctx, `UPDATE tables SET descr = ?, version = ?, pending_descr = null, pending_version = null WHERE id = ? IF pending_version = ?`,
		r.pendingDesc, pv, r.id, pv).MapScanCAS(map[string]any{})
	return mapErr(err, "commit table update")
}

// fencePartition raises the partition's fence to at least v. A partition
// with items locked by transactions (lks) is fenced only once they are
// settled, and the raise is conditioned on lks being empty: a
// transaction that locked an item at the old version either decides
// before the fence rises or fails to lock (ADR 0019).
func (b *Backend) fencePartition(ctx context.Context, t int64, pk []byte, v int64) error {
	for {
		var tv *int64
		var lks [][]byte
		err := b.serial(ctx, `SELECT tv, lks FROM items WHERE t = ? AND pk = ? LIMIT 1`, t, pk).Scan(&tv, &lks)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return mapErr(err, "read fence")
		}
		if tv != nil && *tv >= v {
			return nil
		}
		if len(lks) > 0 {
			if err := b.settleLocks(ctx, backend.TableRef{ID: t}, pk, lks); err != nil {
				return err
			}
			continue
		}
		applied, err := b.query(ctx, `UPDATE items SET tv = ? WHERE t = ? AND pk = ? IF tv = ? AND lks = null`, v, t, pk, tv).MapScanCAS(map[string]any{})
		if err != nil {
			return mapErr(err, "fence partition")
		}
		if applied {
			return nil
		}
	}
}

// liveFor checks a table incarnation for an item write fenced on
// ref.Version: KindTableNotFound when gone, KindTableVersion when the
// version differs. A pending UpdateTable is waited for (then finished
// here if its coordinator seems gone); so is a snapshot open in progress
// (snapshot.go).
func (b *Backend) liveFor(ctx context.Context, ref backend.TableRef) error {
	_, err := b.liveView(ctx, ref)
	return err
}

// liveView is liveFor; it returns the catalog row it checked, whose
// snapshot fence and open epochs the write must honour.
func (b *Backend) liveView(ctx context.Context, ref backend.TableRef) (*tableRow, error) {
	wait := 0
	deadline := time.Now().Add(2 * time.Second)
	for {
		r, err := b.byID(ctx, ref.ID)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", ref.Name)
		}
		if r.pendingVersion != nil {
			if time.Now().Before(deadline) {
				wait++
				if err := backend.Backoff(ctx, wait+2, pendingWaitCeiling); err != nil {
					return nil, mapErr(err, "wait for table update")
				}
				continue
			}
			if err := b.finishPending(ctx, r); err != nil {
				return nil, err
			}
			continue
		}
		if r.pendingSF != nil {
			if err := b.waitSnapshotOpen(ctx, r, &wait); err != nil {
				return nil, err
			}
			continue
		}
		if r.version != ref.Version {
			return nil, backend.VersionChanged(ref, r.version)
		}
		b.noteSF(r.id, val(r.sf))
		return r, nil
	}
}

// live checks that a table incarnation exists (reads).
func (b *Backend) live(ctx context.Context, ref backend.TableRef) error {
	var v int64
	err := b.query(ctx, `SELECT version FROM tables WHERE id = ?`, ref.ID).Scan(&v)
	if errors.Is(err, gocql.ErrNotFound) {
		return backend.Errorf(backend.KindTableNotFound, "table %q not found", ref.Name)
	}
	return mapErr(err, "read table")
}

// DeleteTable removes the incarnation (the authoritative step), then its
// name, then its data: only this table's partitions are touched, so other
// tables are never blocked.
func (b *Backend) DeleteTable(ctx context.Context, p backend.DeleteTableParams) (*backend.DeleteTableResult, error) {
	r, err := b.byName(ctx, p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", p.Name)
	}
	applied, err := b.query(ctx, `DELETE FROM tables WHERE id = ? IF EXISTS`, r.id).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, "delete table")
	}
	if !applied {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", p.Name)
	}
	if _, err := b.query(ctx, `DELETE FROM tables_by_name WHERE account = ? AND name = ? IF id = ?`, p.Account, p.Name, r.id).MapScanCAS(map[string]any{}); err != nil {
		return nil, mapErr(err, "delete table name")
	}
	if err := b.purge(ctx, r.id); err != nil {
		return nil, err
	}
	return &backend.DeleteTableResult{Table: r.table()}, nil
}

// purge deletes a dead table's data: item partitions (through the
// directory), the directory, index entries and index names.
func (b *Backend) purge(ctx context.Context, t int64) error {
	err := b.eachPartition(ctx, t, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		if err := b.query(ctx, `DELETE FROM log_marks WHERE t = ? AND pk = ?`, t, pk).Exec(); err != nil {
			return false, mapErr(err, "purge change log marks")
		}
		return true, mapErr(b.query(ctx, `DELETE FROM items WHERE t = ? AND pk = ?`, t, pk).Exec(), "purge items")
	})
	if err != nil {
		return err
	}
	if err := b.purgeLog(ctx, t); err != nil {
		return err
	}
	names, err := b.indexNames(ctx, t)
	if err != nil {
		return err
	}
	for bk := range buckets {
		for _, ix := range names {
			if err := b.query(ctx, `DELETE FROM index_entries WHERE t = ? AND idx = ? AND b = ?`, t, ix, bk).Exec(); err != nil {
				return mapErr(err, "purge index")
			}
		}
		if err := b.query(ctx, `DELETE FROM partitions WHERE t = ? AND b = ?`, t, bk).Exec(); err != nil {
			return mapErr(err, "purge directory")
		}
	}
	b.forget(t)
	if err := b.forgetFigures(ctx, t); err != nil {
		return err
	}
	return mapErr(b.query(ctx, `DELETE FROM index_names WHERE t = ?`, t).Exec(), "purge index names")
}

func (b *Backend) indexNames(ctx context.Context, t int64) ([]string, error) {
	iter := b.query(ctx, `SELECT idx FROM index_names WHERE t = ?`, t).Iter()
	var out []string
	var n string
	for iter.Scan(&n) {
		out = append(out, n)
	}
	return out, mapErr(iter.Close(), "index names")
}

// DropIndex removes every entry of one index, fenced on the table version.
// Each entry is deleted at its own write timestamp (the base item's
// version), so an entry a newer item version wrote is never removed.
func (b *Backend) DropIndex(ctx context.Context, p backend.DropIndexParams) (*backend.DropIndexResult, error) {
	if err := b.liveFor(ctx, p.Table); err != nil {
		return nil, err
	}
	t := p.Table.ID
	// Apply every outbox row first: a write that won its LWT before the
	// description changed may not have applied its entries yet. Entries
	// it applies later carry the timestamps deleted here (a tombstone wins
	// a tie), so they stay deleted.
	if _, err := b.drain(ctx, t); err != nil {
		return nil, err
	}
	// The index's statistics: entry sizes and deltas stamped at or below
	// this version are the dropped index's (counts.go).
	if _, err := b.query(ctx, `UPDATE tables SET dropped = dropped + ? WHERE id = ? IF EXISTS`,
		map[string]int64{p.Index: p.Table.Version}, t).MapScanCAS(map[string]any{}); err != nil {
		return nil, mapErr(err, "drop index")
	}
	for bk := range buckets {
		iter := b.query(ctx, `SELECT h, ipk, isk, bpk, bsk, writetime(item) FROM index_entries WHERE t = ? AND idx = ? AND b = ?`, t, p.Index, bk).PageSize(500).Iter()
		var h, wt int64
		var ipk, isk, bpk, bsk []byte
		for iter.Scan(&h, &ipk, &isk, &bpk, &bsk, &wt) {
			if err := b.query(ctx, `DELETE FROM index_entries USING TIMESTAMP ? WHERE t = ? AND idx = ? AND b = ? AND h = ? AND ipk = ? AND isk = ? AND bpk = ? AND bsk = ?`,
				wt, t, p.Index, bk, h, skOf(ipk), skOf(isk), skOf(bpk), skOf(bsk)).Exec(); err != nil {
				iter.Close()
				return nil, mapErr(err, "drop index")
			}
		}
		if err := iter.Close(); err != nil {
			return nil, mapErr(err, "drop index")
		}
	}
	return &backend.DropIndexResult{}, nil
}
