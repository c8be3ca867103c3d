package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txn is one run of a write transaction on one connection.
type txn struct {
	ctx context.Context
	c   *pgxpool.Conn
	// commitSent is set once a batch holding COMMIT was sent: a
	// connection failure from then on leaves the outcome unknown.
	commitSent bool
}

// send sends a batch and runs its callbacks; the first error is returned.
func (x *txn) send(bt *pgx.Batch) error {
	return x.c.SendBatch(x.ctx, bt).Close()
}

// fail classifies an error of this run after rolling back what is open.
func (x *txn) fail(err error) *attemptErr {
	x.rollback()
	var se *backend.Error
	if errors.As(err, &se) {
		return &attemptErr{err: err}
	}
	if isConflict(err) {
		// The server aborted the transaction: nothing was committed.
		return &attemptErr{err: err, retry: true}
	}
	var pe *pgconn.PgError
	if x.commitSent {
		if errors.As(err, &pe) && pe.Severity == "ERROR" {
			// A statement failed: the COMMIT behind it did not run.
			return &attemptErr{err: err}
		}
		return &attemptErr{err: backend.Wrap(backend.KindUnavailable, err,
			"postgres: connection lost while committing; the write may or may not have been applied")}
	}
	return &attemptErr{err: err, retry: isConnErr(err)}
}

func (x *txn) rollback() {
	if x.c.Conn().IsClosed() || x.c.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if _, err := x.c.Exec(ctx, "ROLLBACK"); err != nil {
		// Release destroys a connection that is not idle.
		x.c.Conn().Close(ctx)
	}
}

// write runs fn as one write transaction, retried while that is safe.
func (b *Backend) write(ctx context.Context, msg string, fn func(x *txn) error) error {
	return b.run(ctx, msg, func() *attemptErr {
		c, err := b.acquire(ctx)
		if err != nil {
			return &attemptErr{err: err, retry: retryableBeforeCommit(err)}
		}
		defer c.Release()
		x := &txn{ctx: ctx, c: c}
		if err := fn(x); err != nil {
			return x.fail(err)
		}
		return nil
	})
}

// attemptErr classifies the failure of one run of an operation.
type attemptErr struct {
	err error
	// retry: nothing was committed and running again may succeed.
	retry bool
}

// retryCeiling bounds the average pause between two attempts of an
// operation (backend.Backoff).
const retryCeiling = 64 * time.Millisecond

// run runs fn up to MaxAttempts times while it fails retryably.
func (b *Backend) run(ctx context.Context, msg string, fn func() *attemptErr) error {
	for attempt := 0; ; attempt++ {
		ae := fn()
		if ae == nil {
			return nil
		}
		if !ae.retry || attempt+1 >= b.opts.MaxAttempts || ctx.Err() != nil || b.closed.Load() {
			return mapErr(ae.err, msg)
		}
		b.retries.Add(1)
		if err := backend.Backoff(ctx, attempt, retryCeiling); err != nil {
			return mapErr(ae.err, msg)
		}
	}
}

// read runs an idempotent read on a pooled connection, retried on
// connection failures and serialization failures.
func (b *Backend) read(ctx context.Context, msg string, fn func(c *pgxpool.Conn) error) error {
	return b.run(ctx, msg, func() *attemptErr {
		c, err := b.acquire(ctx)
		if err != nil {
			return &attemptErr{err: err, retry: retryableBeforeCommit(err)}
		}
		defer c.Release()
		if err := fn(c); err != nil {
			return &attemptErr{err: err, retry: retryableBeforeCommit(err)}
		}
		return nil
	})
}
