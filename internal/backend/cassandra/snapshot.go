package cassandra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/snapepoch"
)

// The snapshot capability (backend.Snapshotter; ADR 0021 section 2):
// Cassandra has no snapshot read, so while a snapshot epoch is open every
// write keeps the item's pre-image for that epoch in the item's partition,
// in the item's conditional batch.
//
//   - The snapshot fence. The catalog row holds the table's counter sf;
//     every item partition holds, in its static sf, the value it was last
//     raised to; every item write and every transaction lock is an LWT
//     conditioned on the partition's sf as read. Opening epoch E = sf+1:
//     (1) record pending_sf = E with an LWT on the catalog row; (2) walk
//     the partition directory and raise every partition's sf to E (an LWT
//     per partition, after settling the transaction locks it holds, and
//     conditioned on it holding none); (3) commit: sf = E, snaps[E] =
//     expiry, conditioned on pending_sf = E and on the description version
//     read with the description the snapshot reports. The instant is the
//     commit.
//   - Why no write that does not know E lands after the instant: a writer
//     reads the catalog first (liveView). One that read it before (1)
//     and writes a partition listed in (2) either lands before that
//     partition was raised (so before the commit) or fails its LWT on sf,
//     reads the row again, finds sf above what it knows, and reads the
//     catalog again — waiting while the open is pending. A partition not
//     listed in (2) got its directory row after (1): its writer checks
//     the catalog again after the row (noteDir with the time of its
//     catalog read, which also covers a row another write of this process
//     created), and waits.
//   - Writers while E is open: the first write of an item after the
//     instant adds a kind-3 row (sk, seq = E) holding the item before the
//     write (ver 1) or "absent" (ver 0), INSERT ... IF NOT EXISTS in the
//     same conditional batch as the item (IF ver = <read>): exactly one
//     write records it, and it is the item as of the instant.
//   - Transactions: a lock (which leaves the item as it is) taken in a
//     partition raised by an open that has not committed is refused with
//     KindTransactionConflict, and a raise waits until the partition
//     holds no lock. So a transaction either is decided and released
//     everywhere before the instant, or takes every lock after it; its
//     commit (ReleaseItem) records pre-images like a write.
//   - The reader walks the directory; per partition it reads the item rows
//     (ghosts included) and then the partition's kind-3 rows of E: a
//     pre-image of E wins (absent: the item was created after the instant),
//     else the stored item is the item as of the instant. The kind-3 rows
//     are read after the item rows, so a write between the two reads
//     cannot hide: its pre-image is there. A locked row shows its stored
//     item (its transaction took the lock, hence commits, after the
//     instant).
//   - Closing deletes snaps[E] (LWT) and then the kind-3 rows of E,
//     partition by partition. A writer that read the catalog before the
//     close may still add one behind the sweep: such rows are never read
//     (epochs are never reused) and go with the next sweep of an expired
//     epoch or with the table. An epoch whose holder died expires after
//     snapshotTTL on the Cassandra coordinators' clock; the next open of
//     the table drops it and sweeps its pre-images.
//
// Clocks: pending_sf_at and the expiries are compared with
// toUnixTimestamp(now()) read from the coordinator with the catalog row,
// never with an extenddb server's clock.

// maxOpenSnapshots bounds the snapshots one process holds open.
const maxOpenSnapshots = 16

// snapshotTTL bounds an epoch whose holder died without closing it.
var snapshotTTL = 24 * time.Hour

// openStale is how long a snapshot open may go without a heartbeat before
// a writer that waits for it aborts it; openBeat is the heartbeat period.
var (
	openStale = 30 * time.Second
	openBeat  = 5 * time.Second
)

// sfCommitted is the highest committed snapshot fence this process has
// seen for table t (0: none); noteSF records one. The committed counter
// only grows, so a partition fence at or below it is committed.
func (b *Backend) sfCommitted(t int64) int64 {
	b.dirMu.Lock()
	defer b.dirMu.Unlock()
	return b.sfSeen[t]
}

