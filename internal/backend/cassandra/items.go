package cassandra

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// buckets splits a table's partition directory and each index into
// partitions by the top bits of KeyHash (b = KeyHash >> 28).
const buckets = 16

func bucketOf(h uint32) int { return int(h >> 28) }

func (b *Backend) GetItem(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	var item, txch []byte
	var txid *gocql.UUID
	err := b.query(ctx, `SELECT item, txid, txch FROM items WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0`, p.Table.ID, skOf(p.PK), skOf(p.SK)).Scan(&item, &txid, &txch)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return nil, mapErr(err, "get item")
	}
	if item, err = b.visible(ctx, txledger.Key{Table: p.Table, PK: p.PK, SK: p.SK}, item, txid, txch); err != nil {
		return nil, err
	}
	return &backend.GetItemResult{Item: item}, nil
}

// skOf is the clustering value of a sort key (empty for hash-only tables).
func skOf(sk []byte) []byte {
	if sk == nil {
		return []byte{}
	}
	return sk
}

// current is an item row as a write reads it.
type current struct {
	item        []byte
	ver, tv, sf *int64
	// pre are the pre-images the write keeps for open snapshot epochs
	// (snapshot.go), written in its conditional batch.
	pre []preImage
	// isz: the item's index entry sizes (counts.go; nil for an item
	// written before the table statistics).
	isz []byte
	wid gocql.UUID
	// locked: a transaction holds the item (ADR 0019); the write settles
	// the lock first.
	locked bool
}

// readForWrite reads the row and the partition's fence. The first read of
// a write is a plain (quorum) read: it may miss an LWT in progress, which
// the write's own LWT condition then catches (the write reads again). A
// SERIAL read (serial=true) completes any LWT in progress on the partition;
// resolving an unknown outcome needs it.
func (b *Backend) readForWrite(ctx context.Context, t int64, pk, sk []byte, serial bool) (*current, error) {
	r, err := b.readRow(ctx, t, pk, sk, serial)
	if err != nil {
		return nil, err
	}
	return &current{item: r.item, ver: r.ver, tv: r.tv, sf: r.sf, wid: r.wid, locked: r.txid != nil, isz: r.isz}, nil
}

// noteDir records the partition in the directory (before its first
// write); it returns true when the row may be newer than since (it wrote
// the row, or another write of this process did after since): the caller
// then checks the table again, see ADR 0016 and ADR 0021.
func (b *Backend) noteDir(ctx context.Context, t int64, pk []byte, since time.Time) (bool, error) {
	k := dirKey{t, string(pk)}
	b.dirMu.Lock()
	at, ok := b.dirKnown[k]
	b.dirMu.Unlock()
	if ok {
		return !at.Before(since), nil
	}
	h := backend.KeyHash(pk)
	if err := b.quorum(ctx, `INSERT INTO partitions (t, b, h, pk) VALUES (?, ?, ?, ?)`, t, bucketOf(h), int64(h), pk).Exec(); err != nil {
		return false, mapErr(err, "partition directory")
	}
	b.dirMu.Lock()
	if len(b.dirKnown) >= dirCacheMax {
		clear(b.dirKnown)
	}
	b.dirKnown[k] = time.Now()
	b.dirMu.Unlock()
	return true, nil
}

func (b *Backend) noteIndex(ctx context.Context, t int64, idx string) error {
	k := ixKey{t, idx}
	b.dirMu.Lock()
	_, ok := b.ixKnown[k]
	b.dirMu.Unlock()
	if ok {
		return nil
	}
	if err := b.query(ctx, `INSERT INTO index_names (t, idx) VALUES (?, ?)`, t, idx).Exec(); err != nil {
		return mapErr(err, "index names")
	}
	b.dirMu.Lock()
	if len(b.ixKnown) >= dirCacheMax {
		clear(b.ixKnown)
	}
	b.ixKnown[k] = struct{}{}
	b.dirMu.Unlock()
	return nil
}

