package cassandra

import (
	"context"
	"errors"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// Transactions run on the shared ledger (package txledger, ADR 0019).
// txStore is its per-item compare-and-set on Cassandra: an item row's
// lock is its txid/txch columns, set and cleared by LWTs conditioned on
// the row's ver (which every lock, release and write bumps); the
// partition's static lks set lists its locked sort keys for the
// table-version fence; transaction records live in txs, changed by LWTs.

type txStore struct{ b *Backend }

var _ txledger.Items = txStore{}

// fence is the Record.Token of a Cassandra record: the partition's
// table-version and snapshot fences as read, and the item's index entry
// sizes and lock version (the description version its transaction was
// computed at) for the table statistics (counts.go).
type fence struct {
	tv, sf, txv *int64
	isz         []byte
}

// row is an item row as the ledger's paths read it.
type row struct {
	item       []byte
	ver, tv    *int64
	sf         *int64
	txid       *gocql.UUID
	txch       []byte
	wid        gocql.UUID
	isz        []byte
	txv        *int64
	haveRecord bool
}

// readRow reads an item row (and the partition's fence when the row is
// missing); serial makes the read linearizable with the LWTs.
func (b *Backend) readRow(ctx context.Context, t int64, pk, sk []byte, serial bool) (*row, error) {
	rd := b.query
	if serial {
		rd = b.serial
	}
	r := &row{}
	var txid gocql.UUID
	err := rd(ctx, `SELECT item, ver, tv, sf, wid, txid, txch, isz, txv FROM items WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0`, t, pk, sk).
		Scan(&r.item, &r.ver, &r.tv, &r.sf, &r.wid, &txid, &r.txch, &r.isz, &r.txv)
	if err == nil {
		r.haveRecord = true
		if txid != (gocql.UUID{}) {
			r.txid = &txid
		}
		return r, nil
	}
	if !errors.Is(err, gocql.ErrNotFound) {
		return nil, mapErr(err, "read item")
	}
	err = rd(ctx, `SELECT tv, sf FROM items WHERE t = ? AND pk = ? LIMIT 1`, t, pk).Scan(&r.tv, &r.sf)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return nil, mapErr(err, "read fence")
	}
	return r, nil
}

// record turns a row into the ledger's view.
func (r *row) record() (txledger.Record, error) {
	rec := txledger.Record{Item: r.item, Token: fence{tv: r.tv, sf: r.sf, txv: r.txv, isz: r.isz}}
	if r.ver != nil {
		rec.Version = *r.ver
	}
	if r.txid != nil {
		l, err := lockOf(*r.txid, r.txch)
		if err != nil {
			return rec, err
		}
		rec.Lock = l
	}
	return rec, nil
}

func lockOf(id gocql.UUID, txch []byte) (*txledger.Lock, error) {
	ch, err := txledger.DecodeChange(txch)
	if err != nil {
		return nil, backend.Wrap(backend.KindInternal, err, "cassandra: item lock")
	}
	return &txledger.Lock{Tx: txledger.TxID(id), Change: ch}, nil
}

