package backup

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
)

// keysOf is the canonical keys JSON of a test item.
func keysOf(t testing.TB, raw []byte) string {
	t.Helper()
	it, err := attr.DecodeItem(raw)
	if err != nil {
		t.Fatal(err)
	}
	return string(attr.EncodeItem(attr.Item{"pk": it["pk"], "sk": it["sk"]}))
}

// logWrite writes item i (v, or a delete when v is "") with a record as
// the engine would log it, in transaction txn of count records when txn
// is set.
func logWrite(t testing.TB, b backend.Backend, ref backend.TableRef, i int, v, txn string, count int) {
	t.Helper()
	pk, sk, raw := item(i, v)
	r := format.PITRRecord{Event: "MODIFY", Keys: json.RawMessage(keysOf(t, raw)), NewImage: raw, Txn: txn, TxnCount: count,
		Time: format.PITRTime(time.Now())}
	ch := backend.Change{Op: backend.Put, Item: raw}
	if v == "" {
		r.Event, r.NewImage, ch = "REMOVE", nil, backend.Change{Op: backend.Delete}
	}
	ch.Log, _ = json.Marshal(r)
	if _, err := b.WriteItem(context.Background(), backend.WriteItemParams{Table: ref, PK: pk, SK: sk,
		Fn: func([]byte) (backend.Change, error) { return ch, nil }}); err != nil {
		t.Fatal(err)
	}
}

