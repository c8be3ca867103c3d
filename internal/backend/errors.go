package backend

import (
	"errors"
	"fmt"
)

// Kind is the closed set of storage error kinds. The api package maps
// each kind to a DynamoDB error exactly once.
type Kind uint8

const (
	KindInternal Kind = iota
	// KindTableNotFound: the table does not exist.
	KindTableNotFound
	// KindTableExists: a table of that name already exists.
	KindTableExists
	// KindTransactionCanceled: a transaction's write function failed;
	// Reasons holds one entry per operation.
	KindTransactionCanceled
	// KindTransactionConflict: another transaction holds an item.
	KindTransactionConflict
	// KindLimitExceeded: a per-server bound (snapshots, jobs) is reached.
	KindLimitExceeded
	// KindUnavailable: the backend cannot serve now; retryable.
	KindUnavailable
	// KindSnapshotExpired: a snapshot's transaction or session ended.
	KindSnapshotExpired
	// KindUnsupported: the backend or its server cannot do this.
	KindUnsupported
	// KindSchema: the database schema is missing, old or newer than this build.
	KindSchema
	// KindTableVersion: an item write was computed from a table
	// description version that is no longer current (TableRef.Version);
	// nothing was written. Read the table again and recompute the write.
	KindTableVersion
	kindCount
)

var kindNames = [...]string{"internal", "table not found", "table exists", "transaction canceled",
	"transaction conflict", "limit exceeded", "unavailable", "snapshot expired", "unsupported", "schema", "table version changed"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Kinds lists every kind (for tests that walk the error table).
func Kinds() []Kind {
	out := make([]Kind, 0, kindCount)
	for k := Kind(0); k < kindCount; k++ {
		out = append(out, k)
	}
	return out
}

// Error is a storage error.
type Error struct {
	Kind    Kind
	Message string
	// Reasons is set for KindTransactionCanceled: per operation, the error
	// its write function returned, or nil.
	Reasons []error
	Cause   error
}

func (e *Error) Error() string {
	msg := e.Kind.String()
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an *Error of a kind.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error of a kind around a cause.
func Wrap(kind Kind, cause error, msg string) *Error {
	return &Error{Kind: kind, Message: msg, Cause: cause}
}

// KindOf returns the kind of err, or KindInternal with ok=false when err is
// not a storage error.
func KindOf(err error) (Kind, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, true
	}
	return KindInternal, false
}

// IsKind reports whether err is a storage error of kind k.
func IsKind(err error, k Kind) bool {
	kk, ok := KindOf(err)
	return ok && kk == k
}

// VersionChanged is the KindTableVersion error for a write computed from
// ref.Version when the table's description is at version current.
func VersionChanged(ref TableRef, current int64) *Error {
	return Errorf(KindTableVersion, "table %q (id %d): write computed from description version %d, current version %d",
		ref.Name, ref.ID, ref.Version, current)
}
