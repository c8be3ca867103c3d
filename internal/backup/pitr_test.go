package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/faultstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
)

// testPITR is the engine's side for these tests: the listed tables have
// PITR on, and a change record is a segment line's JSON.
type testPITR struct {
	mu     sync.Mutex
	tables []PITRTable
}

func (p *testPITR) PITRTables(ctx context.Context) ([]PITRTable, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PITRTable(nil), p.tables...), nil
}

func (p *testPITR) PITRRecord(data []byte) (format.PITRRecord, error) {
	var r format.PITRRecord
	err := json.Unmarshal(data, &r)
	return r, err
}

// logPut writes item i with a change record naming it and v.
func logPut(t *testing.T, b backend.Backend, ref backend.TableRef, i int, v string) {
	t.Helper()
	pk, sk, raw := item(i, v)
	rec, _ := json.Marshal(format.PITRRecord{Event: "INSERT", Keys: json.RawMessage(fmt.Sprintf(`{"i":{"N":"%d"}}`, i)), NewImage: raw})
	if _, err := b.WriteItem(context.Background(), backend.WriteItemParams{Table: ref, PK: pk, SK: sk,
		Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: raw, Log: rec}, nil }}); err != nil {
		t.Fatal(err)
	}
}

func pitrTable(ref backend.TableRef) PITRTable {
	return PITRTable{Ref: ref, TableID: fmt.Sprintf("tid-%d", ref.ID), TableArn: "arn:aws:dynamodb:us-east-1:" + account + ":table/" + ref.Name,
		Days: 35, Since: time.UnixMilli(1_700_000_000_000), Description: json.RawMessage(`{}`)}
}

func newShipper(t *testing.T, m *Manager, src PITRSource) *Shipper {
	t.Helper()
	s, err := NewShipper(m, src, PITRConfig{SegmentMaxBytes: 4 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// shippedSeqs reads a history back through ReadHistory.
func shippedSeqs(t *testing.T, st blobstore.Store, prefix string) []int64 {
	t.Helper()
	var seqs []int64
	if err := ReadHistory(context.Background(), st, prefix, func(recs []format.PITRRecord) error {
		for _, r := range recs {
			seqs = append(seqs, r.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func logSeqs(t *testing.T, b backend.Backend, ref backend.TableRef, after int64) []int64 {
	t.Helper()
	cl := b.Capabilities().ChangeLog
	res, err := cl.ReadLog(context.Background(), backend.ReadLogParams{Table: ref, After: after, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range res.Records {
		out = append(out, r.Seq)
	}
	return out
}

func headStart(t *testing.T, st blobstore.Store, prefix string) int64 {
	t.Helper()
	b, err := readObject(context.Background(), st, format.PITRHeadKey(prefix))
	if err != nil {
		t.Fatal(err)
	}
	var h pitrHead
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h.Start
}

// TestPITRShipsEachRecordOnce: two servers' shippers on one database and
// store, racing each other and the writers, publish every record of the
// log after the history's start exactly once, in a verified chain, with a
// base; the window covers the last write.
func TestPITRShipsEachRecordOnce(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "ship1")
		for i := 0; i < 20; i++ {
			logPut(t, b, ref, i, "before")
		}
		src := &testPITR{tables: []PITRTable{pitrTable(ref)}}
		m1 := newManager(t, b, st, nil)
		m2 := newManager(t, otherServer(b), st, nil)
		s1, s2 := newShipper(t, m1, src), newShipper(t, m2, src)
		s2.ShipOnce(ctx) // the history starts after the 20 writes
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for _, s := range []*Shipper{s1, s2} {
			wg.Add(1)
			go func(s *Shipper) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					s.ShipOnce(ctx)
				}
			}(s)
		}
		for i := 0; i < 300; i++ {
			logPut(t, b, ref, i%40, fmt.Sprint("v", i))
		}
		close(stop)
		wg.Wait()
		s1.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "ship1", pitrTable(ref).Incarnation())
		start := headStart(t, st, prefix)
		got, want := shippedSeqs(t, st, prefix), logSeqs(t, b, ref, start)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("shipped %d records %v\nlog after %d: %d records %v", len(got), got, start, len(want), want)
		}
		if len(want) != 300 || start != logSeqs(t, b, ref, 0)[19] {
			t.Fatalf("%d records after the start %d", len(want), start)
		}
		bases, err := s1.listBases(ctx, prefix)
		if err != nil || len(bases) == 0 {
			t.Fatalf("bases %v %v", bases, err)
		}
		// backup sync takes neither the history nor its bases for backups.
		m1.Close()
		m2.Close()
		entries, err := Sync(ctx, b, st, descJSON{}, SyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.Contains(e.Prefix, "/pitr") {
				t.Fatalf("sync reported a history object: %+v", e)
			}
		}
		e, l, shipped := s1.Window(ref, 35)
		if e.IsZero() || l.Before(e) || shipped.IsZero() || time.Since(l) > time.Minute {
			t.Fatalf("window %v %v %v", e, l, shipped)
		}
	})
}

// TestPITRCrashBetweenSegmentAndSidecar: a shipper that dies after a
// segment is published and before its sidecar leaves a history that the
// next shipper completes and continues, every record once.
func TestPITRCrashBetweenSegmentAndSidecar(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "ship2")
		src := &testPITR{tables: []PITRTable{pitrTable(ref)}}
		crash := true
		m1 := newManager(t, b, st, func(c *Config) {
			c.Hook = func(p string) {
				if p == PointPITRAfterSegment && crash {
					panic("crash")
				}
			}
		})
		s1 := newShipper(t, m1, src)
		s1.ShipOnce(ctx) // head and base
		for i := 0; i < 30; i++ {
			logPut(t, b, ref, i, "a")
		}
		func() {
			defer func() { recover() }()
			s1.ShipOnce(ctx)
		}()
		prefix := format.PITRPrefix(account, "ship2", pitrTable(ref).Incarnation())
		if seqs := shippedSeqs(t, st, prefix); len(seqs) != 0 {
			t.Fatalf("a segment without its sidecar counted: %v", seqs)
		}
		crash = false
		for i := 0; i < 10; i++ {
			logPut(t, b, ref, i, "b")
		}
		s2 := newShipper(t, newManager(t, otherServer(b), st, nil), src)
		s2.ShipOnce(ctx)
		if got, want := shippedSeqs(t, st, prefix), logSeqs(t, b, ref, headStart(t, st, prefix)); fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 40 {
			t.Fatalf("shipped %v, log %v", got, want)
		}
	})
}

