package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store/memstore"
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
func logWrite(t *testing.T, b storage.Backend, ref storage.TableRef, i int, v, txn string, count int) {
	t.Helper()
	pk, sk, raw := item(i, v)
	r := format.PITRRecord{Event: "MODIFY", Keys: json.RawMessage(keysOf(t, raw)), NewImage: raw, Txn: txn, TxnCount: count,
		Time: format.PITRTime(time.Now())}
	ch := storage.Change{Op: storage.Put, Item: raw}
	if v == "" {
		r.Event, r.NewImage, ch = "REMOVE", nil, storage.Change{Op: storage.Delete}
	}
	ch.Log, _ = json.Marshal(r)
	if _, err := b.WriteItem(context.Background(), storage.WriteItemParams{Table: ref, PK: pk, SK: sk,
		Fn: func([]byte) (storage.Change, error) { return ch, nil }}); err != nil {
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
	forEach(t, func(t *testing.T, b storage.Backend) {
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
		if err == nil || !strings.Contains(err.Error(), "data/000001.json.zst") {
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
	if got := seqs(cutWhole(in)); got != "1" {
		t.Fatalf("got %s", got)
	}
	in = []format.PITRRecord{r(1, "A", 2), r(2, "A", 2), r(3, "", 0), r(4, "C", 3), r(5, "C", 3)}
	if got := seqs(cutWhole(in)); got != "1,2,3" {
		t.Fatalf("got %s", got)
	}
}
