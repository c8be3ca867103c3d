package backend

import (
	"context"
	"time"
)

// ChangeLog is the optional capability of keeping, per table, a log of
// change records written atomically with the items they describe. The
// engine builds DynamoDB Streams on it (shards, iterators and stream
// labels are the engine's; the backend keeps ordered, durable records).
// Design: docs/adr/0018-change-log.md and docs/architecture.md. Callers
// get it from Capabilities.ChangeLog.
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
	// LogInfo describes the readable log: First is the lowest Seq present
	// (0 when no record is); Last is the highest Seq ever assigned (0 when
	// none ever was), kept when its record is trimmed, so a reader can
	// tell "nothing new" from "trimmed"; Count is the number of records
	// present.
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

// checkedLog is a change log under the Checked contract checks: each
// method answers only KindTableNotFound (besides KindInternal and
// KindUnavailable), and what can be checked within one answer is: ReadLog
// returns at most Limit records with Seq after After and strictly
// increasing, At non-decreasing, within MaxBytes unless it is a single
// record; LogInfo is coherent (First 0 exactly when Count is 0, First <=
// Last); TrimLog removes a non-negative number of records.
type checkedLog struct {
	c  *checked
	cl ChangeLog
}

func (l *checkedLog) ReadLog(ctx context.Context, p ReadLogParams) (*ReadLogResult, error) {
	if p.Limit <= 0 {
		return nil, l.c.violation("ReadLog", "called with limit %d (must be > 0)", p.Limit)
	}
	r, err := l.cl.ReadLog(ctx, p)
	if err != nil {
		return nil, l.c.checkErr("ReadLog", err, kindsTable, nil)
	}
	if len(r.Records) > p.Limit {
		return nil, l.c.violation("ReadLog", "%d records for a limit of %d", len(r.Records), p.Limit)
	}
	prev, size := p.After, 0
	for i, rec := range r.Records {
		if rec.Seq <= prev || rec.Seq <= 0 {
			return nil, l.c.violation("ReadLog", "Seq %d after %d (after %d asked): not strictly increasing", rec.Seq, prev, p.After)
		}
		if i > 0 && rec.At.Before(r.Records[i-1].At) {
			return nil, l.c.violation("ReadLog", "At of Seq %d (%v) before At of Seq %d (%v)", rec.Seq, rec.At, prev, r.Records[i-1].At)
		}
		prev = rec.Seq
		size += len(rec.Data)
	}
	if p.MaxBytes > 0 && len(r.Records) > 1 && size > p.MaxBytes {
		return nil, l.c.violation("ReadLog", "%d records of %d bytes for MaxBytes %d", len(r.Records), size, p.MaxBytes)
	}
	return r, nil
}

func (l *checkedLog) LogInfo(ctx context.Context, p LogInfoParams) (*LogInfoResult, error) {
	r, err := l.cl.LogInfo(ctx, p)
	if err != nil {
		return nil, l.c.checkErr("LogInfo", err, kindsTable, nil)
	}
	if r.Count < 0 || (r.Count == 0) != (r.First == 0) || r.First < 0 || r.First > r.Last {
		return nil, l.c.violation("LogInfo", "incoherent answer %+v", *r)
	}
	return r, nil
}

func (l *checkedLog) TrimLog(ctx context.Context, p TrimLogParams) (*TrimLogResult, error) {
	r, err := l.cl.TrimLog(ctx, p)
	if err != nil {
		return nil, l.c.checkErr("TrimLog", err, kindsTable, nil)
	}
	if r.Removed < 0 {
		return nil, l.c.violation("TrimLog", "removed %d records", r.Removed)
	}
	return r, nil
}
