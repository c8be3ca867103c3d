// Package memory is the native in-memory storage backend behind
// `extenddb serve --memory`: no file, no SQL, nothing kept after Close.
//
// Layout. The catalog is a map from (account, name) to a table, plus a
// copy-on-write map from table ID to table that item operations read
// without a lock. Each table holds its items in one B-tree
// (github.com/tidwall/btree) ordered by (KeyHash(pk), pk, sk) — the order
// of Scan, in which one partition is contiguous and in sort key order, so
// GetItem, Query and Scan are a search and an ordered walk of one tree —
// and one B-tree per secondary index ordered by (KeyHash(ipk), ipk, isk,
// pk, sk). Keys and item of an entry live in one buffer allocated by the
// write; a stored buffer is never written again, so reads hand out slices
// of it without copying.
//
// Concurrency. A write (WriteItem, TransactWrite) locks the key stripes of
// its keys (a fixed array of mutexes chosen by a hash of table ID and
// key, taken in ascending order), reads the current items, runs the write
// functions with only the stripes held, and then applies every change
// under the write lock of its tables (taken in ascending ID order). The
// stripes make a conditional write atomic: nobody else writes that key
// between the read and the apply. The table lock makes the apply one
// instant for readers: GetItem, Query and Scan hold a table's read lock
// while they search, TransactGet holds the read locks of all its tables at
// once, and a snapshot copies the table's tree (tidwall/btree's O(1)
// copy-on-write Copy) under the write lock. Write functions of different
// keys run in parallel; the table lock is held only for the tree updates.
//
// Catalog changes are serialized by one mutex; UpdateTable increments the
// table's Version.
package memory

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"

	"github.com/extenddb/extenddb/internal/backend"
)

// Options configure New.
type Options struct {
	// MaxSnapshots bounds the table snapshots open at once (default
	// backend.DefaultMaxSnapshots).
	MaxSnapshots int
	// ItemSize measures items and index entries for the table statistics
	// kept with every write (backend.TableCounter); nil: their length.
	ItemSize backend.ItemSizeFunc
}

// Backend is the in-memory storage backend. It is safe for concurrent use.
type Backend struct {
	closed atomic.Bool

	// catMu serializes catalog changes and guards byName and nextID.
	catMu  sync.RWMutex
	byName map[tableKey]*table
	nextID int64
	// byID maps live table IDs to tables. It is replaced, never changed,
	// under catMu, so readers load it without a lock.
	byID atomic.Pointer[map[int64]*table]

	stripes [nStripes]stripe

	snaps *backend.SnapshotLimiter
	size  backend.ItemSizeFunc

	// jobs holds the backup and restore job catalogs (backups.go).
	jobsOnce sync.Once
	jobsCat  *jobCatalog
}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.Snapshotter = (*Backend)(nil)
	_ backend.ChangeLog   = (*Backend)(nil)
)

type tableKey struct{ account, name string }

// table is one incarnation of a table.
type table struct {
	id int64
	// mu guards everything below; the trees' contents are changed only
	// under mu.Lock.
	mu sync.RWMutex
	// meta is the catalog row; it is replaced, never changed.
	meta    *backend.Table
	dropped bool
	items   *btree.BTreeG[ent]
	indexes map[string]*index
	// itemCount and itemBytes count the table's items and their sizes
	// (size, the backend's Options.ItemSize) for the table statistics.
	itemCount, itemBytes int64
	size                 backend.ItemSizeFunc
	// log is the table's change log (changelog.go), in Seq order;
	// lastSeq is the highest Seq ever assigned and lastAt the At of the
	// latest record.
	log     []backend.LogRecord
	lastSeq int64
	lastAt  time.Time
}

// index is one secondary index of a table: its entries, their number and
// the bytes of their projected items.
type index struct {
	tr           *btree.BTreeG[ixEnt]
	count, bytes int64
}

// degree of the B-trees: nodes of up to 63 entries keep inserts (which
// shift a node's entries) and copy-on-write node copies cheap.
const degree = 32

