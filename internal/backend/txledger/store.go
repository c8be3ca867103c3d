// Package txledger gives backend.Backend's TransactWrite and TransactGet
// semantics to a backend that has only per-item atomicity (Cassandra's
// lightweight transactions, MongoDB's single-document updates). It needs
// from the backend a small per-item compare-and-set interface (Store):
//
//   - an item record that carries, beside the committed item, a lock: the
//     id of the transaction that holds the item and the change
//     (backend.Change, the "after-image") that transaction will apply;
//   - a compare-and-set on that record keyed by an opaque version that
//     changes with every successful write to it (lock, release, or the
//     backend's own WriteItem);
//   - a ledger of transaction records (PENDING, COMMITTED, ABORTED) with a
//     compare-and-set on the state.
//
// The protocol (docs/adr/0019-transaction-ledger.md):
//
//  1. The coordinator inserts a PENDING transaction record listing every
//     item it may lock.
//  2. It locks the items one by one in a fixed order (table id, pk, sk):
//     read the record, settle a lock held by another transaction (below),
//     run the operation's write function on the committed item, and CAS
//     the record from the version it read to "locked by me with this
//     change". A lost CAS reads again. A failed function evaluates the
//     remaining functions (for the per-operation reasons) and aborts.
//  3. It commits by one CAS on its record, PENDING -> COMMITTED. That CAS
//     is the transaction's commit point.
//  4. It releases every lock by applying the change (item, index entries,
//     change record: what WriteItem would write) and clearing the lock,
//     then deletes its record.
//
// Anyone who meets a lock settles it from the owner's record: COMMITTED
// rolls the item forward (applies the change and unlocks), ABORTED or a
// missing record rolls it back (unlocks, item unchanged); PENDING means a
// live transaction: a writer waits for it (bounded), and may CAS it to
// ABORTED once it is older than Options.LockTimeout (its coordinator is
// presumed dead; a coordinator that itself waits touches its record so it
// never looks that old, docs/adr/0042-waiting-coordinators-touch-their-record.md). A reader (plain or TransactGet) never waits and never
// aborts: the committed item of a record locked by a PENDING or ABORTED
// transaction is the item as stored, of one locked by a COMMITTED
// transaction the after-image; TransactGet reads until two consecutive
// passes agree (docs/adr/0041-transactget-reads-beside-locks.md).
// Sweep finishes transactions whose coordinator died.
//
// A backend provides Store, keeps its own WriteItem and reads lock-aware
// (Ledger.Settle before a write, Ledger.Visible on a read), and calls
// Ledger.Sweep periodically.
package txledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// TxID identifies a transaction (random, 16 bytes: a backend may store it
// as a UUID).
type TxID [16]byte

// NewTxID returns a random id.
func NewTxID() TxID {
	var id TxID
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // a version-4 UUID shape
	id[8] = id[8]&0x3f | 0x80
	return id
}

func (id TxID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports the zero id (no transaction).
func (id TxID) IsZero() bool { return id == TxID{} }

// State is a transaction record's state.
type State uint8

const (
	// Pending: the coordinator is locking items; not decided.
	Pending State = 1
	// Committed: decided; every lock of the transaction rolls forward.
	Committed State = 2
	// Aborted: decided; every lock of the transaction rolls back. A
	// missing record means the same.
	Aborted State = 3
)

func (s State) String() string {
	switch s {
	case Pending:
		return "PENDING"
	case Committed:
		return "COMMITTED"
	case Aborted:
		return "ABORTED"
	}
	return "state(?)"
}

// Key names one item.
type Key struct {
	Table backend.TableRef
	PK    []byte
	SK    []byte
}

// Lock is the lock a transaction holds on an item.
type Lock struct {
	Tx TxID
	// Change is what the transaction applies to the item when it commits
	// (the after-image with its index entries and change record). A Keep
	// change (a condition check) only holds the item.
	Change backend.Change
}

// Record is an item's stored state as the ledger sees it.
type Record struct {
	// Item is the committed item (nil when absent).
	Item []byte
	// Version identifies the record's state: every successful write to the
	// record (LockItem, ReleaseItem, the backend's own WriteItem) changes
	// it, and it never comes back to an earlier value. 0 for an item that
	// was never written.
	Version int64
	// Lock is the transaction holding the item, nil when none.
	Lock *Lock
	// Token is backend-private state read with the record and handed back
	// to LockItem and ReleaseItem (e.g. a partition fence); the ledger
	// never looks at it.
	Token any
}

// TxRecord is a transaction's record in the ledger.
type TxRecord struct {
	ID    TxID
	State State
	// Started is the coordinator's clock when the record was created, or
	// when the coordinator last said it was alive (TouchTx, while it waits
	// for another transaction); a PENDING record older than
	// Options.LockTimeout may be aborted by anyone (clocks of servers
	// sharing a backend must agree to well within LockTimeout).
	Started time.Time
	// Items are every item the transaction may lock (EncodeKeys gives a
	// portable encoding).
	Items []Key
}

// Items is what a backend implements for the ledger. Every method is
// atomic on its own and linearizable with the others on the same item or
// transaction record. Errors are storage errors (the backend's own edge
// mapping): KindTableNotFound for an item of a table that is not live,
// KindUnavailable when the backend cannot answer; an error leaves the
// outcome of a write unknown unless the method says otherwise (the
// ledger then reads again).
type Items interface {
	// ReadItem reads an item's record. It sees every write that completed
	// before it started.
	ReadItem(ctx context.Context, k Key) (Record, error)
	// LockItem sets a lock (tx, ch) on the record, leaving the item as it
	// is, if and only if the record is still at cur.Version (so not locked,
	// since cur was unlocked). It is fenced on k.Table.Version like
	// WriteItem: KindTableVersion, writing nothing, when the table's
	// description version differs. It returns the locked record (its new
	// Version) and applied=false, without error, when the record moved on.
	LockItem(ctx context.Context, k Key, cur Record, tx TxID, ch backend.Change) (locked Record, applied bool, err error)
	// ReleaseItem clears the lock of cur (a record read locked, cur.Lock
	// non-nil) if and only if the record is still at cur.Version. With
	// commit it applies cur.Lock.Change in the same atomic write, exactly
	// as WriteItem applies a Change (item, index entries, change record);
	// without, the item stays as it is. applied=false when the record moved
	// on (someone else released it). It is not fenced on the table
	// version: a decided transaction's changes always land.
	ReleaseItem(ctx context.Context, k Key, cur Record, commit bool) (applied bool, err error)

	// CreateTx inserts a new PENDING record (ids are random and unique).
	CreateTx(ctx context.Context, tx TxRecord) error
	// ReadTx reads a record; nil, nil when there is none.
	ReadTx(ctx context.Context, id TxID) (*TxRecord, error)
	// SetTxState moves a record from state from to state to if it is in
	// state from; applied=false when it is not (or is missing).
	SetTxState(ctx context.Context, id TxID, from, to State) (applied bool, err error)
	// TouchTx sets a PENDING record's Started to at (the coordinator's
	// clock, which only moves forward): its coordinator is alive. alive=false when the record is no
	// longer PENDING or is missing (someone aborted it). The check may
	// race a concurrent decision: the coordinator then learns of it at its
	// commit, as without a touch.
	TouchTx(ctx context.Context, id TxID, at time.Time) (alive bool, err error)
	// DeleteTx removes a record (absent: no error).
	DeleteTx(ctx context.Context, id TxID) error
	// ListTx lists at most limit records started before the instant, in
	// any order (the recovery sweep).
	ListTx(ctx context.Context, startedBefore time.Time, limit int) ([]TxRecord, error)
}
