package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The snapshot section (docs/backup-design.md section 3): a backend that
// implements backend.Snapshotter must give one table as of one instant,
// lazily, whatever is written meanwhile. A backend without the capability
// is reported loudly, never skipped silently.

// snapshotShape is a key shape of the snapshot scenario.
type snapshotShape struct {
	name string
	key  func(i int) (pk, sk []byte)
}

var snapshotShapes = []snapshotShape{
	{"S-hash_S-range", func(i int) ([]byte, []byte) {
		return strKey("part-" + strconv.Itoa(i%7)), strKey(fmt.Sprintf("s%04d", i))
	}},
	{"S-hash", func(i int) ([]byte, []byte) { return strKey(fmt.Sprintf("h%04d", i)), nil }},
	{"N-hash", func(i int) ([]byte, []byte) { return numKey(strconv.Itoa(i-35) + ".5"), nil }},
	{"B-hash", func(i int) ([]byte, []byte) { return []byte{byte(i % 3 * 0x7F), byte(i), 0xFF}, nil }},
	{"S-hash_N-range", func(i int) ([]byte, []byte) {
		// "-1" < "-10" as text, not as numbers; "10" < "9" likewise.
		return strKey("p" + strconv.Itoa(i%3)), numKey(strconv.Itoa(i - 35))
	}},
	{"S-hash_B-range", func(i int) ([]byte, []byte) {
		return strKey("p" + strconv.Itoa(i%3)), []byte{byte(i), 0x00, byte(255 - i)}
	}},
	{"S-hash_collation-S-range", func(i int) ([]byte, []byte) {
		return strKey("p" + strconv.Itoa(i%3)), strKey(orderStrings[i%len(orderStrings)] + strconv.Itoa(i))
	}},
}

func testSnapshot(e *env) {
	se := e.b.Capabilities().Snapshots
	if se == nil {
		msg := fmt.Sprintf("storage snapshot capability NOT exercised: backend %s declares it absent (no backend.Snapshotter)", e.b.Name())
		fmt.Println(msg)
		e.t.Log(msg)
		return
	}
	// The shapes run at once, each on its own table (a scenario waits on
	// round trips far more than on the backend's CPU), their opens
	// waiting for a slot when the backend's bound on open snapshots is
	// reached (snapshotLimitAndMissing checks the bound itself); Run
	// returns when all have ended.
	ok := e.t.Run("shapes", func(t *testing.T) {
		se := slotWaiter{se}
		for i, shape := range snapshotShapes {
			t.Run(shape.name, func(t *testing.T) {
				t.Parallel()
				n, changed := 70, 10 // every shape, small
				if i == 0 {
					n, changed = 700, 100 // the full scenario once
				}
				if err := SnapshotScenario(e.ctx, e.b, se, e.account, e.tableName("snap-"+shape.name), shape.key, n, changed); err != nil {
					t.Fatalf("snapshot scenario, key shape %s: %v", shape.name, err)
				}
			})
		}
	})
	if !ok {
		e.t.FailNow()
	}
	// After the shapes: it counts the snapshots open against the bound.
	if err := snapshotLimitAndMissing(e.ctx, e.b, se, e.account, e.tableName("snap-limit")); err != nil {
		e.t.Fatal(err)
	}
	fmt.Printf("storage snapshot capability exercised: %s\n", e.b.Name())
}