func (b *Backend) noteSF(t, sf int64) {
	b.dirMu.Lock()
	defer b.dirMu.Unlock()
	if b.sfSeen == nil || len(b.sfSeen) >= dirCacheMax {
		b.sfSeen = map[int64]int64{}
	}
	if sf > b.sfSeen[t] {
		b.sfSeen[t] = sf
	}
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// preImage is a kind-3 row to write: the item as of epoch e's instant.
type preImage struct {
	e    int64
	item []byte // nil: absent
}

// openEpochs are the epochs a write must keep pre-images for: those in the
// catalog row that have not expired (with a grace, so a reader that
// still holds one never misses a pre-image).
func openEpochs(r *tableRow) []int64 {
	return snapepoch.Open(r.snaps, time.UnixMilli(r.dbNow), time.Minute)
}

// preImages returns the pre-images a write of item (the stored item, nil
// when absent) must add: one per open epoch the item has none of yet.
func (b *Backend) preImages(ctx context.Context, r *tableRow, t int64, pk, sk, item []byte) ([]preImage, error) {
	eps := openEpochs(r)
	if len(eps) == 0 {
		return nil, nil
	}
	iter := b.query(ctx, `SELECT seq FROM items WHERE t = ? AND pk = ? AND kind = 3 AND sk = ?`, t, pk, sk).Iter()
	have := map[int64]bool{}
	var seq int64
	for iter.Scan(&seq) {
		have[seq] = true
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "read pre-images")
	}
	var out []preImage
	for _, e := range eps {
		if !have[e] {
			out = append(out, preImage{e: e, item: item})
		}
	}
	return out, nil
}

