package cassandra

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// snapTable creates a table with n items "k<i>" = "v<i>".
func snapTable(t *testing.T, b *Backend, name string, n int) backend.TableRef {
	t.Helper()
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "snap", Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	for i := range n {
		put(t, b, ref, "k"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	return ref
}

func put(t *testing.T, b *Backend, ref backend.TableRef, k, v string) {
	t.Helper()
	if _, err := b.WriteItem(t.Context(), backend.WriteItemParams{Table: ref, PK: []byte(k),
		Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte(v)}, nil }}); err != nil {
		t.Fatal(err)
	}
}

func drain(t *testing.T, s *backend.TableSnapshot) map[string]string {
	t.Helper()
	out := map[string]string{}
	for {
		r, err := s.Items.Next(t.Context())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[string(r.PK)] = string(r.Item)
	}
}

// TestSnapshotFencesInFlightWriter: a write that read the catalog and the
// item before a snapshot opened, and applies after the open returned,
// must not show in the snapshot (it is fenced by the partition's snapshot
// fence, reads again and keeps the pre-image); likewise a transaction.
func TestSnapshotFencesInFlightWriter(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	ref := snapTable(t, b, "inflight-"+strconv.Itoa(int(randSuffix())), 3)
	var snap *backend.TableSnapshot
	calls := 0
	_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k0"), Fn: func([]byte) (backend.Change, error) {
		calls++
		if snap == nil {
			s, err := b.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: "snap", Name: ref.Name})
			if err != nil {
				return backend.Change{}, err
			}
			snap = s
		}
		return backend.Change{Op: backend.Put, Item: []byte("after")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Items.Close()
	if calls < 2 {
		t.Fatalf("the in-flight write applied without reading again (%d calls)", calls)
	}
	// A transaction whose item was read before the open, locked after.
	var snap2 *backend.TableSnapshot
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{{Table: ref, PK: []byte("k1"),
		Fn: func([]byte) (backend.Change, error) {
			if snap2 == nil {
				s, err := b.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: "snap", Name: ref.Name})
				if err != nil {
					return backend.Change{}, err
				}
				snap2 = s
			}
			return backend.Change{Op: backend.Put, Item: []byte("tx-after")}, nil
		}}, {Table: ref, PK: []byte("k2"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete}, nil
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer snap2.Items.Close()
	if got := drain(t, snap); got["k0"] != "v0" || got["k1"] != "v1" || got["k2"] != "v2" || len(got) != 3 {
		t.Fatalf("first snapshot = %v, want k0..k2 = v0..v2", got)
	}
	if got := drain(t, snap2); got["k0"] != "after" || got["k1"] != "v1" || got["k2"] != "v2" || len(got) != 3 {
		t.Fatalf("second snapshot = %v, want k0=after k1=v1 k2=v2", got)
	}
}

// TestSnapshotSweepsPreImages: closing a snapshot removes its pre-images;
// a write while none is open keeps none.
func TestSnapshotSweepsPreImages(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	ref := snapTable(t, b, "sweep-"+strconv.Itoa(int(randSuffix())), 20)
	s, err := b.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: "snap", Name: ref.Name})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		put(t, b, ref, "k"+strconv.Itoa(i), "w"+strconv.Itoa(i))
	}
	if n := countPre(t, b, ref.ID); n != 25 {
		t.Fatalf("%d pre-images while open, want 25 (20 items and 5 created after the instant)", n)
	}
	got := drain(t, s)
	if len(got) != 20 || got["k7"] != "v7" {
		t.Fatalf("snapshot = %v", got)
	}
	if err := s.Items.Close(); err != nil {
		t.Fatal(err)
	}
	if n := countPre(t, b, ref.ID); n != 0 {
		t.Fatalf("%d pre-images after close, want 0", n)
	}
	put(t, b, ref, "k1", "x")
	if n := countPre(t, b, ref.ID); n != 0 {
		t.Fatalf("%d pre-images after a write with no snapshot open, want 0", n)
	}
	if _, err := s.Items.Next(ctx); err == nil {
		t.Fatal("Next after Close: no error")
	}
}

func countPre(t *testing.T, b *Backend, id int64) int {
	t.Helper()
	n := 0
	err := b.eachPartition(context.Background(), id, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		var c int
		if err := b.query(context.Background(), `SELECT count(*) FROM items WHERE t = ? AND pk = ? AND kind = 3`, id, pk).Scan(&c); err != nil {
			return false, err
		}
		n += c
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLiveReadSnapshotFailsScenario: the snapshot scenario catches a
// "snapshot" that reads live data on this backend.
func TestLiveReadSnapshotFailsScenario(t *testing.T) {
	b := openT(t, keyspace)
	key := func(i int) ([]byte, []byte) { return []byte("h" + strconv.Itoa(i)), nil }
	err := backendtest.SnapshotScenario(t.Context(), b, backendtest.LiveReadSnapshot(b), "snap", "live-"+strconv.Itoa(int(randSuffix())), key, 70, 10)
	if err == nil {
		t.Fatal("the scenario passed a snapshot that reads live data")
	}
}

func randSuffix() uint32 { return rand.Uint32() }

// TestSnapshotOpenRefusesLocksInRaisedPartitions: while an open is pending,
// a transaction may not lock an item in a partition the open has already
// raised (it may hold locks taken before the instant elsewhere): it is
// cancelled with a conflict, and the open then commits.
func TestSnapshotOpenRefusesLocksInRaisedPartitions(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	ref := snapTable(t, b, "pending-"+strconv.Itoa(int(randSuffix())), 2)
	var e int64
	_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{{Table: ref, PK: []byte("k0"),
		Fn: func([]byte) (backend.Change, error) {
			if e == 0 {
				_, ep, err := b.beginOpen(ctx, "snap", ref.Name)
				if err != nil {
					return backend.Change{}, err
				}
				e = ep
				if err := b.fenceSnap(ctx, ref, []byte("k0"), e); err != nil {
					return backend.Change{}, err
				}
			}
			return backend.Change{Op: backend.Put, Item: []byte("tx")}, nil
		}}}})
	if !backend.IsKind(err, backend.KindTransactionConflict) {
		t.Fatalf("a lock in a raised partition during a pending open: %v, want a transaction conflict", err)
	}
	tbl, _, err := b.finishOpen(ctx, ref, e)
	if err != nil || tbl.ID != ref.ID {
		t.Fatalf("finishOpen = %v, %v", tbl, err)
	}
	if err := b.closeEpoch(ctx, ref, e); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("k0")}); err != nil || string(got.Item) != "v0" {
		t.Fatalf("k0 = %v, %v; want v0 (the refused transaction wrote nothing)", got, err)
	}
}