// TestPITRStoreOutage: while the store refuses writes, shipping stalls
// (counted as errors) and writes go on; it catches up afterwards.
func TestPITRStoreOutage(t *testing.T) {
	ctx := context.Background()
	b := backends(t)[0].open(t)
	fs := faultstore.New(memstore.New())
	ref := createTable(t, b, "ship3")
	src := &testPITR{tables: []PITRTable{pitrTable(ref)}}
	s := newShipper(t, newManager(t, b, fs, nil), src)
	s.ShipOnce(ctx)
	fs.Inject(faultstore.Fault{Op: faultstore.OpPutIfAbsent})
	fs.Inject(faultstore.Fault{Op: faultstore.OpPut})
	for i := 0; i < 50; i++ {
		logPut(t, b, ref, i, "x")
	}
	s.ShipOnce(ctx)
	prefix := format.PITRPrefix(account, "ship3", pitrTable(ref).Incarnation())
	if n := len(shippedSeqs(t, fs.Inner(), prefix)); n != 0 {
		t.Fatalf("%d records shipped during the outage", n)
	}
	_, latestDuring, _ := s.Window(ref, 35)
	time.Sleep(50 * time.Millisecond)
	s.ShipOnce(ctx)
	var g dto.Metric
	if err := s.lag.WithLabelValues(account, "ship3").Write(&g); err != nil {
		t.Fatal(err)
	}
	if lag := g.GetGauge().GetValue(); lag < time.Since(latestDuring).Seconds()-0.01 || lag <= 0 {
		t.Fatalf("lag %v during the outage, latest restorable %v", lag, latestDuring)
	}
	if n := counterValue(s.errs); n < 2 {
		t.Fatalf("%v ship errors counted during the outage", n)
	}
	fs.Reset()
	s.ShipOnce(ctx)
	if got, want := shippedSeqs(t, fs.Inner(), prefix), logSeqs(t, b, ref, headStart(t, fs.Inner(), prefix)); fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 50 {
		t.Fatalf("after the outage: shipped %v, log %v", got, want)
	}
	if _, latest, _ := s.Window(ref, 35); !latest.After(latestDuring) && !latest.Equal(latestDuring.Truncate(time.Second)) {
		t.Fatalf("latest %v did not move past %v", latest, latestDuring)
	}
}