// addPreImages adds the pre-image rows to an item's conditional batch. IF
// NOT EXISTS makes the batch fail (the writer reads again) if another
// write recorded one meanwhile, so a pre-image is never overwritten.
func addPreImages(batch *gocql.Batch, t int64, pk, sk []byte, pre []preImage) {
	for _, p := range pre {
		has := int64(0)
		if p.item != nil {
			has = 1
		}
		batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, item, ver) VALUES (?, ?, 3, ?, ?, ?, ?) IF NOT EXISTS`, t, pk, sk, p.e, p.item, has)
	}
}

// waitSnapshotOpen waits a little for a pending snapshot open (r has
// pending_sf); one whose opener has not beaten for openStale is aborted:
// the counter moves to the pending value (so every raised partition is
// within the catalog's fence) without opening the epoch.
func (b *Backend) waitSnapshotOpen(ctx context.Context, r *tableRow, attempt *int) error {
	if r.pendingSFAt != nil && r.dbNow-*r.pendingSFAt > openStale.Milliseconds() {
		_, err := b.query(ctx, `UPDATE tables SET sf = ?, pending_sf = null, pending_sf_at = null WHERE id = ? IF pending_sf = ? AND pending_sf_at = ?`,
			*r.pendingSF, r.id, *r.pendingSF, *r.pendingSFAt).MapScanCAS(map[string]any{})
		return mapErr(err, "abort a stale snapshot open")
	}
	*attempt++
	return mapErr(backend.Backoff(ctx, *attempt+2, pendingWaitCeiling), "wait for a snapshot open")
}

// fenceSnap raises partition pk's snapshot fence to at least e, once it
// holds no transaction lock (settling those it holds).
func (b *Backend) fenceSnap(ctx context.Context, ref backend.TableRef, pk []byte, e int64) error {
	for {
		var sf *int64
		var lks [][]byte
		err := b.serial(ctx, `SELECT sf, lks FROM items WHERE t = ? AND pk = ? LIMIT 1`, ref.ID, pk).Scan(&sf, &lks)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return mapErr(err, "read snapshot fence")
		}
		if val(sf) >= e {
			return nil
		}
		if len(lks) > 0 {
			if err := b.settleLocks(ctx, ref, pk, lks); err != nil {
				return err
			}
			continue
		}
		applied, err := b.query(ctx, `UPDATE items SET sf = ? WHERE t = ? AND pk = ? IF sf = ? AND lks = null`, e, ref.ID, pk, sf).MapScanCAS(map[string]any{})
		if err != nil {
			return mapErr(err, "raise snapshot fence")
		}
		if applied {
			return nil
		}
	}
}

var _ backend.Snapshotter = (*Backend)(nil)

// OpenTableSnapshot implements backend.Snapshotter.
func (b *Backend) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	release, err := b.snapLim.Acquire()
	if err != nil {
		return nil, err
	}
	snap, err := b.openSnapshot(ctx, p, release)
	if err != nil {
		release()
	}
	return snap, err
}

func (b *Backend) openSnapshot(ctx context.Context, p backend.OpenSnapshotParams, slot func()) (*backend.TableSnapshot, error) {
	r, e, err := b.beginOpen(ctx, p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	ref := backend.TableRef{Account: r.account, Name: r.name, ID: r.id, Version: r.version}
	tbl, at, err := b.finishOpen(ctx, ref, e)
	if err != nil {
		// Writers wait for a pending open: end it now rather than after
		// openStale (the counter moves on without the epoch, as when a
		// waiter aborts a stale one).
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = b.query(actx, `UPDATE tables SET sf = ?, pending_sf = null, pending_sf_at = null WHERE id = ? IF pending_sf = ?`, e, ref.ID, e).MapScanCAS(map[string]any{})
		// A commit whose outcome was unknown may have opened the epoch.
		_, _ = b.query(actx, `DELETE snaps[?] FROM tables WHERE id = ? IF EXISTS`, e, ref.ID).MapScanCAS(map[string]any{})
		return nil, err
	}
	if p.AfterPin != nil {
		p.AfterPin()
	}
	fetch := func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		cr, err := b.byID(ctx, ref.ID)
		if err != nil {
			return nil, false, err
		}
		if cr == nil || !snapepoch.Live(cr.snaps, e, time.UnixMilli(cr.dbNow)) {
			return nil, false, backend.Errorf(backend.KindSnapshotExpired, "cassandra: the snapshot of table %q ended (table deleted or epoch expired)", ref.Name)
		}
		return b.snapshotPage(ctx, ref.ID, e, after, limit)
	}
	release := func() error {
		defer slot()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		return b.closeEpoch(ctx, ref, e)
	}
	return &backend.TableSnapshot{Table: tbl, At: at,
		Descriptor: backend.SnapshotDescriptor{Kind: "cassandra_epoch_preimages", Marker: fmt.Sprint(e)},
		Items:      backend.NewSnapshotStream(fetch, p.PageSize, release)}, nil
}

// beginOpen records a pending open (step 1) and returns the catalog row
// and the epoch.
func (b *Backend) beginOpen(ctx context.Context, account, name string) (*tableRow, int64, error) {
	wait := 0
	for {
		r, err := b.byName(ctx, account, name)
		if err != nil {
			return nil, 0, err
		}
		if r == nil {
			return nil, 0, backend.Errorf(backend.KindTableNotFound, "table %q not found", name)
		}
		if r.pendingSF != nil {
			if err := b.waitSnapshotOpen(ctx, r, &wait); err != nil {
				return nil, 0, err
			}
			continue
		}
		e := val(r.sf) + 1
		applied, err := b.query(ctx, `UPDATE tables SET pending_sf = ?, pending_sf_at = toUnixTimestamp(now()) WHERE id = ? IF pending_sf = null AND sf = ?`,
			e, r.id, r.sf).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, 0, mapErr(err, "open a snapshot")
		}
		if applied {
			return r, e, nil
		}
	}
}

// finishOpen raises every partition's fence (step 2, beating the pending
// open's heartbeat) and commits the epoch (step 3); it returns the table
// as of the instant.
func (b *Backend) finishOpen(ctx context.Context, ref backend.TableRef, e int64) (*backend.Table, time.Time, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan struct{})
	go func() {
		tk := time.NewTicker(openBeat)
		defer tk.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tk.C:
			}
			applied, err := b.query(wctx, `UPDATE tables SET pending_sf_at = toUnixTimestamp(now()) WHERE id = ? IF pending_sf = ?`, ref.ID, e).MapScanCAS(map[string]any{})
			if err == nil && !applied {
				close(lost)
				cancel()
				return
			}
		}
	}()
	err := b.eachPartition(wctx, ref.ID, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		return true, b.fenceSnap(wctx, ref, pk, e)
	})
	select {
	case <-lost:
		return nil, time.Time{}, backend.Errorf(backend.KindUnavailable, "cassandra: the snapshot open of table %q was aborted (it went %v without a heartbeat)", ref.Name, openStale)
	default:
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	for {
		r, err := b.byID(ctx, ref.ID)
		if err != nil {
			return nil, time.Time{}, err
		}
		if r == nil {
			return nil, time.Time{}, backend.Errorf(backend.KindTableNotFound, "table %q not found", ref.Name)
		}
		if val(r.pendingSF) != e {
			return nil, time.Time{}, backend.Errorf(backend.KindUnavailable, "cassandra: the snapshot open of table %q was aborted (it went %v without a heartbeat)", ref.Name, openStale)
		}
		exp := time.UnixMilli(r.dbNow).Add(snapshotTTL)
		applied, err := b.query(ctx, `UPDATE tables SET sf = ?, pending_sf = null, pending_sf_at = null, snaps[?] = ? WHERE id = ? IF pending_sf = ? AND version = ?`,
			e, e, exp, ref.ID, e, r.version).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, time.Time{}, mapErr(err, "commit a snapshot open")
		}
		if !applied {
			continue // the description changed meanwhile: read it again
		}
		cancel()
		b.dropExpired(ctx, ref, r)
		return r.table(), time.UnixMilli(r.dbNow).UTC(), nil
	}
}

// dropExpired removes the expired epochs of the catalog row (best effort)
// and sweeps their pre-images in the background.
func (b *Backend) dropExpired(ctx context.Context, ref backend.TableRef, r *tableRow) {
	dead := snapepoch.Expired(r.snaps, time.UnixMilli(r.dbNow), time.Minute)
	for _, e := range dead {
		if _, err := b.query(ctx, `DELETE snaps[?] FROM tables WHERE id = ? IF EXISTS`, e, ref.ID).MapScanCAS(map[string]any{}); err != nil {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			_ = b.sweepEpoch(ctx, ref.ID, e)
		}()
	}
}

// closeEpoch ends epoch e: out of the catalog row, then its pre-images
// swept. A table deleted since has nothing to close.
func (b *Backend) closeEpoch(ctx context.Context, ref backend.TableRef, e int64) error {
	if _, err := b.query(ctx, `DELETE snaps[?] FROM tables WHERE id = ? IF EXISTS`, e, ref.ID).MapScanCAS(map[string]any{}); err != nil {
		return mapErr(err, "close a snapshot epoch")
	}
	return b.sweepEpoch(ctx, ref.ID, e)
}

// sweepEpoch deletes the kind-3 rows of epoch e in every partition.
func (b *Backend) sweepEpoch(ctx context.Context, t int64, e int64) error {
	return b.eachPartition(ctx, t, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		iter := b.query(ctx, `SELECT sk, seq FROM items WHERE t = ? AND pk = ? AND kind = 3`, t, pk).PageSize(500).Iter()
		var sks [][]byte
		var sk []byte
		var seq int64
		for iter.Scan(&sk, &seq) {
			if seq == e {
				sks = append(sks, sk)
			}
			sk = nil
		}
		if err := iter.Close(); err != nil {
			return false, mapErr(err, "sweep pre-images")
		}
		for _, sk := range sks {
			if err := b.query(ctx, `DELETE FROM items WHERE t = ? AND pk = ? AND kind = 3 AND sk = ? AND seq = ?`, t, pk, skOf(sk), e).Exec(); err != nil {
				return false, mapErr(err, "sweep pre-images")
			}
		}
		return true, nil
	})
}

// snapshotPage reads up to limit items of epoch e strictly after the
// cursor, in directory order; more tells whether any may follow.
func (b *Backend) snapshotPage(ctx context.Context, t, e int64, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
	var rows []backend.Row
	full := func() bool { return len(rows) > limit }
	var from []byte
	if after != nil {
		from = skOf(after.PK)
		if err := b.snapshotPart(ctx, t, e, from, skOf(after.SK), limit+1, &rows); err != nil {
			return nil, false, err
		}
	}
	if !full() {
		err := b.eachPartition(ctx, t, 0, 0xFFFFFFFF, from, func(pk []byte) (bool, error) {
			if err := b.snapshotPart(ctx, t, e, pk, nil, limit+1, &rows); err != nil {
				return false, err
			}
			return !full(), nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	if full() {
		return rows[:limit], true, nil
	}
	return rows, false, nil
}

// snapshotPart appends the items of partition pk as of epoch e, after sort
// key afterSK (nil: from the start), until rows holds max.
func (b *Backend) snapshotPart(ctx context.Context, t, e int64, pk, afterSK []byte, max int, rows *[]backend.Row) error {
	const chunk = 200
	for len(*rows) < max {
		stmt := `SELECT sk, item FROM items WHERE t = ? AND pk = ? AND kind = 0`
		args := []any{t, pk}
		if afterSK != nil {
			stmt += ` AND sk > ?`
			args = append(args, afterSK)
		}
		stmt += ` LIMIT ?`
		args = append(args, chunk)
		type kv struct{ sk, item []byte }
		var got []kv
		iter := b.query(ctx, stmt, args...).Iter()
		var sk, item []byte
		for iter.Scan(&sk, &item) {
			got = append(got, kv{skOf(sk), item})
			sk, item = nil, nil
		}
		if err := iter.Close(); err != nil {
			return mapErr(err, "read snapshot")
		}
		if len(got) == 0 {
			return nil
		}
		// The pre-images are read after the items (see above).
		pre := map[string]*snapepoch.PreImage{}
		iter = b.query(ctx, `SELECT sk, seq, item, ver FROM items WHERE t = ? AND pk = ? AND kind = 3 AND sk >= ? AND sk <= ?`,
			t, pk, got[0].sk, got[len(got)-1].sk).Iter()
		var seq int64
		var has *int64
		for iter.Scan(&sk, &seq, &item, &has) {
			if seq == e {
				pre[string(sk)] = &snapepoch.PreImage{Item: skOf(item), Exists: val(has) == 1}
			}
			sk, item, has = nil, nil, nil
		}
		if err := iter.Close(); err != nil {
			return mapErr(err, "read snapshot pre-images")
		}
		for _, r := range got {
			item, ok := snapepoch.Resolve(r.item, r.item != nil, pre[string(r.sk)])
			if !ok {
				continue
			}
			*rows = append(*rows, backend.Row{PK: pk, SK: r.sk, BasePK: pk, BaseSK: r.sk, Item: item})
			if len(*rows) >= max {
				return nil
			}
		}
		if len(got) < chunk {
			return nil
		}
		afterSK = got[len(got)-1].sk
	}
	return nil
}