// restored applies a plan to a map from keys JSON to item bytes.
func restored(t *testing.T, p *PITRPlan) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := p.Backup.Items(context.Background(), func(r *format.Record) error {
		out[keysOf(t, r.Item)] = string(r.Item)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Every record of the replay, in order (the oracle does not rely on
	// the replay's own fold).
	if err := p.Replay.each(func(_ int64, put, _ bool, img []byte) error {
		if put {
			out[keysOf(t, img)] = string(img)
		} else {
			delete(out, string(img))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func value(t *testing.T, m map[string]string, i int) string {
	_, _, raw := item(i, "")
	s, ok := m[keysOf(t, raw)]
	if !ok {
		return "absent"
	}
	it, _ := attr.DecodeItem([]byte(s))
	return strings.TrimSuffix(it["v"].Str, strings.Repeat("x", 100))
}

// TestPITRPlanCutsAtTheInstant: a restore plan is the newest base before
// the instant plus the records up to it; a transaction whose records
// straddle the instant is left out whole; a damaged base fails the plan
// naming the object.
func TestPITRPlanCutsAtTheInstant(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "plan1")
		for i := 0; i < 10; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		before := time.Now()
		time.Sleep(20 * time.Millisecond)
		s := newShipper(t, newManager(t, b, st, nil), &testPITR{tables: []PITRTable{pitrTable(ref)}})
		s.ShipOnce(ctx) // head, base of the ten items
		pause := func() time.Time {
			time.Sleep(30 * time.Millisecond)
			at := time.Now()
			time.Sleep(30 * time.Millisecond)
			return at
		}
		t0 := pause()
		for i := 0; i < 5; i++ {
			logWrite(t, b, ref, i, "b", "", 0)
		}
		t1 := pause()
		logWrite(t, b, ref, 5, "", "", 0)
		t2 := pause()
		logWrite(t, b, ref, 6, "tx", "aa01", 2)
		t3 := pause() // inside the transaction's publication
		logWrite(t, b, ref, 7, "tx", "aa01", 2)
		t4 := pause()
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "plan1", pitrTable(ref).Incarnation())
		cases := []struct {
			at   time.Time
			want string
		}{
			{t0, "a a a a a a a a a a"},
			{t1, "b b b b b a a a a a"},
			{t2, "b b b b b absent a a a a"},
			{t3, "b b b b b absent a a a a"},
			{t4, "b b b b b absent tx tx a a"},
		}
		for n, c := range cases {
			p, err := PlanPITRRestore(ctx, st, prefix, c.at, t.TempDir())
			if err != nil {
				t.Fatalf("t%d: %v", n, err)
			}
			m := restored(t, p)
			var got []string
			for i := 0; i < 10; i++ {
				got = append(got, value(t, m, i))
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("t%d: %s, want %s", n, strings.Join(got, " "), c.want)
			}
		}
		if _, err := PlanPITRRestore(ctx, st, prefix, before, t.TempDir()); !errors.Is(err, ErrRestoreTime) {
			t.Fatalf("before the first base: %v", err)
		}
		// A flipped byte in the base's data file.
		bases, _ := listBases(ctx, st, prefix)
		key := format.BasesPrefix(prefix) + "/" + bases[0].BackupID + "/data/000001.json.zst"
		data, err := readObject(ctx, st, key)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1
		st.Put(ctx, key, strings.NewReader(string(data)))
		_, err = PlanPITRRestore(ctx, st, prefix, t4, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("damaged base: %v", err)
		}
	})
}

func TestWholeCut(t *testing.T) {
	type rec struct {
		seq   int64
		txn   string
		total int
	}
	cut := func(recs []rec, pruned map[string]int) int64 {
		spans := map[string]*txnSpan{}
		var last int64
		for _, r := range recs {
			if r.txn != "" {
				s := spans[r.txn]
				if s == nil {
					s = &txnSpan{first: r.seq, before: last}
					spans[r.txn] = s
				}
				s.last, s.total = r.seq, r.total
				s.count++
			}
			last = r.seq
		}
		return wholeCut(spans, pruned, last)
	}
	// B is complete only with its record after A's first: cutting A
	// makes B incomplete too.
	if got := cut([]rec{{1, "", 0}, {2, "A", 2}, {3, "B", 2}, {4, "B", 2}}, nil); got != 1 {
		t.Fatalf("got %d", got)
	}
	if got := cut([]rec{{1, "A", 2}, {2, "A", 2}, {3, "", 0}, {4, "C", 3}, {5, "C", 3}}, nil); got != 3 {
		t.Fatalf("got %d", got)
	}
	// A straddles B, which is whole: cutting A (incomplete) cuts B.
	if got := cut([]rec{{1, "", 0}, {2, "B", 2}, {3, "A", 3}, {4, "B", 2}, {5, "A", 3}}, nil); got != 1 {
		t.Fatalf("got %d", got)
	}
	// D has one record in a pruned segment: it is whole with it, and a
	// cut of D goes back to the log's start.
	if got := cut([]rec{{5, "D", 2}, {6, "", 0}}, map[string]int{"D": 1}); got != 6 {
		t.Fatalf("got %d", got)
	}
	if got := cut([]rec{{5, "", 0}, {6, "E", 3}}, map[string]int{"E": 1}); got != 0 {
		t.Fatalf("got %d", got)
	}
	if got := cut(nil, nil); got != 0 {
		t.Fatalf("empty: got %d", got)
	}
}

// TestPITRRestoreReplays: a point-in-time restore job loads the base and
// replays the log cut at the instant: a key written several times ends
// as its last write, a delete removes a base item, a key deleted then
// written again exists, a transaction cut at the instant is left out
// whole (and restored whole at a later instant), and the target flips
// ACTIVE through the Restorer.
func TestPITRRestoreReplays(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "replay1")
		for i := 0; i < 8; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		m := newManager(t, b, st, func(c *Config) { c.Restorer = testRestorer{}; c.SpoolDir = t.TempDir() })
		s := newShipper(t, m, &testPITR{tables: []PITRTable{pitrTable(ref)}})
		s.ShipOnce(ctx) // head, base of the eight items
		pause := func() time.Time {
			time.Sleep(30 * time.Millisecond)
			at := time.Now()
			time.Sleep(30 * time.Millisecond)
			return at
		}
		pause()
		logWrite(t, b, ref, 0, "b", "", 0)
		logWrite(t, b, ref, 0, "c", "", 0) // several records of one key
		logWrite(t, b, ref, 1, "", "", 0)  // a delete of a base item
		logWrite(t, b, ref, 9, "n", "", 0)
		logWrite(t, b, ref, 9, "", "", 0)
		logWrite(t, b, ref, 9, "m", "", 0) // deleted, then written again
		logWrite(t, b, ref, 10, "n", "", 0)
		logWrite(t, b, ref, 10, "", "", 0) // written, then deleted
		logWrite(t, b, ref, 2, "tx", "bb01", 2)
		tIn := pause() // inside the transaction
		logWrite(t, b, ref, 3, "tx", "bb01", 2)
		logWrite(t, b, ref, 4, "z", "", 0)
		tEnd := pause()
		logWrite(t, b, ref, 5, "late", "", 0)
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "replay1", pitrTable(ref).Incarnation())
		cases := []struct {
			name string
			at   time.Time
			want string
		}{
			{"dst-in", tIn, "c absent a a a a a a absent m absent"},
			{"dst-end", tEnd, "c absent tx tx z a a a absent m absent"},
		}
		for _, c := range cases {
			var job string
			err := m.RestorePITR(ctx, prefix, c.at, account, c.name, func(ctx context.Context, key string) (*backend.Table, error) {
				job = key
				res, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: c.name, Desc: []byte(`{"restoring":true}`)})
				if err != nil {
					return nil, err
				}
				return res.Table, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for m.restoresRunning(job) {
				if time.Now().After(deadline) {
					t.Fatal("restore does not end")
				}
				time.Sleep(10 * time.Millisecond)
			}
			cur, err := b.GetTable(ctx, backend.GetTableParams{Account: account, Name: c.name})
			if err != nil {
				t.Fatalf("%s: the target is gone (the restore failed): %v", c.name, err)
			}
			res, err := b.Scan(ctx, backend.ScanParams{Table: cur.Table.Ref(), Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range res.Rows {
				got[keysOf(t, r.Item)] = string(r.Item)
			}
			var vals []string
			for i := 0; i < 11; i++ {
				vals = append(vals, value(t, got, i))
			}
			if strings.Join(vals, " ") != c.want {
				t.Fatalf("%s: %s, want %s", c.name, strings.Join(vals, " "), c.want)
			}
			if n := strings.Count(c.want, " ") + 1 - strings.Count(c.want, "absent"); len(res.Rows) != n {
				t.Fatalf("%s: %d items, want %d", c.name, len(res.Rows), n)
			}
		}
	})
}