func verArg(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func (s txStore) ReadItem(ctx context.Context, k txledger.Key) (txledger.Record, error) {
	r, err := s.b.readRow(ctx, k.Table.ID, skOf(k.PK), skOf(k.SK), true)
	if err != nil {
		return txledger.Record{}, err
	}
	return r.record()
}

func (s txStore) LockItem(ctx context.Context, k txledger.Key, cur txledger.Record, tx txledger.TxID, ch backend.Change) (txledger.Record, bool, error) {
	b := s.b
	t, pk, sk := k.Table.ID, skOf(k.PK), skOf(k.SK)
	// The catalog check of WriteItem's step (a) (ADR 0016) is done once
	// per table by TransactWrite before the ledger runs; the partition's
	// fence (tv in the LWT condition) and the re-check after a new
	// directory row below are what make the lock safe, as for WriteItem.
	f, _ := cur.Token.(fence)
	if f.tv != nil && *f.tv > k.Table.Version {
		return txledger.Record{}, false, backend.VersionChanged(k.Table, *f.tv)
	}
	// The snapshot fence (snapshot.go): no lock may be taken in a
	// partition fenced by a snapshot open that has not committed — its
	// transaction may hold locks elsewhere taken before the instant, and
	// those partitions are fenced only once it is decided. The catalog is
	// read after the record, so it knows every fence the record shows.
	// (A fence this process has seen committed needs no read: the
	// committed counter only grows.)
	since := time.Now()
	if val(f.sf) > b.sfCommitted(t) {
		view, err := b.byID(ctx, t)
		if err != nil {
			return txledger.Record{}, false, err
		}
		if view == nil {
			return txledger.Record{}, false, backend.Errorf(backend.KindTableNotFound, "table %q not found", k.Table.Name)
		}
		b.noteSF(t, val(view.sf))
		if val(f.sf) > val(view.sf) {
			return txledger.Record{}, false, backend.Errorf(backend.KindTransactionConflict, "a snapshot (backup) of table %q is being opened", k.Table.Name)
		}
	}
	wrote, err := b.noteDir(ctx, t, pk, since)
	if err != nil {
		return txledger.Record{}, false, err
	}
	if wrote {
		if err := b.liveFor(ctx, k.Table); err != nil {
			return txledger.Record{}, false, err
		}
	}
	nv := cur.Version + 1
	applied, err := b.query(ctx, `UPDATE items SET ver = ?, wid = ?, txid = ?, txch = ?, txv = ?, lks = lks + ? WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0 IF ver = ? AND tv = ? AND sf = ?`,
		nv, gocql.TimeUUID(), gocql.UUID(tx), txledger.EncodeChange(ch), k.Table.Version, [][]byte{sk}, t, pk, sk, verArg(cur.Version), f.tv, f.sf).MapScanCAS(map[string]any{})
	if err != nil {
		return txledger.Record{}, false, mapErr(err, "lock item")
	}
	if !applied {
		return txledger.Record{}, false, nil
	}
	v := k.Table.Version
	f.txv = &v
	return txledger.Record{Item: cur.Item, Version: nv, Lock: &txledger.Lock{Tx: tx, Change: ch}, Token: f}, true, nil
}

func (s txStore) ReleaseItem(ctx context.Context, k txledger.Key, cur txledger.Record, commit bool) (bool, error) {
	b := s.b
	t, pk, sk := k.Table.ID, skOf(k.PK), skOf(k.SK)
	if cur.Lock == nil {
		return false, backend.Errorf(backend.KindInternal, "cassandra: release of an unlocked record")
	}
	item := cur.Item
	var ch backend.Change
	if commit {
		ch = cur.Lock.Change
		switch ch.Op {
		case backend.Put:
			item = ch.Item
		case backend.Delete:
			item = nil
		default:
			ch = backend.Change{}
		}
	}
	nv := cur.Version + 1
	indexed := len(ch.DeleteIndex) > 0 || len(ch.PutIndex) > 0
	logged := ch.Log != nil // the change log record, committed with the item (changelog.go)
	// Pre-images for the open snapshot epochs (snapshot.go). A partition
	// holding a lock is never fenced by a snapshot open, so every epoch
	// opened while the item was locked is in the catalog read here.
	// The statistics delta (counts.go), computed at the version the
	// transaction was (txv, recorded by the lock).
	var pre []preImage
	var stw *statsWrite
	if commit && (ch.Op == backend.Put || ch.Op == backend.Delete) {
		view, err := b.byID(ctx, t)
		if err != nil {
			return false, err
		}
		if view != nil {
			if pre, err = b.preImages(ctx, view, t, pk, sk, cur.Item); err != nil {
				return false, err
			}
			f, _ := cur.Token.(fence)
			v := view.version
			if f.txv != nil {
				v = *f.txv
			}
			if stw, err = b.statsChange(ctx, t, pk, sk, view.dropped, v, cur.Item, f.isz, ch); err != nil {
				return false, err
			}
			if stw.d != nil {
				stw.sw = b.slotFor(t)
			}
		}
	}
	if logged {
		if err := b.markDirty(ctx, t, pk); err != nil {
			return false, err
		}
	}
	set := `UPDATE items SET item = ?, ver = ?, wid = ?, txid = null, txch = null, txv = null, lks = lks - ? WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0 IF ver = ?`
	args := []any{item, nv, gocql.TimeUUID(), [][]byte{sk}, t, pk, sk, cur.Version}
	if stw != nil {
		set = `UPDATE items SET item = ?, ver = ?, wid = ?, txid = null, txch = null, txv = null, lks = lks - ?, isz = ? WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0 IF ver = ?`
		args = []any{item, nv, gocql.TimeUUID(), [][]byte{sk}, stw.isz, t, pk, sk, cur.Version}
	}
	var applied bool
	var err error
	if indexed || logged || len(pre) > 0 || (stw != nil && stw.d != nil) {
		batch := b.s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
		batch.SetConsistency(b.cl)
		batch.SerialConsistency(gocql.SerialConsistency(b.scl))
		batch.Query(set, args...)
		addPreImages(batch, t, pk, sk, pre)
		addDelta(batch, t, pk, sk, nv, stw)
		if indexed {
			batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob) VALUES (?, ?, 1, ?, ?, ?)`, t, pk, sk, nv, encodeOutbox(ch))
		}
		if logged {
			batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob) VALUES (?, ?, 2, ?, ?, ?)`, t, pk, sk, nv, ch.Log)
		}
		var iter *gocql.Iter
		applied, iter, err = b.s.MapExecuteBatchCAS(batch, map[string]any{})
		if iter != nil {
			iter.Close()
		}
	} else {
		applied, err = b.query(ctx, set, args...).MapScanCAS(map[string]any{})
	}
	if err != nil {
		return false, mapErr(err, "release item")
	}
	switch {
	case applied && indexed && !b.skipApply:
		b.applyOutbox(ctx, time.Now(), t, pk, sk, nv, ch, stw) // the sweep retries
	case applied && stw != nil && stw.d != nil:
		b.copyDelta(ctx, t, pk, sk, nv, stw)
	}
	return applied, nil
}

