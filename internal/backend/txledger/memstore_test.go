package txledger_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// memStore is a small, correct in-process Store: a map of item records and
// a map of transaction records under one mutex. Each method is atomic. It
// keeps a table version per table id (the fence) and applies a change's
// item (index entries are recorded, so tests can check they land with the
// item).
type memStore struct {
	mu      sync.Mutex
	items   map[string]*memRec
	txs     map[txledger.TxID]txledger.TxRecord
	tables  map[int64]int64 // id -> description version; missing: not live
	ver     int64
	indexes map[string][]byte // index name + "/" + pk -> entry item
	calls   atomic.Int64
	// delay, when set, is the latency of every Store call (uniform in
	// [delay/2, 3*delay/2)): a slow remote server, as FerretDB is under a
	// loaded host.
	delay time.Duration
}

// wait sleeps one call's latency.
func (m *memStore) wait() {
	if m.delay > 0 {
		time.Sleep(m.delay/2 + time.Duration(rand.Int64N(int64(m.delay))))
	}
}

type memRec struct {
	item []byte
	ver  int64
	lock *txledger.Lock
}

func newMemStore() *memStore {
	return &memStore{items: map[string]*memRec{}, txs: map[txledger.TxID]txledger.TxRecord{}, tables: map[int64]int64{}, indexes: map[string][]byte{}}
}

func mkey(k txledger.Key) string { return fmt.Sprintf("%d/%x/%x", k.Table.ID, k.PK, k.SK) }

func (m *memStore) live(k txledger.Key) error {
	if _, ok := m.tables[k.Table.ID]; !ok {
		return backend.Errorf(backend.KindTableNotFound, "table %d", k.Table.ID)
	}
	return nil
}

func (m *memStore) ReadItem(_ context.Context, k txledger.Key) (txledger.Record, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(k); err != nil {
		return txledger.Record{}, err
	}
	r := m.items[mkey(k)]
	if r == nil {
		return txledger.Record{}, nil
	}
	var l *txledger.Lock
	if r.lock != nil {
		c := *r.lock
		l = &c
	}
	return txledger.Record{Item: r.item, Version: r.ver, Lock: l}, nil
}

func (m *memStore) LockItem(_ context.Context, k txledger.Key, cur txledger.Record, tx txledger.TxID, ch backend.Change) (txledger.Record, bool, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(k); err != nil {
		return txledger.Record{}, false, err
	}
	if v := m.tables[k.Table.ID]; v != k.Table.Version {
		return txledger.Record{}, false, backend.VersionChanged(k.Table, v)
	}
	r := m.items[mkey(k)]
	var v int64
	if r != nil {
		v = r.ver
	}
	if v != cur.Version {
		return txledger.Record{}, false, nil
	}
	if r == nil {
		r = &memRec{}
		m.items[mkey(k)] = r
	}
	m.ver++
	r.ver = m.ver
	r.lock = &txledger.Lock{Tx: tx, Change: ch}
	return txledger.Record{Item: r.item, Version: r.ver, Lock: &txledger.Lock{Tx: tx, Change: ch}}, true, nil
}

func (m *memStore) apply(k txledger.Key, r *memRec, ch backend.Change) {
	switch ch.Op {
	case backend.Put:
		r.item = ch.Item
	case backend.Delete:
		r.item = nil
	default:
		return
	}
	for _, d := range ch.DeleteIndex {
		delete(m.indexes, d.Index+"/"+string(d.PK))
	}
	for _, p := range ch.PutIndex {
		m.indexes[p.Index+"/"+string(p.PK)] = p.Item
	}
}

func (m *memStore) ReleaseItem(_ context.Context, k txledger.Key, cur txledger.Record, commit bool) (bool, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(k); err != nil {
		return false, err
	}
	r := m.items[mkey(k)]
	if r == nil || r.ver != cur.Version || r.lock == nil {
		return false, nil
	}
	if commit {
		m.apply(k, r, r.lock.Change)
	}
	m.ver++
	r.ver = m.ver
	r.lock = nil
	return true, nil
}

// write is a plain WriteItem through the ledger's Settle.
func (m *memStore) write(ctx context.Context, l *txledger.Ledger, k txledger.Key, fn backend.WriteFunc) error {
	for {
		rec, err := m.ReadItem(ctx, k)
		if err != nil {
			return err
		}
		if rec, err = l.Settle(ctx, k, rec); err != nil {
			return err
		}
		ch, err := fn(rec.Item)
		if err != nil {
			return err
		}
		m.mu.Lock()
		r := m.items[mkey(k)]
		var v int64
		if r != nil {
			v = r.ver
		}
		if v != rec.Version {
			m.mu.Unlock()
			continue
		}
		if r == nil {
			r = &memRec{}
			m.items[mkey(k)] = r
		}
		m.apply(k, r, ch)
		m.ver++
		r.ver = m.ver
		m.mu.Unlock()
		return nil
	}
}

func (m *memStore) CreateTx(_ context.Context, tx txledger.TxRecord) error {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.txs[tx.ID]; ok {
		return errors.New("duplicate tx id")
	}
	m.txs[tx.ID] = tx
	return nil
}

func (m *memStore) ReadTx(_ context.Context, id txledger.TxID) (*txledger.TxRecord, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	tx, ok := m.txs[id]
	if !ok {
		return nil, nil
	}
	return &tx, nil
}

func (m *memStore) SetTxState(_ context.Context, id txledger.TxID, from, to txledger.State) (bool, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	tx, ok := m.txs[id]
	if !ok || tx.State != from {
		return false, nil
	}
	tx.State = to
	m.txs[id] = tx
	return true, nil
}

func (m *memStore) TouchTx(_ context.Context, id txledger.TxID, at time.Time) (bool, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	tx, ok := m.txs[id]
	if !ok || tx.State != txledger.Pending {
		return false, nil
	}
	tx.Started = at
	m.txs[id] = tx
	return true, nil
}

func (m *memStore) DeleteTx(_ context.Context, id txledger.TxID) error {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.txs, id)
	return nil
}

func (m *memStore) ListTx(_ context.Context, before time.Time, limit int) ([]txledger.TxRecord, error) {
	m.wait()
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []txledger.TxRecord
	for _, tx := range m.txs {
		if tx.Started.Before(before) && len(out) < limit {
			out = append(out, tx)
		}
	}
	return out, nil
}

// locks counts the locked records and the transaction records left.
func (m *memStore) leftovers() (locks, txs int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.items {
		if r.lock != nil {
			locks++
		}
	}
	return locks, len(m.txs)
}