// SnapshotScenario runs the snapshot conformance scenario on one table
// (created here) and returns the first violation. n items are loaded;
// after a few are read from an open snapshot, a writer deletes `changed`
// of them, inserts `changed` new ones and overwrites the others twice; the
// drained snapshot must hold exactly the n original items with their
// original values, and the stream must have fetched from the backend after
// the writer committed. Then an open is paused between pinning and the
// items while a write and a description change commit: the snapshot must
// show neither. It is exported so that a backend's tests can also prove it
// fails on a broken snapshot (see LiveReadSnapshot).
func SnapshotScenario(ctx context.Context, b backend.Backend, se backend.Snapshotter, account, name string,
	key func(i int) (pk, sk []byte), n, changed int) error {
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: name, Desc: []byte("desc-v1")})
	if err != nil {
		return fmt.Errorf("CreateTable: %w", err)
	}
	ref := cr.Table.Ref()
	want := map[string]string{} // key -> item at the open
	type kv struct{ pk, sk []byte }
	keys := make([]kv, n)
	for i := range keys {
		pk, sk := key(i)
		keys[i] = kv{pk, sk}
	}
	write := snapshotWriter(ctx, b, ref)
	if err := parallel(n, func(i int) error {
		return write(keys[i].pk, keys[i].sk, backend.Put, "orig-"+strconv.Itoa(i))
	}); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	for i, k := range keys {
		want[string(k.pk)+"\x00"+string(k.sk)] = "orig-" + strconv.Itoa(i)
	}
	if len(want) != n {
		return fmt.Errorf("key shape yields %d distinct keys for %d items", len(want), n)
	}

	const page = 50
	snap, err := se.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: account, Name: name, PageSize: page})
	if err != nil {
		return fmt.Errorf("OpenTableSnapshot: %w", err)
	}
	defer snap.Items.Close()
	if snap.Table.ID != ref.ID || string(snap.Table.Desc) != "desc-v1" {
		return fmt.Errorf("snapshot table: id %d desc %q, want %d %q", snap.Table.ID, snap.Table.Desc, ref.ID, "desc-v1")
	}
	if snap.Descriptor.Kind == "" {
		return errors.New("snapshot descriptor has no kind")
	}
	got := map[string]string{}
	var prev []byte
	add := func(r backend.Row) error {
		k := string(r.PK) + "\x00" + string(r.SK)
		if _, dup := got[k]; dup {
			return fmt.Errorf("key %x/%x streamed twice", r.PK, r.SK)
		}
		got[k] = string(r.Item)
		if !bytes.Equal(r.BasePK, r.PK) || !bytes.Equal(r.BaseSK, r.SK) {
			return fmt.Errorf("row %x/%x: base keys %x/%x differ", r.PK, r.SK, r.BasePK, r.BaseSK)
		}
		if snap.KeyOrder {
			cur := append(append(append([]byte{}, r.PK...), 0), r.SK...)
			if prev != nil && bytes.Compare(prev, cur) >= 0 {
				return fmt.Errorf("snapshot claims key order but %x/%x follows a greater or equal key", r.PK, r.SK)
			}
			prev = cur
		}
		return nil
	}
	for range 10 {
		r, err := snap.Items.Next(ctx)
		if err != nil {
			return fmt.Errorf("snapshot Next before the writer: %w", err)
		}
		if err := add(r); err != nil {
			return err
		}
	}
	fetchedBefore := snap.Items.Fetches()

	// The writer: delete `changed`, insert `changed`, overwrite the rest
	// twice, all committed while the snapshot is open.
	err = parallel(n, func(i int) error {
		k := keys[i]
		if i%(n/changed) == 0 {
			return write(k.pk, k.sk, backend.Delete, "")
		}
		if err := write(k.pk, k.sk, backend.Put, "w1-"+strconv.Itoa(i)); err != nil {
			return err
		}
		return write(k.pk, k.sk, backend.Put, "w2-"+strconv.Itoa(i))
	})
	if err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	if err := parallel(changed, func(i int) error {
		pk, sk := key(n + i)
		return write(pk, sk, backend.Put, "new-"+strconv.Itoa(i))
	}); err != nil {
		return fmt.Errorf("writer inserts: %w", err)
	}

	for {
		r, err := snap.Items.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("snapshot Next after the writer: %w", err)
		}
		if err := add(r); err != nil {
			return err
		}
	}
	if snap.Items.Fetches() <= fetchedBefore {
		return fmt.Errorf("the stream fetched nothing after the writer committed (%d fetches before, %d in all): it is not lazy",
			fetchedBefore, snap.Items.Fetches())
	}
	if err := sameItems(got, want); err != nil {
		return fmt.Errorf("drained snapshot: %w", err)
	}
	if err := snap.Items.Close(); err != nil {
		return fmt.Errorf("snapshot Close: %w", err)
	}
	if _, err := snap.Items.Next(ctx); err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("snapshot Next after Close: %v, want an error", err)
	}

	newPK, newSK := key(n + changed + 1)
	return snapshotPausedOpen(ctx, b, se, account, name, ref, write, newPK, newSK, keys[1].pk, keys[1].sk)
}