// TestPITRHistoryDamage: a flipped byte, a missing segment and a
// reordered pair each fail ReadHistory naming the object.
func TestPITRHistoryDamage(t *testing.T) {
	ctx := context.Background()
	b := backends(t)[0].open(t)
	ref := createTable(t, b, "ship4")
	src := &testPITR{tables: []PITRTable{pitrTable(ref)}}
	prefix := format.PITRPrefix(account, "ship4", pitrTable(ref).Incarnation())
	build := func() *memstore.Store {
		st := memstore.New()
		s := newShipper(t, newManager(t, b, st, nil), src)
		s.ShipOnce(ctx)
		for i := 0; i < 60; i++ {
			logPut(t, b, ref, i, strings.Repeat("y", 200))
			if i%20 == 19 {
				s.ShipOnce(ctx)
			}
		}
		return st
	}
	segs := func(st blobstore.Store) []string {
		objs, _ := st.List(ctx, format.SegmentsPrefix(prefix))
		var out []string
		for _, o := range objs {
			if strings.HasSuffix(o.Key, ".zst") {
				out = append(out, o.Key)
			}
		}
		return out
	}
	check := func(st blobstore.Store, name string) {
		t.Helper()
		err := ReadHistory(ctx, st, prefix, func([]format.PITRRecord) error { return nil })
		if !errors.Is(err, format.ErrSegment) || !strings.Contains(err.Error(), name) {
			t.Fatalf("want an error naming %s, got %v", name, err)
		}
	}
	// a flipped byte
	st := build()
	keys := segs(st)
	if len(keys) < 3 {
		t.Fatalf("%d segments", len(keys))
	}
	data, _ := readObject(ctx, st, keys[1])
	data[len(data)/2] ^= 0x40
	st.Put(ctx, keys[1], strings.NewReader(string(data)))
	check(st, keys[1])
	// a missing segment (and its sidecar)
	st = build()
	keys = segs(st)
	st.DeletePrefix(ctx, keys[1])
	st.DeletePrefix(ctx, format.SegmentSidecarKey(keys[1]))
	check(st, keys[2])
}

// The lag in /metrics is as of the scrape: it grows between ship rounds
// (a value set when a round ends would read about zero after each one).
func TestPITRLagGrowsBetweenRounds(t *testing.T) {
	ctx := context.Background()
	b := backends(t)[0].open(t)
	ref := createTable(t, b, "lag1")
	reg := prometheus.NewRegistry()
	s, err := NewShipper(newManager(t, b, memstore.New(), nil), &testPITR{tables: []PITRTable{pitrTable(ref)}}, PITRConfig{}, reg)
	if err != nil {
		t.Fatal(err)
	}
	logPut(t, b, ref, 1, "x")
	s.ShipOnce(ctx)
	lag := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "extenddb_pitr_lag_seconds" && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no extenddb_pitr_lag_seconds for the table")
		return 0
	}
	first := lag()
	time.Sleep(120 * time.Millisecond)
	if second := lag(); second < first+0.1 {
		t.Fatalf("lag %v then %v after 120 ms without a ship round", first, second)
	}
}

// TestPITRBaseTakenOnce: a server whose base failed does not take
// another once a second server shipping the same table has written one;
// it finds that base in the store and ships on from it.
func TestPITRBaseTakenOnce(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		fs := faultstore.New(memstore.New())
		ref := createTable(t, b, "base1")
		src := &testPITR{tables: []PITRTable{pitrTable(ref)}}
		prefix := format.PITRPrefix(account, "base1", pitrTable(ref).Incarnation())
		s1 := newShipper(t, newManager(t, b, fs, nil), src)
		s2 := newShipper(t, newManager(t, otherServer(b), fs, nil), src)
		fs.Inject(faultstore.Fault{Op: faultstore.OpPut, KeyPrefix: format.BasesPrefix(prefix)})
		fs.Inject(faultstore.Fault{Op: faultstore.OpPutIfAbsent, KeyPrefix: format.BasesPrefix(prefix)})
		s2.ShipOnce(ctx) // loads the history; its base fails
		fs.Reset()
		if bases, err := s2.listBases(ctx, prefix); err != nil || len(bases) != 0 {
			t.Fatalf("bases after a failed base: %v %v", bases, err)
		}
		s1.ShipOnce(ctx) // the base
		for i := 0; i < 10; i++ {
			logPut(t, b, ref, i, "x")
		}
		s2.ShipOnce(ctx)
		bases, err := s2.listBases(ctx, prefix)
		if err != nil || len(bases) != 1 {
			t.Fatalf("%d bases (%v), want the one the first server wrote", len(bases), err)
		}
		if got, want := shippedSeqs(t, fs.Inner(), prefix), logSeqs(t, b, ref, headStart(t, fs.Inner(), prefix)); fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 10 {
			t.Fatalf("shipped %v, log %v", got, want)
		}
		if e, _, _ := s2.Window(ref, 35); e.IsZero() {
			t.Fatal("the second server has no window although a base exists")
		}
	})
}