// TestReplayFolds: the replay's final state per key (its last record),
// in Seq order, from a spill file; records after the cut are not part
// of it.
func TestReplayFolds(t *testing.T) {
	schema := format.KeySchema{HashName: "pk", HashType: attr.S, RangeName: "sk", RangeType: attr.N}
	b, err := newReplayBuilder(t.TempDir(), schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(seq int64, i int, v string) *format.PITRRecord {
		_, _, raw := item(i, v)
		r := &format.PITRRecord{Seq: seq, Keys: json.RawMessage(keysOf(t, raw))}
		if v != "" {
			r.NewImage = raw
		}
		return r
	}
	for _, r := range []*format.PITRRecord{rec(1, 1, "a"), rec(2, 2, "a"), rec(3, 1, "b"), rec(4, 2, ""),
		rec(5, 3, ""), rec(6, 3, "c"), rec(7, 4, "d"), rec(8, 3, "e")} {
		if err := b.add(r); err != nil {
			t.Fatal(err)
		}
	}
	rp, err := b.finish(7)
	if err != nil {
		t.Fatal(err)
	}
	name := rp.f.Name()
	if rp.records != 7 || rp.puts != 3 || len(rp.last) != 4 {
		t.Fatalf("records %d puts %d keys %d, want 7, 3 and 4", rp.records, rp.puts, len(rp.last))
	}
	var got []string
	if err := rp.EachPut(func(img []byte) error {
		it, _ := attr.DecodeItem(img)
		got = append(got, strings.TrimSuffix(it["v"].Str, strings.Repeat("x", 100)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "b c d" {
		t.Fatalf("puts %q, want b c d", got)
	}
	key := func(i int) format.Key {
		_, _, raw := item(i, "")
		it, _ := attr.DecodeItem(raw)
		k, err := schema.KeyOf(it)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for i, want := range map[int]bool{1: true, 2: true, 3: true, 4: true, 5: false} {
		if rp.Touches(key(i)) != want {
			t.Fatalf("Touches(item %d) = %v", i, !want)
		}
	}
	if err := rp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("the spill file is still there: %v", err)
	}
}

// TestFindHistoryFromTheStore: a history is found in the store by its
// table's ARN alone, with its window (its base to its last shipped
// record); another ARN finds nothing.
func TestFindHistoryFromTheStore(t *testing.T) {
	ctx := context.Background()
	b := backends(t)[0].open(t)
	st := memstore.New()
	ref := createTable(t, b, "find1")
	m := newManager(t, b, st, nil)
	tbl := pitrTable(ref)
	s := newShipper(t, m, &testPITR{tables: []PITRTable{tbl}})
	s.ShipOnce(ctx) // head and base
	time.Sleep(20 * time.Millisecond)
	before := time.Now().Truncate(time.Millisecond)
	logWrite(t, b, ref, 1, "a", "", 0)
	s.ShipOnce(ctx)
	h, err := m.FindHistory(ctx, account, "find1", tbl.TableArn)
	if err != nil || h == nil {
		t.Fatalf("FindHistory: %+v, %v", h, err)
	}
	if want := format.PITRPrefix(account, "find1", tbl.Incarnation()); h.Prefix != want || h.Head.TableArn != tbl.TableArn {
		t.Fatalf("found %s (%s), want %s", h.Prefix, h.Head.TableArn, want)
	}
	if h.Earliest.IsZero() || h.Earliest.After(before) || h.Latest.Before(before) || h.Latest.After(time.Now()) {
		t.Fatalf("window [%v, %v], the write at or after %v", h.Earliest, h.Latest, before)
	}
	if h, err := m.FindHistory(ctx, account, "find1", tbl.TableArn+"x"); err != nil || h != nil {
		t.Fatalf("another ARN: %+v, %v", h, err)
	}
	if h, err := m.FindHistory(ctx, account, "nothere", "arn:x"); err != nil || h != nil {
		t.Fatalf("no history: %+v, %v", h, err)
	}
}

// TestPITRRestoreTakenOver: a point-in-time restore whose owner stops
// after its first batch is taken over by another server's reconciler,
// which plans it again from the job key alone and finishes it; the
// stale owner is fenced; the target holds the state at the instant.
func TestPITRRestoreTakenOver(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "take1")
		for i := 0; i < 300; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		gate, reached := make(chan struct{}), make(chan struct{})
		var once sync.Once
		m := newManager(t, b, st, func(c *Config) {
			c.HeartbeatInterval = time.Hour // its heartbeat never comes in time
			c.StaleAfter = 100 * time.Millisecond
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
			c.Hook = func(p string) {
				if p == PointRestoreMidLoad {
					first := false
					once.Do(func() { first = true })
					if first {
						close(reached)
						<-gate
					}
				}
			}
		})
		opened := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(opened)
		s := newShipper(t, m, &testPITR{tables: []PITRTable{pitrTable(ref)}})
		s.ShipOnce(ctx)
		time.Sleep(30 * time.Millisecond)
		for i := 0; i < 150; i++ {
			logWrite(t, b, ref, i, "b", "", 0)
		}
		for i := 150; i < 200; i++ {
			logWrite(t, b, ref, i, "", "", 0)
		}
		time.Sleep(30 * time.Millisecond)
		at := time.Now()
		time.Sleep(30 * time.Millisecond)
		logWrite(t, b, ref, 0, "late", "", 0)
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "take1", pitrTable(ref).Incarnation())
		var key string
		if err := m.RestorePITR(ctx, prefix, at, account, "dst", func(ctx context.Context, k string) (*backend.Table, error) {
			key = k
			res, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: "dst", Desc: []byte(`{"restoring":true}`)})
			if err != nil {
				return nil, err
			}
			return res.Table, nil
		}); err != nil {
			t.Fatal(err)
		}
		<-reached
		time.Sleep(300 * time.Millisecond) // the claim is stale by its heartbeat
		other := newManager(t, otherServer(b), st, func(c *Config) {
			c.StaleAfter = 100 * time.Millisecond
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
		})
		if err := other.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if n := counter(t, other, "resumed_restore"); n != 1 {
			t.Fatalf("the other server took the stale job over %v times, want 1", n)
		}
		opened()
		deadline := time.Now().Add(30 * time.Second)
		for m.RestoringFrom(key) || other.RestoringFrom(key) || finished(t, other, "ok") < 1 {
			if time.Now().After(deadline) {
				t.Fatal("the restore does not end")
			}
			time.Sleep(20 * time.Millisecond)
		}
		res, err := b.Scan(ctx, backend.ScanParams{Table: mustTable(t, b, "dst").Ref(), Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range res.Rows {
			got[keysOf(t, r.Item)] = string(r.Item)
		}
		if len(res.Rows) != 250 {
			t.Fatalf("restored %d items, want 250", len(res.Rows))
		}
		for i := 0; i < 300; i++ {
			want := map[bool]string{true: "b", false: "a"}[i < 150]
			if i >= 150 && i < 200 {
				want = "absent"
			}
			if v := value(t, got, i); v != want {
				t.Fatalf("item %d: %s, want %s", i, v, want)
			}
		}
	})
}

// TestPITRPlansReplayNewImages: an export's plan and a restore job's
// plan replay the same records, new images only (a record's OldImage is
// not spilled).
func TestPITRPlansReplayNewImages(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "plan2")
		for i := 0; i < 3; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		s := newShipper(t, newManager(t, b, st, nil), &testPITR{tables: []PITRTable{pitrTable(ref)}})
		s.ShipOnce(ctx) // head, base of the three items
		time.Sleep(20 * time.Millisecond)
		for i := 0; i < 3; i++ {
			pk, sk, raw := item(i, "b")
			_, _, old := item(i, "a")
			r := format.PITRRecord{Event: "MODIFY", Keys: json.RawMessage(keysOf(t, raw)), NewImage: raw, OldImage: old,
				Time: format.PITRTime(time.Now())}
			ch := backend.Change{Op: backend.Put, Item: raw}
			ch.Log, _ = json.Marshal(r)
			if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk,
				Fn: func([]byte) (backend.Change, error) { return ch, nil }}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
		at := time.Now()
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "plan2", pitrTable(ref).Incarnation())
		ex, err := planPITRExport(ctx, st, prefix, at, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer ex.Close()
		if ex.Replay.records != 3 {
			t.Fatalf("export plan: %d records, want 3", ex.Replay.records)
		}
		p, err := planJob(ctx, st, pitrJobScheme+prefix+"@"+strconv.FormatInt(at.UnixMilli(), 10), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if p.Replay.records != 3 {
			t.Fatalf("restore plan: %d records, want 3", p.Replay.records)
		}
		if err := p.Replay.each(func(seq int64, put, _ bool, img []byte) error {
			it, err := attr.DecodeItem(img)
			if err != nil || !put || !strings.HasPrefix(it["v"].Str, "b") {
				t.Fatalf("restore plan record %d: %s (put %v), want the new image", seq, img, put)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := value(t, restored(t, p), 1); got != "b" {
			t.Fatalf("restored item 1: %s, want b", got)
		}
	})
}