// slotWaiter opens snapshots, waiting while the backend's bound on open
// snapshots is reached (by the other shapes running at once).
type slotWaiter struct{ backend.Snapshotter }

func (w slotWaiter) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	for {
		s, err := w.Snapshotter.OpenTableSnapshot(ctx, p)
		if !backend.IsKind(err, backend.KindLimitExceeded) {
			return s, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// snapshotWriter writes the scenario's items: a Put of val (with an entry
// in a GSI "g", partitioned by the value's last digit) or a Delete.
func snapshotWriter(ctx context.Context, b backend.Backend, ref backend.TableRef) func(pk, sk []byte, op backend.ChangeOp, val string) error {
	return func(pk, sk []byte, op backend.ChangeOp, val string) error {
		ch := backend.Change{Op: op}
		if op == backend.Put {
			ch.Item = []byte(val)
			// An entry in a GSI "g", partitioned by the value's last digit.
			ch.PutIndex = []backend.IndexEntry{ixe("g", strKey("g"+val[len(val)-1:]), append(append([]byte{}, pk...), sk...), val)}
		}
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk,
			Fn: func([]byte) (backend.Change, error) { return ch, nil }})
		return err
	}
}

// snapshotPausedOpen: an open paused between pinning and the items while
// a write of a new key (newPK, newSK), an overwrite of an existing key
// (oldPK, oldSK) and a description change commit shows none of them: the
// description and the items come from one instant.
func snapshotPausedOpen(ctx context.Context, b backend.Backend, se backend.Snapshotter, account, name string, ref backend.TableRef,
	write func(pk, sk []byte, op backend.ChangeOp, val string) error, newPK, newSK, oldPK, oldSK []byte) error {
	// Paused open: description and items come from one instant.
	before := map[string]string{}
	live, err := scanLive(ctx, b, ref)
	if err != nil {
		return err
	}
	for _, r := range live {
		before[string(r.PK)+"\x00"+string(r.SK)] = string(r.Item)
	}
	tbl, err := b.GetTable(ctx, backend.GetTableParams{Account: account, Name: name})
	if err != nil {
		return err
	}
	var hookErr error
	snap2, err := se.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: account, Name: name, PageSize: 7, AfterPin: func() {
		if err := write(newPK, newSK, backend.Put, "during-pause-1"); err != nil {
			hookErr = err
			return
		}
		if err := write(oldPK, oldSK, backend.Put, "during-pause-2"); err != nil {
			hookErr = err
			return
		}
		_, hookErr = b.UpdateTable(ctx, backend.UpdateTableParams{Account: account, Name: name,
			Fn: func(old *backend.Table) ([]byte, error) { return []byte("desc-v2-with-gsi-g2"), nil }})
	}})
	if err != nil {
		return fmt.Errorf("paused OpenTableSnapshot: %w", err)
	}
	defer snap2.Items.Close()
	if hookErr != nil {
		return fmt.Errorf("writes during the paused open: %w", hookErr)
	}
	if string(snap2.Table.Desc) != "desc-v1" || snap2.Table.Version != tbl.Table.Version {
		return fmt.Errorf("paused open: description %q version %d, want %q version %d (the description is not from the pinned instant)",
			snap2.Table.Desc, snap2.Table.Version, "desc-v1", tbl.Table.Version)
	}
	got2 := map[string]string{}
	for {
		r, err := snap2.Items.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("paused open Next: %w", err)
		}
		got2[string(r.PK)+"\x00"+string(r.SK)] = string(r.Item)
	}
	if err := sameItems(got2, before); err != nil {
		return fmt.Errorf("paused open: items are not from the pinned instant: %w", err)
	}
	return nil
}

