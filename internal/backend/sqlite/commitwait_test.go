package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

func putN(t *testing.T, b *Backend, ref backend.TableRef, prefix string, n int, pause time.Duration) {
	t.Helper()
	for i := range n {
		_, err := b.WriteItem(context.Background(), backend.WriteItemParams{Table: ref, PK: fmt.Appendf(nil, "%s-%d", prefix, i), Blind: true,
			Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte("{}")}, nil }})
		if err != nil {
			t.Error(err)
			return
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// concurrentPerCommit runs 8 writers, each pausing between its writes
// (as HTTP requests arrive), and returns the writes per commit.
func concurrentPerCommit(t *testing.T, b *Backend, ref backend.TableRef, prefix string) float64 {
	batches0, ops0 := b.batches.Load(), b.batchedOps.Load()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() { putN(t, b, ref, fmt.Sprint(prefix, g), 20, 300*time.Microsecond) })
	}
	wg.Wait()
	return float64(b.batchedOps.Load()-ops0) / float64(b.batches.Load()-batches0)
}

// learnToWait runs concurrentPerCommit until the writer has waited at
// least once (it starts waiting only once it has seen two writes queued
// together, which eight writers in a closed loop offer within a round or
// two unless each commit happens to end before the next write arrives),
// at most five rounds; it returns the writes per commit of the last round.
func learnToWait(t *testing.T, b *Backend, ref backend.TableRef, prefix string) float64 {
	t.Helper()
	for round := range 5 {
		per := concurrentPerCommit(t, b, ref, fmt.Sprint(prefix, round, "-"))
		if b.commitWaits.Load() > 0 {
			return per
		}
	}
	t.Fatal("concurrent writers: the writer never waited in five rounds")
	return 0
}

// TestCommitWait: writers that arrive concurrently, but each a little
// after the previous commit (as HTTP requests do), are gathered into
// larger batches by the commit wait than without it (the same workload
// on the same machine, so the comparison holds under load); a lone
// writer never waits, including right after a concurrent stretch (at
// most one wait to learn it).
func TestCommitWait(t *testing.T) {
	b := openT(t, Options{Path: filepath.Join(t.TempDir(), "db.sqlite"), CommitWait: 20 * time.Millisecond})
	cr, err := b.CreateTable(context.Background(), backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()

	// A lone writer: no wait at all.
	putN(t, b, ref, "lone", 30, 0)
	if w := b.commitWaits.Load(); w != 0 {
		t.Fatalf("a lone writer waited %d times", w)
	}

	// Concurrent writers gather more writes per commit than without the
	// wait (on a quiet machine about 3-4 against 1.3-1.5).
	with := learnToWait(t, b, ref, "c")

	// Alone again: at most one wait to learn it.
	w0 := b.commitWaits.Load()
	putN(t, b, ref, "again", 20, 0)
	if w := b.commitWaits.Load() - w0; w > 1 {
		t.Fatalf("a lone writer after a concurrent stretch waited %d times", w)
	}

	nb := openT(t, Options{Path: filepath.Join(t.TempDir(), "nowait.sqlite"), CommitWait: -1})
	ncr, err := nb.CreateTable(context.Background(), backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	without := concurrentPerCommit(t, nb, ncr.Table.Ref(), "n")
	if nb.commitWaits.Load() != 0 {
		t.Fatalf("CommitWait < 0: the writer waited %d times", nb.commitWaits.Load())
	}
	t.Logf("writes per commit: %.2f with the commit wait, %.2f without", with, without)
	if with <= without {
		t.Fatalf("concurrent writers: %.2f writes per commit with the commit wait, %.2f without: the wait gathered nothing", with, without)
	}
}

// TestCommitWaitFewWriters: two writers in a closed loop never offer a
// third write, so a wait for a batch larger than two runs into the wait's
// end; the writer stops probing for a while after such a wait (doubling
// the while), so the two do not pay the whole wait on every other commit.
func TestCommitWaitFewWriters(t *testing.T) {
	const wait = 20 * time.Millisecond
	b := openT(t, Options{Path: filepath.Join(t.TempDir(), "db.sqlite"), CommitWait: wait})
	cr, err := b.CreateTable(context.Background(), backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	// Eight concurrent writers first: the writer learns to wait.
	learnToWait(t, b, ref, "c")
	batches0, waits0, timeouts0 := b.batches.Load(), b.commitWaits.Load(), b.commitTimeouts.Load()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() { putN(t, b, ref, fmt.Sprint("w", g), 100, 300*time.Microsecond) })
	}
	wg.Wait()
	el := time.Since(start)
	batches, timeouts := b.batches.Load()-batches0, b.commitTimeouts.Load()-timeouts0
	t.Logf("two writers: %d commits, %d waits, %d ended at the wait's end (%v each), %v in all",
		batches, b.commitWaits.Load()-waits0, timeouts, wait, el)
	if timeouts > max(4, batches/10) {
		t.Fatalf("%d of %d commits waited for the whole commit wait: two writers pay it on every other commit", timeouts, batches)
	}
}
