package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
func keysOf(t *testing.T, raw []byte) string {
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
func logWrite(t *testing.T, b backend.Backend, ref backend.TableRef, i int, v, txn string, count int) {
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
	for _, r := range p.Records {
		if r.Event == "REMOVE" {
			delete(out, string(r.Keys))
		} else {
			out[string(r.Keys)] = string(r.NewImage)
		}
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
			p, err := PlanPITRRestore(ctx, st, prefix, c.at)
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
		if _, err := PlanPITRRestore(ctx, st, prefix, before); !errors.Is(err, ErrRestoreTime) {
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
		_, err = PlanPITRRestore(ctx, st, prefix, t4)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("damaged base: %v", err)
		}
	})
}

func TestCutWhole(t *testing.T) {
	r := func(seq int64, txn string, n int) format.PITRRecord {
		return format.PITRRecord{Seq: seq, Txn: txn, TxnCount: n}
	}
	seqs := func(rs []format.PITRRecord) string {
		var s []string
		for _, x := range rs {
			s = append(s, fmt.Sprint(x.Seq))
		}
		return strings.Join(s, ",")
	}
	// B is complete only with its record after A's first: cutting A
	// makes B incomplete too.
	in := []format.PITRRecord{r(1, "", 0), r(2, "A", 2), r(3, "B", 2), r(4, "B", 2)}
	if got := seqs(cutWhole(in, nil)); got != "1" {
		t.Fatalf("got %s", got)
	}
	in = []format.PITRRecord{r(1, "A", 2), r(2, "A", 2), r(3, "", 0), r(4, "C", 3), r(5, "C", 3)}
	if got := seqs(cutWhole(in, nil)); got != "1,2,3" {
		t.Fatalf("got %s", got)
	}
	// D has one record in a pruned segment: it is whole with it, and a
	// cut of D goes back to the log's start.
	in = []format.PITRRecord{r(5, "D", 2), r(6, "", 0)}
	if got := seqs(cutWhole(in, map[string]int{"D": 1})); got != "5,6" {
		t.Fatalf("got %s", got)
	}
	in = []format.PITRRecord{r(5, "", 0), r(6, "E", 3)}
	if got := seqs(cutWhole(in, map[string]int{"E": 1})); got != "" {
		t.Fatalf("got %s", got)
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

// TestReplayRecordsFolds: the replay's final state per key, in the order
// of each key's first record.
func TestReplayRecordsFolds(t *testing.T) {
	load, _ := testRestorer{}.ItemLoader(nil)
	rec := func(seq int64, i int, v string) format.PITRRecord {
		_, _, raw := item(i, v)
		r := format.PITRRecord{Seq: seq, Keys: json.RawMessage(keysOf(t, raw))}
		if v != "" {
			r.NewImage = raw
		}
		return r
	}
	rp, err := replayRecords([]format.PITRRecord{rec(1, 1, "a"), rec(2, 2, "a"), rec(3, 1, "b"), rec(4, 2, ""),
		rec(5, 3, ""), rec(6, 3, "c")}, load)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.keys) != 3 || len(rp.puts) != 2 {
		t.Fatalf("keys %d puts %d, want 3 and 2", len(rp.keys), len(rp.puts))
	}
	for i, want := range []string{"b", "c"} {
		it, _ := attr.DecodeItem(rp.puts[i].Change.Item)
		if v := strings.TrimSuffix(it["v"].Str, strings.Repeat("x", 100)); v != want {
			t.Fatalf("put %d: %q, want %q", i, v, want)
		}
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

// TestPITRRestoreJobPlanDropsOldImages: a restore job's plan holds its
// records without their OldImage (a restore replays new images only);
// an export's plan keeps them.
func TestPITRRestoreJobPlanDropsOldImages(t *testing.T) {
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
		ex, err := planPITRExport(ctx, st, prefix, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(ex.Records) != 3 || len(ex.Records[0].OldImage) == 0 {
			t.Fatalf("export plan: %d records, first OldImage %q", len(ex.Records), ex.Records[0].OldImage)
		}
		p, err := planJob(ctx, st, pitrJobScheme+prefix+"@"+strconv.FormatInt(at.UnixMilli(), 10))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) != 3 {
			t.Fatalf("restore plan: %d records, want 3", len(p.Records))
		}
		for _, r := range p.Records {
			if r.OldImage != nil || len(r.NewImage) == 0 {
				t.Fatalf("restore plan record %d: OldImage %q, NewImage %q", r.Seq, r.OldImage, r.NewImage)
			}
		}
		if got := value(t, restored(t, p), 1); got != "b" {
			t.Fatalf("restored item 1: %s, want b", got)
		}
	})
}