// snapshotLimitAndMissing: a missing table is KindTableNotFound; opening
// past the server's bound answers KindLimitExceeded at once, and closing
// one frees a slot.
func snapshotLimitAndMissing(ctx context.Context, b backend.Backend, se backend.Snapshotter, account, name string) error {
	if _, err := se.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: account, Name: name}); !backend.IsKind(err, backend.KindTableNotFound) {
		return fmt.Errorf("snapshot of a missing table: %v, want table not found", err)
	}
	if _, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: name, Desc: []byte("d")}); err != nil {
		return err
	}
	var open []*backend.TableSnapshot
	defer func() {
		for _, s := range open {
			s.Items.Close()
		}
	}()
	for len(open) < 64 {
		start := time.Now()
		s, err := se.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: account, Name: name})
		if backend.IsKind(err, backend.KindLimitExceeded) {
			if d := time.Since(start); d > 2*time.Second {
				return fmt.Errorf("the open over the bound waited %v before LimitExceeded", d)
			}
			if len(open) == 0 {
				return errors.New("LimitExceeded with no snapshot open")
			}
			open[0].Items.Close()
			s, err := se.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: account, Name: name})
			if err != nil {
				return fmt.Errorf("open after closing one: %w", err)
			}
			open[0] = s
			return nil
		}
		if err != nil {
			return fmt.Errorf("open #%d: %w", len(open)+1, err)
		}
		open = append(open, s)
	}
	return errors.New("64 snapshots opened at once: open snapshots are not bounded")
}

func sameItems(got, want map[string]string) error {
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			return fmt.Errorf("key %x missing (of %d wanted, %d got)", k, len(want), len(got))
		}
		if g != v {
			return fmt.Errorf("key %x: item %q, want %q", k, g, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("key %x (item %q) was not in the table at the instant", k, v)
		}
	}
	return nil
}

func scanLive(ctx context.Context, b backend.Backend, ref backend.TableRef) ([]backend.Row, error) {
	var out []backend.Row
	var after *backend.Cursor
	for {
		res, err := b.Scan(ctx, backend.ScanParams{Table: ref, After: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, r := range res.Rows {
			out = append(out, backend.Row{PK: bytes.Clone(r.PK), SK: bytes.Clone(r.SK), Item: bytes.Clone(r.Item)})
		}
		if !res.More || len(res.Rows) == 0 {
			return out, nil
		}
		last := res.Rows[len(res.Rows)-1]
		after = &backend.Cursor{PK: last.PK, SK: last.SK}
	}
}

// parallel runs fn(0..n-1) on 8 goroutines and returns the first error.
func parallel(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// LiveReadSnapshot wraps a backend in a deliberately broken snapshot that
// reads live data (the catalog row, then Scan pages) with no pinned
// instant. Backends' tests run SnapshotScenario against it to prove the
// scenario catches a snapshot that is not one.
func LiveReadSnapshot(b backend.Backend) backend.Snapshotter { return liveSnapshot{b} }

type liveSnapshot struct{ b backend.Backend }

func (l liveSnapshot) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	if p.AfterPin != nil {
		p.AfterPin()
	}
	res, err := l.b.GetTable(ctx, backend.GetTableParams{Account: p.Account, Name: p.Name})
	if err != nil {
		return nil, err
	}
	ref := res.Table.Ref()
	fetch := func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		r, err := l.b.Scan(ctx, backend.ScanParams{Table: ref, After: after, Limit: limit})
		if err != nil {
			return nil, false, err
		}
		return r.Rows, r.More, nil
	}
	return &backend.TableSnapshot{Table: res.Table, At: time.Now(), Descriptor: backend.SnapshotDescriptor{Kind: "live_reads"},
		Items: backend.NewSnapshotStream(fetch, p.PageSize, nil)}, nil
}
