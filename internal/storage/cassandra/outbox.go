package cassandra

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/storage"
)

// The index outbox (ADR 0016). A write whose change has index entries
// writes, in the same conditional batch as the item (one partition, so one
// LWT), an outbox row (kind 1, sk, seq = the item's new version) holding
// the index change. After the LWT the writer applies the change to
// index_entries (cell timestamps = seq, so applications in any order and
// any number of times converge) and deletes the outbox row. A writer that
// dies in between leaves the row; drain applies it: DropIndex drains the
// table before deleting entries, and a background sweep drains every table
// periodically.

// encodeOutbox serializes an index change: deletes then puts, each field
// length-prefixed (uvarint).
func encodeOutbox(ch storage.Change) []byte {
	var out []byte
	put := func(b []byte) {
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	out = binary.AppendUvarint(out, uint64(len(ch.DeleteIndex)))
	for _, d := range ch.DeleteIndex {
		put([]byte(d.Index))
		put(d.PK)
		put(d.SK)
	}
	out = binary.AppendUvarint(out, uint64(len(ch.PutIndex)))
	for _, e := range ch.PutIndex {
		put([]byte(e.Index))
		put(e.PK)
		put(e.SK)
		put(e.Item)
	}
	return out
}

var errBadOutbox = errors.New("cassandra: malformed outbox row")

func decodeOutbox(b []byte) (storage.Change, error) {
	var ch storage.Change
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errBadOutbox
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, nil
	}
	count := func() (int, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return 0, errBadOutbox
		}
		b = b[k:]
		return int(n), nil
	}
	nd, err := count()
	if err != nil {
		return ch, err
	}
	for range nd {
		var f [3][]byte
		for i := range f {
			if f[i], err = next(); err != nil {
				return ch, err
			}
		}
		ch.DeleteIndex = append(ch.DeleteIndex, storage.IndexKey{Index: string(f[0]), PK: f[1], SK: f[2]})
	}
	np, err := count()
	if err != nil {
		return ch, err
	}
	for range np {
		var f [4][]byte
		for i := range f {
			if f[i], err = next(); err != nil {
				return ch, err
			}
		}
		ch.PutIndex = append(ch.PutIndex, storage.IndexEntry{IndexKey: storage.IndexKey{Index: string(f[0]), PK: f[1], SK: f[2]}, Item: f[3]})
	}
	if len(b) != 0 {
		return ch, errBadOutbox
	}
	return ch, nil
}

// finishOutbox applies one outbox row's change and removes the row.
func (b *Backend) finishOutbox(ctx context.Context, t int64, pk, sk []byte, seq int64, ch storage.Change) error {
	if err := b.applyIndex(ctx, t, pk, sk, seq, ch); err != nil {
		return err
	}
	return mapErr(b.query(ctx, `DELETE FROM items WHERE t = ? AND pk = ? AND kind = 1 AND sk = ? AND seq = ?`, t, pk, sk, seq).Exec(), "outbox")
}

// drain applies every outbox row of table t.
func (b *Backend) drain(ctx context.Context, t int64) (int, error) {
	n := 0
	err := b.eachPartition(ctx, t, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		iter := b.query(ctx, `SELECT sk, seq, ob FROM items WHERE t = ? AND pk = ? AND kind = 1`, t, pk).PageSize(200).Iter()
		type row struct {
			sk  []byte
			seq int64
			ob  []byte
		}
		var rows []row
		var r row
		for iter.Scan(&r.sk, &r.seq, &r.ob) {
			rows = append(rows, row{skOf(r.sk), r.seq, r.ob})
			r = row{}
		}
		if err := iter.Close(); err != nil {
			return false, mapErr(err, "outbox")
		}
		for _, r := range rows {
			ch, err := decodeOutbox(r.ob)
			if err != nil {
				return false, err
			}
			if err := b.finishOutbox(ctx, t, pk, r.sk, r.seq, ch); err != nil {
				return false, err
			}
			n++
		}
		return true, nil
	})
	return n, err
}

// drainAll drains every live table once.
func (b *Backend) drainAll(ctx context.Context) (int, error) {
	iter := b.query(ctx, `SELECT id FROM tables`).PageSize(500).Iter()
	var ids []int64
	var id int64
	for iter.Scan(&id) {
		ids = append(ids, id)
	}
	if err := iter.Close(); err != nil {
		return 0, mapErr(err, "outbox sweep")
	}
	total := 0
	for _, id := range ids {
		n, err := b.drain(ctx, id)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sweep drains every table at start and then every interval until Close.
func (b *Backend) sweep(interval time.Duration) {
	defer close(b.sweepDone)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		go func() {
			select {
			case <-b.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, _ = b.drainAll(ctx) // errors: the next round retries
		_, _ = b.tx.Sweep(ctx) // transactions whose coordinator died
		cancel()
		select {
		case <-b.closing:
			return
		case <-time.After(interval):
		}
	}
}

// writeWithOutbox is the item's conditional batch: the item row, the
// outbox row (ob, when not nil) and the pending change log record (lg,
// when not nil; changelog.go), conditioned on the item's version and the
// fence.
func (b *Backend) writeWithOutbox(ctx context.Context, t int64, pk, sk, item []byte, nv int64, wid gocql.UUID, cur *current, ob, lg []byte) (bool, error) {
	batch := b.s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
	batch.SetConsistency(b.cl)
	batch.SerialConsistency(gocql.SerialConsistency(b.scl))
	batch.Query(`UPDATE items SET item = ?, ver = ?, wid = ? WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0 IF ver = ? AND tv = ? AND sf = ?`,
		item, nv, wid, t, pk, sk, cur.ver, cur.tv, cur.sf)
	addPreImages(batch, t, pk, sk, cur.pre) // snapshot.go
	if ob != nil {
		batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob) VALUES (?, ?, 1, ?, ?, ?)`, t, pk, sk, nv, ob)
	}
	if lg != nil {
		batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob) VALUES (?, ?, 2, ?, ?, ?)`, t, pk, sk, nv, lg)
	}
	applied, iter, err := b.s.MapExecuteBatchCAS(batch, map[string]any{})
	if iter != nil {
		iter.Close()
	}
	return applied, err
}