func newTable(meta *backend.Table, size backend.ItemSizeFunc) *table {
	return &table{
		size:    size,
		id:      meta.ID,
		meta:    meta,
		items:   btree.NewBTreeGOptions(entLess, btree.Options{Degree: degree, NoLocks: true}),
		indexes: map[string]*index{},
	}
}

// ent is an item in a table's tree. pk, sk and item are slices of one
// buffer with their capacity clipped, so a caller appending to one never
// writes over another. size is the item's statistics size, computed once
// when it is stored (an overwrite or delete subtracts it without sizing
// the old item again); it fills the padding after h.
type ent struct {
	h            uint32
	size         uint32
	pk, sk, item []byte
}

func entLess(a, b ent) bool {
	if a.h != b.h {
		return a.h < b.h
	}
	if c := bytes.Compare(a.pk, b.pk); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.sk, b.sk) < 0
}

// ixEnt is an index entry: index keys (pk, sk), the item's table keys
// (bpk, bsk) and the projected item, in one buffer.
type ixEnt struct {
	h                      uint32
	size                   uint32 // as ent's
	pk, sk, bpk, bsk, item []byte
}

func ixLess(a, b ixEnt) bool {
	if a.h != b.h {
		return a.h < b.h
	}
	if c := bytes.Compare(a.pk, b.pk); c != 0 {
		return c < 0
	}
	if c := bytes.Compare(a.sk, b.sk); c != 0 {
		return c < 0
	}
	if c := bytes.Compare(a.bpk, b.bpk); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.bsk, b.bsk) < 0
}

// New returns an empty backend.
func New(opts Options) *Backend {
	b := &Backend{byName: map[tableKey]*table{}, snaps: backend.NewSnapshotLimiter(opts.MaxSnapshots), size: opts.ItemSize}
	m := map[int64]*table{}
	b.byID.Store(&m)
	return b
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "memory" }

// Capabilities implements backend.Backend: snapshots, the job catalogs,
// a change log and table statistics kept with every write.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Snapshots: b, Backups: b, Restores: b, Jobs: b, ChangeLog: b, Counts: b}
}

var errClosed = backend.Errorf(backend.KindUnavailable, "memory: backend is closed")

// Ping implements backend.Backend.
func (b *Backend) Ping(ctx context.Context) error {
	if b.closed.Load() {
		return errClosed
	}
	return nil
}

// Close drops every table; later calls answer KindUnavailable.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.catMu.Lock()
	defer b.catMu.Unlock()
	for _, t := range *b.byID.Load() {
		t.mu.Lock()
		t.drop()
		t.mu.Unlock()
	}
	b.byName = map[tableKey]*table{}
	m := map[int64]*table{}
	b.byID.Store(&m)
	return nil
}

// drop empties a table that left the catalog (caller holds t.mu).
func (t *table) drop() {
	t.dropped = true
	t.items = nil
	t.indexes = nil
	t.itemCount, t.itemBytes = 0, 0
	t.log = nil
}

func tableNotFound(ref backend.TableRef) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q (id %d) of account %q not found", ref.Name, ref.ID, ref.Account)
}

func nameNotFound(account, name string) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", name, account)
}

// lookup returns the live table of an ID, or nil.
func (b *Backend) lookup(id int64) *table {
	return (*b.byID.Load())[id]
}

// publishLocked replaces the ID map with the tables of byName (caller
// holds catMu for writing).
func (b *Backend) publishLocked() {
	m := make(map[int64]*table, len(b.byName))
	for _, t := range b.byName {
		m[t.id] = t
	}
	b.byID.Store(&m)
}

// metaCopy returns a copy of the catalog row for a caller.
func metaCopy(m *backend.Table) *backend.Table {
	c := *m
	return &c
}

// ---- catalog ----