func (s txStore) CreateTx(ctx context.Context, tx txledger.TxRecord) error {
	applied, err := s.b.query(ctx, `INSERT INTO txs (id, state, started, items) VALUES (?, ?, ?, ?) IF NOT EXISTS`,
		gocql.UUID(tx.ID), int8(tx.State), tx.Started, txledger.EncodeKeys(tx.Items)).MapScanCAS(map[string]any{})
	if err != nil {
		return mapErr(err, "create transaction")
	}
	if !applied {
		return backend.Errorf(backend.KindInternal, "cassandra: transaction id %s taken", tx.ID)
	}
	return nil
}

func scanTx(id gocql.UUID, state int8, started time.Time, items []byte) (*txledger.TxRecord, error) {
	keys, err := txledger.DecodeKeys(items)
	if err != nil {
		return nil, backend.Wrap(backend.KindInternal, err, "cassandra: transaction record")
	}
	return &txledger.TxRecord{ID: txledger.TxID(id), State: txledger.State(state), Started: started, Items: keys}, nil
}

func (s txStore) ReadTx(ctx context.Context, id txledger.TxID) (*txledger.TxRecord, error) {
	var state int8
	var started time.Time
	var items []byte
	err := s.b.serial(ctx, `SELECT state, started, items FROM txs WHERE id = ?`, gocql.UUID(id)).Scan(&state, &started, &items)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, "read transaction")
	}
	return scanTx(gocql.UUID(id), state, started, items)
}

func (s txStore) SetTxState(ctx context.Context, id txledger.TxID, from, to txledger.State) (bool, error) {
	applied, err := s.b.query(ctx, `UPDATE txs SET state = ? WHERE id = ? IF state = ?`, int8(to), gocql.UUID(id), int8(from)).MapScanCAS(map[string]any{})
	return applied, mapErr(err, "transaction state")
}

