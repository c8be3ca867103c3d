// Package storage is the contract between the engine and a storage
// backend. The engine owns DynamoDB semantics; a backend owns durability,
// atomicity, isolation and ordering.
//
// Keys reach a backend already encoded (attr.KeyBytes): partition key bytes
// and sort key bytes (empty for hash-only tables) whose unsigned bytewise
// order is DynamoDB's order. Items reach it as canonical DynamoDB-JSON
// bytes (attr.EncodeItem). A backend never parses either.
//
// Every method takes one params struct and returns one result struct, so
// signatures stay stable as the contract grows. A context belongs to one
// call. Errors are *Error values of a closed set of kinds (see errors.go);
// a backend translates its driver's errors at its own edge.
package backend

import (
	"context"
	"time"
)

// Backend is a storage backend.
type Backend interface {
	// Name is the backend's short name ("sqlite", "postgres", ...).
	Name() string

	// CreateTable inserts a table into the catalog. KindTableExists when a
	// table of that name exists in the account.
	CreateTable(ctx context.Context, p CreateTableParams) (*CreateTableResult, error)
	// GetTable reads one table. KindTableNotFound when missing.
	GetTable(ctx context.Context, p GetTableParams) (*GetTableResult, error)
	// ListTables lists table names of an account in ascending byte order,
	// strictly after StartAfter, at most Limit (0 = all).
	ListTables(ctx context.Context, p ListTablesParams) (*ListTablesResult, error)
	// UpdateTable replaces a table's description atomically through a pure
	// function of the current table. KindTableNotFound when missing.
	UpdateTable(ctx context.Context, p UpdateTableParams) (*UpdateTableResult, error)
	// DeleteTable removes a table, its items and index entries.
	// KindTableNotFound when missing.
	DeleteTable(ctx context.Context, p DeleteTableParams) (*DeleteTableResult, error)

	// GetItem reads one item by key; Item is nil when absent.
	GetItem(ctx context.Context, p GetItemParams) (*GetItemResult, error)
	// WriteItem runs Fn on the current item inside the backend's atomic
	// section and applies what it returns, with its index entries, in the
	// same atomic write. Fn may be called more than once (optimistic
	// backends retry), so it must have no side effects. An error returned by
	// Fn aborts the write and is returned unchanged.
	//
	// The write is fenced on Table.Version (see TableRef): when the
	// table's current description version differs, nothing is written, Fn
	// is not called and the answer is KindTableVersion (PostgreSQL's
	// speculative writes, ADR 0028, may have run Fn on a guess and
	// discarded it when another process changed the version after this
	// one last saw it). The check is
	// atomic with the write: an UpdateTable never commits between the
	// check and the write (a write that passed the check is ordered
	// before the UpdateTable, one that did not is refused).
	WriteItem(ctx context.Context, p WriteItemParams) (*WriteItemResult, error)
	// TransactWrite applies several WriteItem operations all-or-nothing.
	// When any Fn fails, nothing is written and the result is a
	// KindTransactionCanceled error whose Reasons hold, per operation in
	// order, the error of the failing Fns (nil for the others). Every
	// operation is fenced on its Table.Version as in WriteItem; one stale
	// version refuses the whole transaction with KindTableVersion (not
	// KindTransactionCanceled) and writes nothing.
	TransactWrite(ctx context.Context, p TransactWriteParams) (*TransactWriteResult, error)
	// TransactGet reads several items from one consistent instant.
	// KindUnsupported from a backend without multi-item isolation.
	TransactGet(ctx context.Context, p TransactGetParams) (*TransactGetResult, error)
	// Query reads items of one partition (of the table or of an index) in
	// sort key order within a byte range.
	Query(ctx context.Context, p QueryParams) (*QueryResult, error)
	// Scan reads items of a table or index in (hash, pk, sk) order,
	// optionally restricted to one segment.
	Scan(ctx context.Context, p ScanParams) (*ScanResult, error)
	// DropIndex removes every entry of one secondary index of a table
	// (after the engine removed the index from the description, or before
	// it adds an index of that name). It is fenced on Table.Version like
	// an item write: KindTableVersion, removing nothing, when the table's
	// description changed since, so a drop decided on an old description
	// never removes the entries of an index created since.
	DropIndex(ctx context.Context, p DropIndexParams) (*DropIndexResult, error)

	// TableStats counts a table's items and each secondary index's
	// entries, and sums Size over their stored bytes, all from one
	// consistent instant. It reads the whole table: the engine calls it in
	// the background, not on a request's path. KindTableNotFound when the
	// table is not live.
	TableStats(ctx context.Context, p TableStatsParams) (*TableStatsResult, error)

	// Capabilities states what the backend can do beyond these methods
	// (snapshots, job catalogs, a change log, bulk loads, statistics).
	// It answers the same set on every call.
	Capabilities() Capabilities

	// Ping checks that the backend answers (readiness).
	Ping(ctx context.Context) error
	// Close releases resources.
	Close() error
}

