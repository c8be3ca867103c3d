package cassandra

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

var errCondition = errors.New("condition failed")

// TestChangeLogTwoSessions: two Backends (as two servers) on one keyspace;
// writers make read-modify-write increments on a few keys through both,
// with failing conditional writes among them, while six readers poll
// ReadLog through both. Every acknowledged write has exactly one record,
// each key's records come in counter order, Seq strictly increases, and
// every poller saw exactly the log's prefix up to its last Seq (no late
// gaps). (backendtest's ChangeLogConcurrent covers the same with
// transactions, which this backend does not have yet.)
func TestChangeLogTwoSessions(t *testing.T) {
	b1 := openT(t, keyspace)
	b2 := openT(t, keyspace)
	bes := []*Backend{b1, b2}
	ctx := t.Context()
	cr, err := b1.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "logtwo", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const writers, each, keys = 8, 30, 5
	var acked sync.Map // "key:counter" -> true
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := bes[w%2]
			for i := range each {
				k := "k" + strconv.Itoa(rand.IntN(keys))
				var rec string
				fail := i%7 == 3
				_, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func(old []byte) (backend.Change, error) {
					if fail {
						return backend.Change{}, errCondition
					}
					n := 0
					if old != nil {
						n, _ = strconv.Atoi(string(old))
					}
					rec = k + ":" + strconv.Itoa(n+1)
					return backend.Change{Op: backend.Put, Item: []byte(strconv.Itoa(n + 1)), Log: []byte(rec)}, nil
				}})
				switch {
				case fail && errors.Is(err, errCondition):
				case err != nil:
					t.Errorf("write: %v", err)
					return
				default:
					acked.Store(rec, true)
				}
			}
		}()
	}
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	seen := make([][]backend.LogRecord, 6)
	for p := range seen {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			be := bes[p%2]
			var after int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := be.ReadLog(ctx, backend.ReadLogParams{Table: ref, After: after, Limit: 7})
				if err != nil {
					t.Errorf("poller %d: %v", p, err)
					return
				}
				for _, r := range res.Records {
					seen[p] = append(seen[p], r)
					after = r.Seq
				}
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(stop)
	pollers.Wait()
	if t.Failed() {
		return
	}
	var all []backend.LogRecord
	var after int64
	for {
		res, err := b2.ReadLog(ctx, backend.ReadLogParams{Table: ref, After: after, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			break
		}
		all = append(all, res.Records...)
		after = res.Records[len(res.Records)-1].Seq
	}
	n := 0
	acked.Range(func(any, any) bool { n++; return true })
	if len(all) != n {
		t.Fatalf("%d records for %d acknowledged writes", len(all), n)
	}
	last := map[string]int{}
	for i, r := range all {
		if i > 0 && r.Seq <= all[i-1].Seq {
			t.Fatalf("Seq %d after %d", r.Seq, all[i-1].Seq)
		}
		if i > 0 && r.At.Before(all[i-1].At) {
			t.Fatalf("At goes back at Seq %d", r.Seq)
		}
		k, c, _ := strings.Cut(string(r.Data), ":")
		ci, _ := strconv.Atoi(c)
		if ci != last[k]+1 {
			t.Fatalf("key %s: record %d after %d (Seq %d)", k, ci, last[k], r.Seq)
		}
		last[k] = ci
		if _, ok := acked.Load(string(r.Data)); !ok {
			t.Fatalf("record %q of a write that was not acknowledged", r.Data)
		}
	}
	for p, got := range seen {
		for i, r := range got {
			if i >= len(all) || all[i].Seq != r.Seq || string(all[i].Data) != string(r.Data) {
				t.Fatalf("poller %d: record %d is Seq %d %q; the log has %v there (a late gap)", p, i, r.Seq, r.Data, all[min(i, len(all)-1)])
			}
		}
	}
	info, err := b1.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil || info.Count != int64(len(all)) || info.Last != all[len(all)-1].Seq || info.First != all[0].Seq {
		t.Fatalf("LogInfo %+v %v; %d records", info, err, len(all))
	}
	t.Logf("%d records, pollers saw %d %d %d %d %d %d", len(all), len(seen[0]), len(seen[1]), len(seen[2]), len(seen[3]), len(seen[4]), len(seen[5]))
}

// TestChangeLogPublisherDied: a publisher that committed records but died
// before removing them from the item partitions leaves them pending; the
// next publisher recognises them by their marks and never publishes them
// twice.
func TestChangeLogPublisherDied(t *testing.T) {
	b1 := openT(t, keyspace)
	b2 := openT(t, keyspace)
	ctx := t.Context()
	cr, err := b1.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "logdied", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	write := func(k, rec string) {
		t.Helper()
		if _, err := b1.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(rec), Log: []byte(rec)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(be *Backend) string {
		t.Helper()
		res, err := be.ReadLog(ctx, backend.ReadLogParams{Table: ref, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res.Records {
			out = append(out, fmt.Sprintf("%d=%s", r.Seq, r.Data))
		}
		return strings.Join(out, " ")
	}
	write("a", "a1")
	write("b", "b1")
	write("a", "a2")
	b1.skipForget = true
	first := read(b1)
	if first != "1=a1 2=b1 3=a2" {
		t.Fatalf("first publish: %s", first)
	}
	var pending int
	if err := b1.query(ctx, `SELECT count(*) FROM items WHERE t = ? AND pk = ? AND kind = 2`, ref.ID, []byte("a")).Scan(&pending); err != nil || pending != 2 {
		t.Fatalf("pending rows left by the dead publisher: %d %v", pending, err)
	}
	if got := read(b2); got != first {
		t.Fatalf("after the dead publisher: %s, want %s", got, first)
	}
	write("b", "b2")
	if got := read(b2); got != first+" 4=b2" {
		t.Fatalf("then: %s", got)
	}
	if err := b1.query(ctx, `SELECT count(*) FROM items WHERE t = ? AND pk = ? AND kind = 2`, ref.ID, []byte("a")).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("pending rows after the next publish: %d %v", pending, err)
	}
}