// CreateTable implements backend.Backend.
func (b *Backend) CreateTable(ctx context.Context, p backend.CreateTableParams) (*backend.CreateTableResult, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	b.catMu.Lock()
	defer b.catMu.Unlock()
	k := tableKey{p.Account, p.Name}
	if _, ok := b.byName[k]; ok {
		return nil, backend.Errorf(backend.KindTableExists, "table %q of account %q already exists", p.Name, p.Account)
	}
	b.nextID++
	meta := &backend.Table{Account: p.Account, Name: p.Name, ID: b.nextID, Desc: bytes.Clone(nz(p.Desc)), Version: 1,
		CreatedAt: time.Now().UTC()}
	b.byName[k] = newTable(meta, b.size)
	b.publishLocked()
	return &backend.CreateTableResult{Table: metaCopy(meta)}, nil
}

// namedTable returns the table of a name, not locked, or the error for a
// closed backend or an unknown name.
func (b *Backend) namedTable(account, name string) (*table, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	b.catMu.RLock()
	t := b.byName[tableKey{account, name}]
	b.catMu.RUnlock()
	if t == nil {
		return nil, nameNotFound(account, name)
	}
	return t, nil
}

// GetTable implements backend.Backend.
func (b *Backend) GetTable(ctx context.Context, p backend.GetTableParams) (*backend.GetTableResult, error) {
	t, err := b.namedTable(p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	m := t.meta
	t.mu.RUnlock()
	return &backend.GetTableResult{Table: metaCopy(m)}, nil
}

// ListTables implements backend.Backend.
func (b *Backend) ListTables(ctx context.Context, p backend.ListTablesParams) (*backend.ListTablesResult, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	var names []string
	b.catMu.RLock()
	for k := range b.byName {
		if k.account == p.Account && k.name > p.StartAfter {
			names = append(names, k.name)
		}
	}
	b.catMu.RUnlock()
	slices.Sort(names)
	if p.Limit > 0 && len(names) > p.Limit {
		names = names[:p.Limit]
	}
	return &backend.ListTablesResult{Names: names}, nil
}

// UpdateTable implements backend.Backend: Fn runs under the catalog lock
// (released by a defer, so a panic that backend.Checked recovers leaves
// the catalog usable), and the new description gets Version+1.
func (b *Backend) UpdateTable(ctx context.Context, p backend.UpdateTableParams) (*backend.UpdateTableResult, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "memory: UpdateTable without Fn")
	}
	b.catMu.Lock()
	defer b.catMu.Unlock()
	t := b.byName[tableKey{p.Account, p.Name}]
	if t == nil {
		return nil, nameNotFound(p.Account, p.Name)
	}
	old := t.meta // only catalog changes replace meta, and we hold catMu
	desc, err := p.Fn(metaCopy(old))
	if err != nil {
		return nil, err
	}
	nm := metaCopy(old)
	nm.Desc = bytes.Clone(nz(desc))
	nm.Version++
	t.mu.Lock()
	t.meta = nm
	t.mu.Unlock()
	return &backend.UpdateTableResult{Table: metaCopy(nm)}, nil
}

// DeleteTable implements backend.Backend.
func (b *Backend) DeleteTable(ctx context.Context, p backend.DeleteTableParams) (*backend.DeleteTableResult, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	b.catMu.Lock()
	defer b.catMu.Unlock()
	k := tableKey{p.Account, p.Name}
	t := b.byName[k]
	if t == nil {
		return nil, nameNotFound(p.Account, p.Name)
	}
	delete(b.byName, k)
	b.publishLocked()
	t.mu.Lock()
	m := t.meta
	t.drop()
	t.mu.Unlock()
	return &backend.DeleteTableResult{Table: metaCopy(m)}, nil
}

// DropIndex implements backend.Backend, fenced on the table's description
// version like a write.
func (b *Backend) DropIndex(ctx context.Context, p backend.DropIndexParams) (*backend.DropIndexResult, error) {
	t, err := b.liveTable(p.Table)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.fence(p.Table); err != nil {
		return nil, err
	}
	delete(t.indexes, p.Index)
	return &backend.DropIndexResult{}, nil
}

// empty is the stored form of an absent sort key.
var empty = []byte{}

func nz(b []byte) []byte {
	if b == nil {
		return empty
	}
	return b
}