// Table is a table as the catalog stores it. The description is owned by
// the engine and opaque to the backend.
type Table struct {
	Account string
	Name    string
	// ID identifies this incarnation of the table; a table deleted and
	// created again under the same name gets a new ID.
	ID int64
	// Desc is the engine's serialized description of the table.
	Desc []byte
	// Version increases with every UpdateTable.
	Version int64
	// CreatedAt is the creation instant on the backend's clock.
	CreatedAt time.Time
}

// TableRef names a table incarnation for item operations. Every item
// operation (reads included) on an ID that is not a live table answers
// KindTableNotFound, also after a table of the same name was created again.
//
// Version is the description version (Table.Version) that an item write
// was computed from: which indexes it maintains, their key schemas and
// projections, the TTL attribute. Item writes (WriteItem, TransactWrite)
// are fenced on it: the backend compares it with the table's current
// version atomically with the write and answers KindTableVersion, writing
// nothing, when they differ. The caller then reads the table again and
// recomputes the write from the fresh description (write functions are
// pure, so running the computation again is safe). This is what keeps
// index entries exact when several servers share a backend and one of
// them caches a description that another has just changed: a write
// computed without a new index can never land after the index exists.
// DropIndex is fenced the same way. Reads and the catalog operations
// ignore Version.
type TableRef struct {
	Account string
	Name    string
	ID      int64
	Version int64
}

// Ref is the table's TableRef at its current description version.
func (t *Table) Ref() TableRef {
	return TableRef{Account: t.Account, Name: t.Name, ID: t.ID, Version: t.Version}
}

type CreateTableParams struct {
	Account string
	Name    string
	Desc    []byte
}

type CreateTableResult struct{ Table *Table }

type GetTableParams struct {
	Account string
	Name    string
}

type GetTableResult struct{ Table *Table }

type ListTablesParams struct {
	Account    string
	StartAfter string
	Limit      int
}

type ListTablesResult struct{ Names []string }

type UpdateTableParams struct {
	Account string
	Name    string
	// Fn returns the new description; an error aborts unchanged.
	Fn func(old *Table) ([]byte, error)
}

type UpdateTableResult struct{ Table *Table }

type DeleteTableParams struct {
	Account string
	Name    string
}

type DeleteTableResult struct{ Table *Table }

type GetItemParams struct {
	Table TableRef
	PK    []byte
	SK    []byte
	// Eventual: the caller accepts an eventually consistent answer
	// (DynamoDB's default read). A backend may then answer from a copy
	// that lags writes made through other servers for a bounded time it
	// documents; it must still reflect every write this backend
	// acknowledged before the call. False: the latest committed item.
	Eventual bool
}

type GetItemResult struct {
	// Item is the canonical item bytes, nil when absent.
	Item []byte
}

// IndexKey identifies an entry of a secondary index.
type IndexKey struct {
	Index string
	PK    []byte
	SK    []byte
}

// IndexEntry is an index key with the projected item bytes it holds.
type IndexEntry struct {
	IndexKey
	Item []byte
}

type DropIndexParams struct {
	Table TableRef
	Index string
}

type DropIndexResult struct{}

type TableStatsParams struct {
	Table TableRef
	// Size returns what one stored item or index entry counts towards
	// SizeBytes; nil counts its length in bytes. It must not retain its
	// argument.
	Size func(item []byte) int64
}

type TableStatsResult struct {
	ItemCount int64
	SizeBytes int64
	// Indexes holds, per index name, the entries of every index that has
	// at least one.
	Indexes map[string]IndexStats
}