// forget drops a dead table from the caches.
func (b *Backend) forget(t int64) {
	b.dirMu.Lock()
	defer b.dirMu.Unlock()
	for k := range b.dirKnown {
		if k.t == t {
			delete(b.dirKnown, k)
		}
	}
	for k := range b.ixKnown {
		if k.t == t {
			delete(b.ixKnown, k)
		}
	}
}

// WriteItem: check the table version, read the row and the partition's
// fence (SERIAL), run Fn, and apply its change with an LWT conditioned on
// the row's version and the fence; a lost race reads and runs Fn again.
// Index entries are written after the LWT won (ADR 0016: not atomic with
// the item yet).
func (b *Backend) WriteItem(ctx context.Context, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	since := time.Now()
	view, err := b.liveView(ctx, p.Table)
	if err != nil {
		return nil, err
	}
	t, pk, sk := p.Table.ID, skOf(p.PK), skOf(p.SK)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return nil, err
			}
		}
		// The first read is a plain quorum read; an answer that writes
		// nothing (Fn's error, Keep) is only given from a SERIAL read,
		// which is linearizable with the LWTs on the partition.
		serial := false
		var cur *current
		var ch backend.Change
		for {
			cur, err = b.readForWrite(ctx, t, pk, sk, serial)
			if err != nil {
				return nil, err
			}
			if cur.locked {
				// A transaction holds the item: settle it (roll a decided
				// one forward or back, wait for a live one, at most the
				// ledger's MaxWait: KindTransactionConflict), read again.
				k := txledger.Key{Table: p.Table, PK: pk, SK: sk}
				rec, err := txStore{b}.ReadItem(ctx, k)
				if err == nil {
					_, err = b.tx.Settle(ctx, k, rec)
				}
				if err != nil {
					return nil, err
				}
				continue
			}
			if cur.tv != nil && *cur.tv > p.Table.Version {
				return nil, backend.VersionChanged(p.Table, *cur.tv)
			}
			if val(cur.sf) > val(view.sf) {
				// A snapshot opened (or is opening) since the catalog was
				// read: read it again (waiting for the open) so that the
				// write knows the epoch (snapshot.go).
				since = time.Now()
				if view, err = b.liveView(ctx, p.Table); err != nil {
					return nil, err
				}
				continue
			}
			var fnErr error
			ch, fnErr = p.Fn(cur.item)
			writes := fnErr == nil && ch.Op != backend.Keep && !(ch.Op == backend.Delete && cur.item == nil && len(ch.DeleteIndex) == 0)
			if writes {
				break
			}
			if serial {
				if fnErr != nil {
					return nil, fnErr
				}
				return &backend.WriteItemResult{Old: cur.item, Change: ch}, nil
			}
			serial = true
		}
		res := &backend.WriteItemResult{Old: cur.item, Change: ch}
		wrote, err := b.noteDir(ctx, t, pk, since)
		if err != nil {
			return nil, err
		}
		if wrote {
			// The directory row is new: an UpdateTable or a snapshot open
			// that listed the directory before it cannot have fenced this
			// partition, so check the table again now that the row is
			// visible (and learn a snapshot epoch opened meanwhile).
			since = time.Now()
			if view, err = b.liveView(ctx, p.Table); err != nil {
				return nil, err
			}
		}
		if cur.pre, err = b.preImages(ctx, view, t, pk, sk, cur.item); err != nil {
			return nil, err
		}
		stw, err := b.statsChange(ctx, t, pk, sk, view.dropped, p.Table.Version, cur.item, cur.isz, ch)
		if err != nil {
			return nil, err
		}
		if stw.d != nil {
			stw.sw = b.slotFor(t)
		}
		applied, nv, indexed, err := b.commitItem(ctx, t, pk, sk, cur, ch, stw)
		if err != nil {
			return nil, err
		}
		if !applied {
			continue
		}
		if indexed && !b.skipApply {
			// The change is committed with its outbox row: an error here
			// leaves the row for the sweep (the index converges), it does
			// not undo the write. The statistics delta's copy goes in the
			// same batch as the index entries.
			b.applyOutbox(ctx, time.Now(), t, pk, sk, nv, ch, stw)
		} else if stw.d != nil {
			b.copyDelta(ctx, t, pk, sk, nv, stw)
		}
		return res, nil
	}
}

