package storage

import (
	"context"
	"time"
)

// ChangeLog is the optional capability of keeping, per table, a log of
// change records written atomically with the items they describe. The
// engine builds DynamoDB Streams on it (shards, iterators and stream
// labels are the engine's; the backend keeps ordered, durable records).
// Design: docs/adr (the change log ADR) and docs/architecture.md.
//
// The contract:
//
//   - Atomicity. A Change with a non-nil Log is applied with its record in
//     one atomic write (WriteItem or TransactWrite): no acknowledged write
//     is ever without its record, and no record exists for a write that
//     did not happen (a failed condition, a canceled transaction, a
//     KindTableVersion refusal, a crash before commit).
//   - Order. Every record gets a sequence number Seq > 0, strictly
//     increasing per table in the order records become readable. Two
//     writes of one item have their records in commit order. Seq values
//     need not be contiguous.
//   - No late gaps. Once ReadLog has returned records up to Seq S, no
//     record with Seq <= S ever appears later. A backend whose
//     transactions can commit out of sequence order (PostgreSQL, or one
//     that keeps records beside the item and moves them later) publishes
//     records to the readable log in a separate, serialized step; ReadLog
//     and LogInfo run that step first, so every record whose write was
//     acknowledged before the call started is readable by the call.
//   - Time. At is the backend's clock when the record became readable,
//     non-decreasing in Seq, so TrimLog removes a prefix.
//   - Lifetime. The log belongs to the table incarnation (TableRef.ID):
//     DeleteTable removes it, and every method answers KindTableNotFound
//     for an ID that is not a live table. Records survive crashes like
//     items do. Records are only removed by TrimLog and DeleteTable.
type ChangeLog interface {
	// ReadLog returns the table's records with Seq > After in ascending
	// Seq order: at most Limit (> 0) records, and stops before the record
	// that would take the sum of len(Data) over MaxBytes (0: no byte
	// bound), though it always returns at least one record when one
	// exists.
	ReadLog(ctx context.Context, p ReadLogParams) (*ReadLogResult, error)
	// LogInfo describes the readable log: the first and last Seq present
	// (0 and 0 when empty; Last is the highest Seq ever assigned even when
	// trimmed since, so a reader can tell "nothing new" from "trimmed")
	// and the number of records present.
	LogInfo(ctx context.Context, p LogInfoParams) (*LogInfoResult, error)
	// TrimLog removes the records whose At is before Before.
	TrimLog(ctx context.Context, p TrimLogParams) (*TrimLogResult, error)
}

// LogRecord is one change record.
type LogRecord struct {
	Seq  int64
	At   time.Time
	Data []byte
}

type ReadLogParams struct {
	Table    TableRef
	After    int64
	Limit    int
	MaxBytes int
}

type ReadLogResult struct {
	Records []LogRecord
}

type LogInfoParams struct{ Table TableRef }

type LogInfoResult struct {
	First, Last int64
	Count       int64
}

type TrimLogParams struct {
	Table  TableRef
	Before time.Time
}

type TrimLogResult struct{ Removed int64 }

// ChangeLogs returns the backend's change log capability, looking through
// wrappers; ok is false when the backend does not have it. Callers use it
// rather than a type assertion on a (possibly wrapped) Backend.
func ChangeLogs(b Backend) (ChangeLog, bool) {
	cl, ok := Unwrap(b).(ChangeLog)
	return cl, ok
}