// IndexStats counts the entries of one secondary index.
type IndexStats struct {
	ItemCount int64
	SizeBytes int64
}

// Change is what a write function decides. A backend applies DeleteIndex
// before PutIndex, so an entry may be deleted and written again in one
// change. A Delete of an absent item still removes the index keys it
// names (how an orphan index entry is cleaned up); a Keep changes
// nothing, index entries included.
type Change struct {
	// Op is the action: Put the new item, Delete the current one, or
	// Keep (change nothing, e.g. a condition check).
	Op ChangeOp
	// Item is the new canonical item for Put.
	Item []byte
	// DeleteIndex are the current item's index entries to remove.
	DeleteIndex []IndexKey
	// PutIndex are the new item's index entries to write.
	PutIndex []IndexEntry
	// Log is this write's change record (a DynamoDB Streams record),
	// encoded by the engine and opaque to the backend; nil when the table
	// has no stream or the write changes nothing. A backend that
	// implements ChangeLog appends it to the table's log in the same
	// atomic write as the item (see changelog.go). Ignored with Keep.
	Log []byte
}

type ChangeOp uint8

const (
	Keep ChangeOp = iota
	Put
	Delete
)

// WriteFunc decides a change from the current item bytes (nil when absent).
type WriteFunc func(old []byte) (Change, error)

type WriteItemParams struct {
	Table TableRef
	PK    []byte
	SK    []byte
	Fn    WriteFunc
	// Blind tells that Fn ignores the current item and that the caller
	// does not need WriteItemResult.Old: a backend may skip reading it
	// and pass nil.
	Blind bool
}

type WriteItemResult struct {
	// Old is the item before the write (nil when absent).
	Old []byte
	// Change is what Fn returned for the applied run.
	Change Change
}

type TransactWriteParams struct {
	Ops []WriteItemParams
}

type TransactWriteResult struct {
	Results []WriteItemResult
}

type TransactGetParams struct {
	Keys []GetItemParams
}

type TransactGetResult struct {
	Items [][]byte
}

// Bound is one end of a sort key range.
type Bound struct {
	Key       []byte
	Inclusive bool
}

// Row is one item returned by Query or Scan with its keys. For an index,
// PK/SK are the index keys and BasePK/BaseSK the table keys; for the table,
// BasePK/BaseSK equal PK/SK. The sort key of a hash-only table (or index)
// is empty. Row slices may share one buffer: callers must not append to
// them.
type Row struct {
	PK, SK         []byte
	BasePK, BaseSK []byte
	Item           []byte
}

// Cursor is an exclusive start position. For the table, PK/SK; for an
// index, PK/SK are index keys and BasePK/BaseSK the table keys.
type Cursor struct {
	PK, SK         []byte
	BasePK, BaseSK []byte
}

type QueryParams struct {
	Table TableRef
	// Index is the secondary index name, "" for the table.
	Index string
	PK    []byte
	// Lower and Upper bound the sort key; nil means unbounded.
	Lower, Upper *Bound
	// Forward is ascending sort key order.
	Forward bool
	// After resumes strictly after this position (in the scan direction).
	After *Cursor
	// Limit is the maximum number of rows (must be > 0).
	Limit int
}

type QueryResult struct {
	Rows []Row
	// More is true when rows may remain after the last one returned.
	More bool
}

type ScanParams struct {
	Table TableRef
	Index string
	// Segment and TotalSegments split the key space by KeyHash; Total 0
	// or 1 is the whole table.
	Segment, TotalSegments int
	After                  *Cursor
	Limit                  int
}

type ScanResult struct {
	Rows []Row
	More bool
}

// KeyHash is the stable partition hash that orders Scan and splits it into
// segments: FNV-1a of the partition key bytes. It is persisted by backends,
// so it must never change.
func KeyHash(pk []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range pk {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// SegmentRange returns the inclusive hash range [lo, hi] of a segment.
func SegmentRange(segment, total int) (lo, hi uint32) {
	if total <= 1 {
		return 0, 0xFFFFFFFF
	}
	span := uint64(1<<32) / uint64(total)
	l := uint64(segment) * span
	h := l + span - 1
	if segment == total-1 {
		h = 0xFFFFFFFF
	}
	return uint32(l), uint32(h)
}
