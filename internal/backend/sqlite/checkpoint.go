package sqlite

import (
	"context"
	"fmt"
	"os"
	"time"
)

// The checkpoint policy. The writer commits with automatic checkpoints
// off; a background goroutine runs a PASSIVE checkpoint every
// checkpointEvery, copying committed frames back into the database file
// without blocking the writer or readers. A PASSIVE checkpoint never
// restarts the WAL, and SQLite restarts it on its own only when a write
// transaction begins with every frame already copied back — which a
// sustained load never allows, so without a bound the WAL grows for as
// long as the load lasts (hundreds of MiB beside a database of a few).
//
// The bound: after each batch the writer looks at the -wal file's size;
// once the log has passed Options.WALLimitBytes, the writer itself runs a
// RESTART checkpoint before its next batch. It is the only writer, so the
// checkpoint never waits for one; it copies what the background
// checkpoints have not copied yet and waits (at most walBusyWait) for
// readers still reading older frames, so that the next batch starts the
// log over at the beginning of the file. The file is not emptied: the
// next batch overwrites its frames (appending to a file costs about twice
// as much as overwriting it: the file system allocates blocks, and on a
// file system mounted with discard, freeing them costs too; ADR 0029).
// The writer's connection has journal_size_limit set to the limit, so the
// first commit after the restart trims the file back to the limit if a
// batch had grown it past it; the file's size is therefore at most the
// limit while the log's content is, and passes it exactly when the
// content does: one stat per batch stays an exact trigger (size > limit).
// Batching (group commit) is unchanged: the writer pauses once per
// WALLimitBytes of log, not per commit. If readers hold an old snapshot
// past walBusyWait (a long-running read, a reader descheduled on a
// saturated machine), the checkpoint reports busy and the writer goes
// on, trying again after a delay that doubles from walRetryMin to
// walRetryMax while it stays busy: the WAL grows by what is written
// meanwhile (SQLite cannot restart a log that a reader still uses). The
// bound is documented in docs/operations.md.

// DefaultWALLimitBytes is the default Options.WALLimitBytes.
const DefaultWALLimitBytes = 32 << 20

const (
	// checkpointEvery: a page written many times between two checkpoints
	// (a hot index leaf, the right edge of the items table) is copied back
	// once; at 100 ms the copies cost ~10% of a put's server CPU, at 1 s a
	// few percent (ADR 0022). The WAL bound does not depend on it.
	checkpointEvery = time.Second
	walBusyWait     = 200 * time.Millisecond
	walRetryMin     = 50 * time.Millisecond
	walRetryMax     = time.Second
)

// checkpointLoop copies WAL frames back into the database file every
// checkpointEvery with a PASSIVE checkpoint, which never blocks the writer
// or readers.
func (b *Backend) checkpointLoop() {
	defer close(b.ckptDone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stopCkpt:
			return
		case <-t.C:
			// Errors (SQLITE_BUSY while another checkpoint runs) are
			// retried at the next tick.
			b.ckptMu.Lock()
			b.cdb.Exec("PRAGMA wal_checkpoint(PASSIVE)")
			b.ckptMu.Unlock()
		}
	}
}

// boundWAL runs on the writer goroutine between batches: when the WAL has
// passed its limit, a RESTART checkpoint on the writer's connection.
func (b *Backend) boundWAL() {
	if b.opts.WALLimitBytes < 0 {
		return
	}
	st, err := os.Stat(b.walPath)
	if err != nil || st.Size() <= b.opts.WALLimitBytes {
		return
	}
	now := time.Now()
	if now.Before(b.walRetryAt) {
		return
	}
	// Wait for a background checkpoint in progress (its work is done
	// once) rather than fail on SQLite's checkpoint lock.
	b.ckptMu.Lock()
	defer b.ckptMu.Unlock()
	ctx := context.Background()
	c := b.w.conn
	// The checkpoint waits for readers through the busy handler: briefly.
	var busy, logFrames, copied int64
	_, err = c.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", walBusyWait.Milliseconds()))
	if err == nil {
		err = c.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &logFrames, &copied)
		c.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", b.opts.BusyTimeout.Milliseconds()))
	}
	if err != nil || busy != 0 {
		// Back off while readers keep the WAL busy (doubling from
		// walRetryMin to walRetryMax), so that a long snapshot costs the
		// writer at most one walBusyWait per walRetryMax.
		b.walBusy.Add(1)
		b.walBackoff = min(max(2*b.walBackoff, walRetryMin), walRetryMax)
		b.walRetryAt = time.Now().Add(b.walBackoff)
		return
	}
	b.walBackoff = 0
	b.walRestarts.Add(1)
}