// commitItem writes the change ch of the item read as cur with an LWT
// conditioned on the row's version, table version and snapshot fence
// (with its outbox row, change-log record, statistics delta or
// pre-images when it has any); an LWT whose outcome is unknown is
// settled (resolveCAS). It answers whether the write applied, the item's
// new version and whether the change has index entries to apply.
func (b *Backend) commitItem(ctx context.Context, t int64, pk, sk []byte, cur *current, ch backend.Change, stw *statsWrite) (applied bool, nv int64, indexed bool, err error) {
	nv = 1
	if cur.ver != nil {
		nv = *cur.ver + 1
	}
	wid := gocql.TimeUUID()
	var item []byte
	if ch.Op == backend.Put {
		item = ch.Item
	}
	indexed = len(ch.DeleteIndex) > 0 || len(ch.PutIndex) > 0
	if ch.Log != nil {
		// The change log: the partition is marked before the LWT
		// that writes the record (changelog.go).
		if err := b.markDirty(ctx, t, pk); err != nil {
			return false, 0, false, err
		}
	}
	if indexed || ch.Log != nil || len(cur.pre) > 0 || stw.d != nil {
		var ob []byte
		if indexed {
			ob = encodeOutbox(ch)
		}
		applied, err = b.writeWithOutbox(ctx, t, pk, sk, item, nv, wid, cur, ob, ch.Log, stw)
	} else {
		applied, err = b.query(ctx, `UPDATE items SET item = ?, ver = ?, wid = ?, isz = ? WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0 IF ver = ? AND tv = ? AND sf = ?`,
			item, nv, wid, stw.isz, t, pk, sk, cur.ver, cur.tv, cur.sf).MapScanCAS(map[string]any{})
	}
	if err != nil {
		applied, err = b.resolveCAS(ctx, err, t, pk, sk, wid, cur.ver)
		if err != nil {
			return false, 0, false, err
		}
	}
	return applied, nv, indexed, nil
}

// resolveCAS settles an LWT whose outcome is unknown (a CAS write
// timeout): a SERIAL read completes the Paxos round; the write applied
// when the row carries its id, did not when the row still has the
// version it was conditioned on.
func (b *Backend) resolveCAS(ctx context.Context, casErr error, t int64, pk, sk []byte, wid gocql.UUID, was *int64) (bool, error) {
	var wt *gocql.RequestErrWriteTimeout
	if !errors.As(casErr, &wt) && !errors.Is(casErr, gocql.ErrTimeoutNoResponse) {
		var re gocql.RequestError
		if errors.As(casErr, &re) && re.Code() == gocql.ErrCodeUnavailable {
			return false, mapErr(casErr, "write item")
		}
		return false, mapErr(casErr, "write item")
	}
	for i := 0; i < 5; i++ {
		cur, err := b.readForWrite(ctx, t, pk, sk, true)
		if err != nil {
			if backend.IsKind(err, backend.KindUnavailable) {
				if e := backoff(ctx, i+1); e != nil {
					return false, e
				}
				continue
			}
			return false, err
		}
		if cur.wid == wid {
			return true, nil
		}
		if (cur.ver == nil && was == nil) || (cur.ver != nil && was != nil && *cur.ver == *was) {
			return false, nil
		}
		if cur.ver != nil && (was == nil && *cur.ver == 1 || was != nil && *cur.ver == *was+1) {
			return false, nil // another write won this version
		}
		return false, backend.Wrap(backend.KindUnavailable, casErr, "cassandra: write item: outcome unknown (the row moved on)")
	}
	return false, mapErr(casErr, "write item")
}

// retryCeiling bounds the average pause between two attempts of a
// contended write (backend.Backoff).
const retryCeiling = 32 * time.Millisecond