// TouchTx implements txledger.Items: one lightweight transaction on the
// record, applied only while it is PENDING.
func (s txStore) TouchTx(ctx context.Context, id txledger.TxID, at time.Time) (bool, error) {
	applied, err := s.b.query(ctx, `UPDATE txs SET started = ? WHERE id = ? IF state = ?`, at, gocql.UUID(id), int8(txledger.Pending)).MapScanCAS(map[string]any{})
	return applied, mapErr(err, "touch transaction")
}

func (s txStore) DeleteTx(ctx context.Context, id txledger.TxID) error {
	_, err := s.b.query(ctx, `DELETE FROM txs WHERE id = ? IF EXISTS`, gocql.UUID(id)).MapScanCAS(map[string]any{})
	return mapErr(err, "delete transaction")
}

func (s txStore) ListTx(ctx context.Context, before time.Time, limit int) ([]txledger.TxRecord, error) {
	iter := s.b.query(ctx, `SELECT id, state, started, items FROM txs`).PageSize(500).Iter()
	var out []txledger.TxRecord
	var id gocql.UUID
	var state int8
	var started time.Time
	var items []byte
	for len(out) < limit && iter.Scan(&id, &state, &started, &items) {
		if !started.Before(before) {
			continue
		}
		tx, err := scanTx(id, state, started, items)
		if err != nil {
			iter.Close()
			return nil, err
		}
		out = append(out, *tx)
		items = nil
	}
	return out, mapErr(iter.Close(), "list transactions")
}

// TransactWrite runs the operations through the ledger. Every table is
// checked first, so a missing table or a stale version refuses the
// transaction before anything is locked.
func (b *Backend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	seen := map[int64]bool{}
	for _, op := range p.Ops {
		if seen[op.Table.ID] {
			continue
		}
		seen[op.Table.ID] = true
		if err := b.liveFor(ctx, op.Table); err != nil {
			return nil, err
		}
	}
	return b.tx.TransactWrite(ctx, p)
}

// TransactGet reads the items from one instant through the ledger.
func (b *Backend) TransactGet(ctx context.Context, p backend.TransactGetParams) (*backend.TransactGetResult, error) {
	seen := map[int64]bool{}
	for _, k := range p.Keys {
		if seen[k.Table.ID] {
			continue
		}
		seen[k.Table.ID] = true
		if err := b.live(ctx, k.Table); err != nil {
			return nil, err
		}
	}
	return b.tx.TransactGet(ctx, p)
}

// visible is the committed item of k's row read by a plain read path: the
// stored item, or the after-image of a committed transaction's lock
// (Ledger.Visible, which may read k again).
func (b *Backend) visible(ctx context.Context, k txledger.Key, item []byte, txid *gocql.UUID, txch []byte) ([]byte, error) {
	if txid == nil || *txid == (gocql.UUID{}) {
		return item, nil
	}
	l, err := lockOf(*txid, txch)
	if err != nil {
		return nil, err
	}
	return b.tx.Visible(ctx, k, txledger.Record{Item: item, Lock: l})
}

// settleLocks settles every lock held in partition (t, pk) (listed in its
// lks set); the table-version fence raises a partition's fence only once
// it holds no lock.
func (b *Backend) settleLocks(ctx context.Context, ref backend.TableRef, pk []byte, lks [][]byte) error {
	for _, sk := range lks {
		k := txledger.Key{Table: ref, PK: pk, SK: sk}
		rec, err := txStore{b}.ReadItem(ctx, k)
		if err != nil {
			return err
		}
		if rec.Lock == nil {
			// An entry without a lock (the lock and its entry are set and
			// cleared in one LWT, so only a row removed otherwise leaves
			// one): remove it, conditioned on the set as read.
			_, err := b.query(ctx, `UPDATE items SET lks = lks - ? WHERE t = ? AND pk = ? IF lks = ?`, [][]byte{sk}, ref.ID, pk, lks).MapScanCAS(map[string]any{})
			if err != nil {
				return mapErr(err, "fence partition")
			}
			return nil // the caller reads the partition again
		}
		if _, err := b.tx.Settle(ctx, k, rec); err != nil {
			return err
		}
	}
	return nil
}