// pendingWaitCeiling bounds the average pause between two reads of a table row
// that waits for a pending change (a description update, a snapshot open)
// to finish.
const pendingWaitCeiling = 100 * time.Millisecond

// backoff pauses before the next attempt of a contended write, 2^(attempt-1)
// ms on average; a context that ends first is answered as the write's
// error.
func backoff(ctx context.Context, attempt int) error {
	if err := backend.Backoff(ctx, attempt-1, retryCeiling); err != nil {
		return mapErr(err, "write item")
	}
	return nil
}

// applyIndex writes the change's index entries at timestamp ver (the base
// item's new version), so applications that race converge to the newest.
// A key deleted and put in one change is only put (a tombstone wins a tie).
func (b *Backend) applyIndex(ctx context.Context, t int64, pk, sk []byte, ver int64, ch backend.Change) error {
	return b.applyIndexWith(ctx, t, pk, sk, ver, ch, nil)
}

// applyIndexWith is applyIndex with the copy of the write's statistics
// delta when cp has one (counts.go). The statements go in one logged
// batch, unless they are large: Cassandra refuses a batch of several
// partitions over batch_size_fail_threshold (50 KiB by default), so a
// change with entries of more than batchBytes is applied statement by
// statement (each is idempotent at its timestamp; the outbox row stays
// until all are done).
func (b *Backend) applyIndexWith(ctx context.Context, t int64, pk, sk []byte, ver int64, ch backend.Change, cp *statsWrite) error {
	type stmt struct {
		q    string
		args []any
	}
	var stmts []stmt
	size := 0
	for _, d := range ch.DeleteIndex {
		if putsKey(ch.PutIndex, d) {
			continue
		}
		h := backend.KeyHash(d.PK)
		stmts = append(stmts, stmt{`DELETE FROM index_entries USING TIMESTAMP ? WHERE t = ? AND idx = ? AND b = ? AND h = ? AND ipk = ? AND isk = ? AND bpk = ? AND bsk = ?`,
			[]any{ver, t, d.Index, bucketOf(h), int64(h), skOf(d.PK), skOf(d.SK), pk, sk}})
		size += len(d.Index) + len(d.PK) + len(d.SK) + len(pk) + len(sk)
	}
	for _, e := range ch.PutIndex {
		if err := b.noteIndex(ctx, t, e.Index); err != nil {
			return err
		}
		h := backend.KeyHash(e.PK)
		stmts = append(stmts, stmt{`INSERT INTO index_entries (t, idx, b, h, ipk, isk, bpk, bsk, item) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`,
			[]any{t, e.Index, bucketOf(h), int64(h), skOf(e.PK), skOf(e.SK), pk, sk, e.Item, ver}})
		size += len(e.Index) + len(e.PK) + len(e.SK) + len(pk) + len(sk) + len(e.Item)
	}
	if len(stmts) == 0 && (cp == nil || cp.d == nil) {
		return nil
	}
	if size > batchBytes {
		for _, st := range stmts {
			if err := b.query(ctx, st.q, st.args...).Exec(); err != nil {
				return mapErr(err, "index entries")
			}
		}
		if cp != nil && cp.d != nil {
			b.copyDelta(ctx, t, pk, sk, ver, cp)
		}
		return nil
	}
	batch := b.s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
	batch.SetConsistency(b.cl)
	for _, st := range stmts {
		batch.Query(st.q, st.args...)
	}
	b.addCopy(batch, t, pk, sk, ver, cp)
	return mapErr(b.s.ExecuteBatch(batch), "index entries")
}

// batchBytes bounds the entry bytes of one index batch (Cassandra warns
// about multi-partition batches over 5 KiB and refuses them over 50 KiB).
const batchBytes = 4 << 10

func putsKey(puts []backend.IndexEntry, k backend.IndexKey) bool {
	for _, p := range puts {
		if p.Index == k.Index && bytes.Equal(p.PK, k.PK) && bytes.Equal(skOf(p.SK), skOf(k.SK)) {
			return true
		}
	}
	return false
}
