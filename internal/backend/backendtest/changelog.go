package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The change log section (backend.ChangeLog, the storage half of DynamoDB
// Streams): records are written atomically with their items, in per-item
// commit order, with strictly increasing Seq and no late gaps; ReadLog
// honours Limit and MaxBytes; LogInfo, TrimLog and the log's lifetime.
// A backend without the capability is skipped loudly ("capability
// absent"), never silently.

// changeLog returns the capability or skips the test loudly.
func (e *env) changeLog() backend.ChangeLog {
	e.t.Helper()
	cl := e.b.Capabilities().ChangeLog
	if cl == nil {
		msg := fmt.Sprintf("capability absent: backend %s does not implement backend.ChangeLog; change log section NOT exercised", e.b.Name())
		fmt.Println(msg)
		e.t.Skip(msg)
	}
	return cl
}

func readLog(t testing.TB, ctx context.Context, cl backend.ChangeLog, p backend.ReadLogParams) []backend.LogRecord {
	t.Helper()
	res, err := cl.ReadLog(ctx, p)
	if err != nil {
		t.Fatalf("ReadLog %+v: %v", p, err)
	}
	for i, r := range res.Records {
		if r.Seq <= p.After || (i > 0 && r.Seq <= res.Records[i-1].Seq) {
			t.Fatalf("ReadLog after %d: Seq %d out of order (answer %v)", p.After, r.Seq, seqsOf(res.Records))
		}
	}
	return res.Records
}

// readAllLog reads every record after `after`, page by page.
func readAllLog(t testing.TB, ctx context.Context, cl backend.ChangeLog, ref backend.TableRef, after int64) []backend.LogRecord {
	t.Helper()
	var out []backend.LogRecord
	for range 100000 {
		recs := readLog(t, ctx, cl, backend.ReadLogParams{Table: ref, After: after, Limit: 1000})
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		after = recs[len(recs)-1].Seq
	}
	t.Fatal("ReadLog paging does not end")
	return nil
}

func logInfo(t testing.TB, ctx context.Context, cl backend.ChangeLog, ref backend.TableRef) backend.LogInfoResult {
	t.Helper()
	res, err := cl.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil {
		t.Fatalf("LogInfo: %v", err)
	}
	return *res
}

func seqsOf(recs []backend.LogRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func datasOf(recs []backend.LogRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Data)
	}
	return out
}

func logFn(op backend.ChangeOp, item, log string) backend.WriteFunc {
	return func([]byte) (backend.Change, error) {
		ch := backend.Change{Op: op}
		if log != "" {
			ch.Log = []byte(log)
		}
		if op == backend.Put {
			ch.Item = []byte(item)
		}
		return ch, nil
	}
}

// testChangeLogAtomic: a record exists exactly for every write that
// happened, readable as soon as the write returns; Keep, failed functions,
// canceled transactions and KindTableVersion refusals leave none.
func testChangeLogAtomic(e *env) {
	cl := e.changeLog()
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("log")
	other := e.createTable("logother")
	if got := logInfo(t, ctx, cl, ref); got != (backend.LogInfoResult{}) {
		t.Fatalf("LogInfo of a new table: %+v, want zeros", got)
	}
	if recs := readLog(t, ctx, cl, backend.ReadLogParams{Table: ref, Limit: 10}); len(recs) != 0 {
		t.Fatalf("ReadLog of a new table: %v", datasOf(recs))
	}
	var seen []string
	var last int64
	// expect checks that exactly the records `want` appeared since the
	// previous check, and that they are readable at once.
	expect := func(what string, want ...string) {
		t.Helper()
		recs := readAllLog(t, ctx, cl, ref, last)
		if got := datasOf(recs); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%s: new records %q, want %q", what, got, want)
		}
		for _, r := range recs {
			if r.At.IsZero() || time.Since(r.At) > time.Hour || time.Until(r.At) > time.Hour {
				t.Fatalf("%s: record At %v is not the backend's clock now", what, r.At)
			}
			last = r.Seq
		}
		seen = append(seen, want...)
	}
	write := func(what string, fn backend.WriteFunc) error {
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: strKey("k"), Fn: fn})
		return err
	}
	before := time.Now()
	buf := []byte("put-1")
	if err := write("put", func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("v1"), Log: buf}, nil
	}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX") // the backend keeps its own copy of Log
	expect("a put", "put-1")
	info := logInfo(t, ctx, cl, ref)
	if info.First != last || info.Last != last || info.Count != 1 {
		t.Fatalf("LogInfo after one record %d: %+v", last, info)
	}
	if recs := readLog(t, ctx, cl, backend.ReadLogParams{Table: ref, Limit: 1}); recs[0].At.Before(before.Add(-time.Minute)) {
		t.Fatalf("record At %v before the write started (%v)", recs[0].At, before)
	}

	if err := write("keep", logFn(backend.Keep, "", "keep")); err != nil {
		t.Fatal(err)
	}
	expect("a Keep")
	if err := write("failed", func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("bad"), Log: []byte("failed")}, errCond
	}); !errors.Is(err, errCond) {
		t.Fatalf("failed function: %v", err)
	}
	expect("a failed function")
	if err := write("nolog", logFn(backend.Put, "v2", "")); err != nil {
		t.Fatal(err)
	}
	expect("a write without Log")
	if err := write("delete", logFn(backend.Delete, "", "delete-1")); err != nil {
		t.Fatal(err)
	}
	expect("a delete", "delete-1")

	// A transaction: one record per operation with a Log, in both tables.
	if _, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ref, PK: strKey("a"), Fn: logFn(backend.Put, "a1", "tx-a")},
		{Table: other, PK: strKey("b"), Fn: logFn(backend.Put, "b1", "tx-b")},
		{Table: ref, PK: strKey("c"), Fn: logFn(backend.Keep, "", "tx-keep")},
		{Table: ref, PK: strKey("d"), Fn: logFn(backend.Put, "d1", "")},
	}}); err != nil {
		t.Fatal(err)
	}
	expect("a transaction", "tx-a")
	if got := datasOf(readAllLog(t, ctx, cl, other, 0)); len(got) != 1 || got[0] != "tx-b" {
		t.Fatalf("other table's records after the transaction: %q", got)
	}

	// A canceled transaction writes no record.
	_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ref, PK: strKey("a"), Fn: logFn(backend.Put, "a2", "canceled-a")},
		{Table: other, PK: strKey("b"), Fn: logFn(backend.Put, "b2", "canceled-b")},
		{Table: ref, PK: strKey("c"), Fn: func([]byte) (backend.Change, error) { return backend.Change{}, errCond }},
	}})
	wantKind(t, "canceled transaction", err, backend.KindTransactionCanceled)
	expect("a canceled transaction")
	if got := datasOf(readAllLog(t, ctx, cl, other, 0)); len(got) != 1 {
		t.Fatalf("other table's records after a canceled transaction: %q", got)
	}

	// A stale description version refuses the write and its record.
	if _, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { return []byte("desc-v2"), nil }}); err != nil {
		t.Fatal(err)
	}
	err = write("stale", logFn(backend.Put, "stale", "stale"))
	wantKind(t, "stale WriteItem", err, backend.KindTableVersion)
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: other, PK: strKey("b"), Fn: logFn(backend.Put, "b3", "stale-tx-b")},
		{Table: ref, PK: strKey("a"), Fn: logFn(backend.Put, "a3", "stale-tx-a")},
	}})
	wantKind(t, "stale TransactWrite", err, backend.KindTableVersion)
	expect("stale writes")
	if got := datasOf(readAllLog(t, ctx, cl, other, 0)); len(got) != 1 {
		t.Fatalf("other table's records after a stale transaction: %q", got)
	}
	ref.Version++
	if err := write("fresh", logFn(backend.Put, "v3", "fresh")); err != nil {
		t.Fatal(err)
	}
	expect("a write at the new version", "fresh")
	checkWholeLog(t, ctx, cl, ref, seen)
}

// checkWholeLog: the table's whole log holds exactly the records seen, in
// order, LogInfo describes it, and At does not decrease with Seq.
func checkWholeLog(t *testing.T, ctx context.Context, cl backend.ChangeLog, ref backend.TableRef, seen []string) {
	all := readAllLog(t, ctx, cl, ref, 0)
	if got := datasOf(all); strings.Join(got, "|") != strings.Join(seen, "|") {
		t.Fatalf("whole log %q, want %q", got, seen)
	}
	info := logInfo(t, ctx, cl, ref)
	if info.First != all[0].Seq || info.Last != all[len(all)-1].Seq || info.Count != int64(len(all)) {
		t.Fatalf("LogInfo %+v for records %v", info, seqsOf(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].At.Before(all[i-1].At) {
			t.Fatalf("record At decreases with Seq: %v then %v", all[i-1].At, all[i].At)
		}
	}
}

// testChangeLogLimits: ReadLog's Limit and MaxBytes, and paging by After.
func testChangeLogLimits(e *env) {
	cl := e.changeLog()
	t, ctx := e.t, e.ctx
	ref := e.createTable("loglimits")
	const n = 20
	for i := range n {
		data := fmt.Sprintf("%03d", i) + strings.Repeat("x", 97) // 100 bytes
		e.write(ref, strKey(fmt.Sprintf("k%d", i%3)), nil, backend.Change{Op: backend.Put, Item: []byte("v"), Log: []byte(data)})
	}
	all := readAllLog(t, ctx, cl, ref, 0)
	if len(all) != n {
		t.Fatalf("%d records, want %d", len(all), n)
	}
	for i, r := range all {
		if len(r.Data) != 100 || string(r.Data[:3]) != fmt.Sprintf("%03d", i) {
			t.Fatalf("record %d: %q", i, r.Data)
		}
	}
	read := func(after int64, limit, maxBytes int) []backend.LogRecord {
		return readLog(t, ctx, cl, backend.ReadLogParams{Table: ref, After: after, Limit: limit, MaxBytes: maxBytes})
	}
	check := func(what string, got []backend.LogRecord, want []backend.LogRecord) {
		t.Helper()
		if fmt.Sprint(seqsOf(got)) != fmt.Sprint(seqsOf(want)) {
			t.Fatalf("%s: Seq %v, want %v", what, seqsOf(got), seqsOf(want))
		}
	}
	check("Limit 5", read(0, 5, 0), all[:5])
	check("after the 5th", read(all[4].Seq, 100, 0), all[5:])
	check("after the 5th, Limit 1", read(all[4].Seq, 1, 0), all[5:6])
	check("after a Seq between records", read(all[10].Seq, 3, 0), all[11:14])
	check("MaxBytes 250", read(0, 100, 250), all[:2])
	check("MaxBytes 300", read(0, 100, 300), all[:3])
	check("MaxBytes 100", read(0, 100, 100), all[:1])
	check("MaxBytes 50 (at least one record)", read(all[2].Seq, 100, 50), all[3:4])
	check("MaxBytes and Limit", read(0, 2, 1000), all[:2])
	check("after the last", read(all[n-1].Seq, 10, 0), nil)
	check("after a Seq beyond the last", read(all[n-1].Seq+1000, 10, 0), nil)
	info := logInfo(t, ctx, cl, ref)
	if info.First != all[0].Seq || info.Last != all[n-1].Seq || info.Count != n {
		t.Fatalf("LogInfo %+v, want First %d Last %d Count %d", info, all[0].Seq, all[n-1].Seq, n)
	}
}

// testChangeLogTrim: TrimLog removes the prefix of records before an
// instant; Last keeps the highest Seq ever assigned, and later records get
// higher ones.
func testChangeLogTrim(e *env) {
	cl := e.changeLog()
	t, ctx := e.t, e.ctx
	ref := e.createTable("logtrim")
	write := func(s string) {
		e.write(ref, strKey(s), nil, backend.Change{Op: backend.Put, Item: []byte(s), Log: []byte(s)})
	}
	for i := range 5 {
		write(fmt.Sprintf("old%d", i))
	}
	old := readAllLog(t, ctx, cl, ref, 0)
	time.Sleep(50 * time.Millisecond)
	for i := range 3 {
		write(fmt.Sprintf("new%d", i))
	}
	all := readAllLog(t, ctx, cl, ref, 0)
	if len(old) != 5 || len(all) != 8 {
		t.Fatalf("%d then %d records, want 5 then 8", len(old), len(all))
	}
	if !all[5].At.After(old[4].At) {
		t.Fatalf("a record 50ms later has At %v, not after %v", all[5].At, old[4].At)
	}
	cut := old[4].At.Add(time.Microsecond)
	if !cut.Before(all[5].At) {
		cut = old[4].At.Add(all[5].At.Sub(old[4].At) / 2)
	}
	res, err := cl.TrimLog(ctx, backend.TrimLogParams{Table: ref, Before: old[0].At})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 0 {
		t.Fatalf("TrimLog before the first record removed %d", res.Removed)
	}
	res, err = cl.TrimLog(ctx, backend.TrimLogParams{Table: ref, Before: cut})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 5 {
		t.Fatalf("TrimLog removed %d, want 5", res.Removed)
	}
	if got := datasOf(readAllLog(t, ctx, cl, ref, 0)); strings.Join(got, "|") != "new0|new1|new2" {
		t.Fatalf("after trimming: %q", got)
	}
	info := logInfo(t, ctx, cl, ref)
	if info.First != all[5].Seq || info.Last != all[7].Seq || info.Count != 3 {
		t.Fatalf("LogInfo after trimming %+v, want First %d Last %d Count 3", info, all[5].Seq, all[7].Seq)
	}
	// Trim everything: empty, but Last is kept and new records go on.
	res, err = cl.TrimLog(ctx, backend.TrimLogParams{Table: ref, Before: all[7].At.Add(time.Second)})
	if err != nil || res.Removed != 3 {
		t.Fatalf("TrimLog of everything: %+v, %v", res, err)
	}
	if info := logInfo(t, ctx, cl, ref); info.First != 0 || info.Count != 0 || info.Last != all[7].Seq {
		t.Fatalf("LogInfo of a trimmed log %+v, want First 0 Count 0 Last %d", info, all[7].Seq)
	}
	if recs := readAllLog(t, ctx, cl, ref, 0); len(recs) != 0 {
		t.Fatalf("trimmed log reads %q", datasOf(recs))
	}
	write("after")
	recs := readAllLog(t, ctx, cl, ref, 0)
	if len(recs) != 1 || recs[0].Seq <= all[7].Seq {
		t.Fatalf("record after trimming: %v (last before %d)", seqsOf(recs), all[7].Seq)
	}
	if info := logInfo(t, ctx, cl, ref); info.First != recs[0].Seq || info.Last != recs[0].Seq || info.Count != 1 {
		t.Fatalf("LogInfo %+v after a new record %d", info, recs[0].Seq)
	}
}

// testChangeLogLifetime: the log belongs to the table incarnation.
func testChangeLogLifetime(e *env) {
	cl := e.changeLog()
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("loglife")
	for i := range 3 {
		e.write(ref, strKey(strconv.Itoa(i)), nil, backend.Change{Op: backend.Put, Item: []byte("v"), Log: []byte("gone")})
	}
	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	dead := func(what string, ref backend.TableRef) {
		t.Helper()
		_, err := cl.ReadLog(ctx, backend.ReadLogParams{Table: ref, Limit: 10})
		wantKind(t, what+": ReadLog", err, backend.KindTableNotFound)
		_, err = cl.LogInfo(ctx, backend.LogInfoParams{Table: ref})
		wantKind(t, what+": LogInfo", err, backend.KindTableNotFound)
		_, err = cl.TrimLog(ctx, backend.TrimLogParams{Table: ref, Before: time.Now()})
		wantKind(t, what+": TrimLog", err, backend.KindTableNotFound)
	}
	dead("deleted table", ref)
	dead("never existed", backend.TableRef{Account: ref.Account, Name: "nothing", ID: 1 << 50, Version: 1})

	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: ref.Account, Name: ref.Name, Desc: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	again := cr.Table.Ref()
	if info := logInfo(t, ctx, cl, again); info != (backend.LogInfoResult{}) {
		t.Fatalf("LogInfo of the re-created table: %+v, want zeros", info)
	}
	if recs := readAllLog(t, ctx, cl, again, 0); len(recs) != 0 {
		t.Fatalf("re-created table has records %q", datasOf(recs))
	}
	e.write(again, strKey("x"), nil, backend.Change{Op: backend.Put, Item: []byte("v"), Log: []byte("new")})
	if got := datasOf(readAllLog(t, ctx, cl, again, 0)); len(got) != 1 || got[0] != "new" {
		t.Fatalf("re-created table's records %q", got)
	}
	dead("deleted table after re-creation", ref)
}

// testChangeLogConcurrent runs the concurrent scenario on the backend.
func testChangeLogConcurrent(e *env) {
	cl := e.changeLog()
	ref := e.createTable("logconc")
	ChangeLogScenario(e.t, []backend.Backend{e.b}, []backend.ChangeLog{cl}, ref, 16, 60, 200)
}

// ChangeLogScenario: writers goroutines (spread over the backends, which
// share one store) each make `each` read-modify-write increments on
// random keys of `keys`, a fifth of them in two-item transactions of which
// some are canceled, plus conditional writes that fail; every record's
// Data names the key and the item's new counter. Meanwhile a reader polls
// ReadLog from the last Seq it saw. Then every acknowledged write has
// exactly one record, each key's records come in counter order (commit
// order), Seq strictly increases, and the polling reader saw exactly the
// whole log (no record appeared behind it: no late gaps). Exported so a
// backend's tests can run it with two backends opened on one database.
func ChangeLogScenario(t *testing.T, bes []backend.Backend, cls []backend.ChangeLog, ref backend.TableRef, writers, each, keys int) {
	sc := &logScenario{t: t, ctx: t.Context(), bes: bes, cls: cls, ref: ref, keys: keys, acked: make([]atomic.Int64, keys)}
	// Six polling readers (so that backends which publish on read
	// publish concurrently), spread over the backends.
	const readers = 6
	polledBy := make([][]backend.LogRecord, readers)
	var readersWG sync.WaitGroup
	for ri := range readers {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			polledBy[ri] = sc.poll(cls[(ri+1)%len(cls)])
		}()
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc.write(w, each)
		}()
	}
	wg.Wait()
	sc.stop.Store(true)
	readersWG.Wait()
	if t.Failed() {
		return
	}
	all := sc.check()
	for _, polled := range polledBy {
		checkPolled(t, polled, all)
	}
	info := logInfo(t, sc.ctx, cls[0], ref)
	if info.Count != int64(len(all)) || (len(all) > 0 && (info.First != all[0].Seq || info.Last != all[len(all)-1].Seq)) {
		t.Fatalf("LogInfo %+v for %d records", info, len(all))
	}
	t.Logf("change log scenario: %d records, %d writers on %d backends, %d keys", len(all), writers, len(bes), keys)
}

// logScenario is the state ChangeLogScenario's writers and readers share.
type logScenario struct {
	t     *testing.T
	ctx   context.Context
	bes   []backend.Backend
	cls   []backend.ChangeLog
	ref   backend.TableRef
	keys  int
	acked []atomic.Int64 // acknowledged writes per key
	// stop tells the readers that the writers are done; failures counts
	// the failures so far (writers stop at the first).
	stop     atomic.Bool
	failures atomic.Int64
}

func (sc *logScenario) key(i int) []byte { return strKey(fmt.Sprintf("key%04d", i)) }

func (sc *logScenario) fail(format string, args ...any) {
	sc.failures.Add(1)
	sc.t.Errorf(format, args...)
}

// logCounter is the counter an item holds (0 when absent).
func logCounter(old []byte) int {
	if old == nil {
		return 0
	}
	n, err := strconv.Atoi(string(old))
	if err != nil {
		panic(fmt.Sprintf("item %q", old))
	}
	return n
}

// incr increments key k's counter; its record names the key and the new
// counter.
func (sc *logScenario) incr(k int) backend.WriteFunc {
	return func(old []byte) (backend.Change, error) {
		n := logCounter(old) + 1
		return backend.Change{Op: backend.Put, Item: []byte(strconv.Itoa(n)), Log: fmt.Appendf(nil, "%d:%d", k, n)}, nil
	}
}

// failing is a conditional write on key k that fails.
func (sc *logScenario) failing(k int) backend.WriteFunc {
	return func(old []byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("bad"), Log: fmt.Appendf(nil, "%d:bad", k)}, errCond
	}
}

// retry runs a write again on a transaction conflict (nothing was
// written, and the functions are pure).
func retryConflicts(f func() error) error {
	for {
		err := f()
		if !backend.IsKind(err, backend.KindTransactionConflict) {
			return err
		}
	}
}

// poll reads the log through cl from the last Seq it saw until the
// writers are done and nothing is left, and answers what it read.
func (sc *logScenario) poll(cl backend.ChangeLog) []backend.LogRecord {
	var polled []backend.LogRecord
	var after int64
	for {
		finished := sc.stop.Load()
		res, err := cl.ReadLog(sc.ctx, backend.ReadLogParams{Table: sc.ref, After: after, Limit: 1 + rand.IntN(64)})
		if err != nil {
			sc.fail("polling ReadLog: %v", err)
			return polled
		}
		for _, r := range res.Records {
			if r.Seq <= after {
				sc.fail("polling ReadLog after %d returned Seq %d", after, r.Seq)
				return polled
			}
			after = r.Seq
		}
		polled = append(polled, res.Records...)
		if len(res.Records) == 0 {
			if finished {
				return polled
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// write is writer w: each writes on random keys, a fifth of them
// two-item transactions (some canceled), some failing conditional writes.
func (sc *logScenario) write(w, each int) {
	be := sc.bes[w%len(sc.bes)]
	r := rand.New(rand.NewPCG(uint64(w), 42))
	ctx, ref, keys := sc.ctx, sc.ref, sc.keys
	for i := 0; i < each && sc.failures.Load() == 0; i++ {
		k := r.IntN(keys)
		switch {
		case i%5 == 4: // a transaction of two distinct keys
			k2 := (k + 1 + r.IntN(keys-1)) % keys
			cancel := i%3 == 0
			err := retryConflicts(func() error {
				ops := []backend.WriteItemParams{
					{Table: ref, PK: sc.key(k), Fn: sc.incr(k)},
					{Table: ref, PK: sc.key(k2), Fn: sc.incr(k2)},
				}
				if cancel {
					k3 := (k2 + 1) % keys
					if k3 == k {
						k3 = (k3 + 1) % keys
					}
					ops = append(ops, backend.WriteItemParams{Table: ref, PK: sc.key(k3), Fn: sc.failing(k3)})
				}
				_, err := be.TransactWrite(ctx, backend.TransactWriteParams{Ops: ops})
				return err
			})
			switch {
			case cancel && backend.IsKind(err, backend.KindTransactionCanceled):
			case !cancel && err == nil:
				sc.acked[k].Add(1)
				sc.acked[k2].Add(1)
			default:
				sc.fail("transaction (cancel %v): %v", cancel, err)
			}
		case i%7 == 3: // a failing conditional write
			err := retryConflicts(func() error {
				_, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: sc.key(k), Fn: sc.failing(k)})
				return err
			})
			if !errors.Is(err, errCond) {
				sc.fail("failing write: %v", err)
			}
		default:
			err := retryConflicts(func() error {
				_, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: sc.key(k), Fn: sc.incr(k)})
				return err
			})
			if err != nil {
				sc.fail("write: %v", err)
			} else {
				sc.acked[k].Add(1)
			}
		}
	}
}

// check reads the whole log after the writes, through every backend, and
// holds it to the writes: every backend agrees, Seq strictly increases,
// each key's records come in counter order, and every acknowledged write
// (and no other) has its record. It answers the log.
func (sc *logScenario) check() []backend.LogRecord {
	t, ctx, keys := sc.t, sc.ctx, sc.keys
	var all []backend.LogRecord
	for i, cl := range sc.cls {
		got := readAllLog(t, ctx, cl, sc.ref, 0)
		if i == 0 {
			all = got
		} else if fmt.Sprint(seqsOf(got)) != fmt.Sprint(seqsOf(all)) {
			t.Fatalf("backends disagree on the log: %d and %d records", len(all), len(got))
		}
	}
	next := make([]int, keys) // the counter each key's next record must carry
	for i, r := range all {
		if i > 0 && r.Seq <= all[i-1].Seq {
			t.Fatalf("Seq not increasing: %d then %d", all[i-1].Seq, r.Seq)
		}
		var k, n int
		if _, err := fmt.Sscanf(string(r.Data), "%d:%d", &k, &n); err != nil || k < 0 || k >= keys {
			t.Fatalf("record %d (Seq %d) %q is not an acknowledged write's record", i, r.Seq, r.Data)
		}
		next[k]++
		if n != next[k] {
			t.Fatalf("key %d: record %q (Seq %d) where counter %d comes next (missing, duplicate or out of commit order)", k, r.Data, r.Seq, next[k])
		}
	}
	var total int64
	for k := range keys {
		total += sc.acked[k].Load()
		item, err := sc.bes[0].GetItem(ctx, backend.GetItemParams{Table: sc.ref, PK: sc.key(k)})
		if err != nil {
			t.Fatal(err)
		}
		if got := logCounter(item.Item); int64(got) != sc.acked[k].Load() || next[k] != got {
			t.Fatalf("key %d: counter %d, %d acknowledged writes, %d records", k, got, sc.acked[k].Load(), next[k])
		}
	}
	if int64(len(all)) != total {
		t.Fatalf("%d records for %d acknowledged writes", len(all), total)
	}
	return all
}

// checkPolled holds what a polling reader saw to the whole log: the same
// records, none appeared behind the reader (no late gaps).
func checkPolled(t *testing.T, polled, all []backend.LogRecord) {
	if fmt.Sprint(seqsOf(polled)) != fmt.Sprint(seqsOf(all)) {
		missing := 0
		in := map[int64]bool{}
		for _, r := range polled {
			in[r.Seq] = true
		}
		for _, r := range all {
			if !in[r.Seq] {
				missing++
			}
		}
		t.Fatalf("the polling reader saw %d records, the log holds %d; %d appeared behind the reader (late gaps)", len(polled), len(all), missing)
	}
	for i := range polled {
		if !bytes.Equal(polled[i].Data, all[i].Data) {
			t.Fatalf("record %d read as %q while polling, %q after", polled[i].Seq, polled[i].Data, all[i].Data)
		}
	}
}

// ChangeLogReopen: records survive closing and reopening the backend.
// open returns a new backend on the same store each time it is called;
// the test closes them.
func ChangeLogReopen(t *testing.T, open func(t *testing.T) backend.Backend) {
	ctx := t.Context()
	b1 := open(t)
	cl1 := b1.Capabilities().ChangeLog
	if cl1 == nil {
		t.Skipf("capability absent: backend %s does not implement backend.ChangeLog", b1.Name())
	}
	name := fmt.Sprintf("reopen-%08x", rand.Uint32())
	cr, err := b1.CreateTable(ctx, backend.CreateTableParams{Account: "acct-changelog-reopen", Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	for i := range 10 {
		if _, err := b1.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: strKey(strconv.Itoa(i)),
			Fn: logFn(backend.Put, "v", fmt.Sprintf("r%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	before := readAllLog(t, ctx, cl1, ref, 0)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := open(t)
	defer b2.Close()
	cl2 := b2.Capabilities().ChangeLog
	after := readAllLog(t, ctx, cl2, ref, 0)
	if fmt.Sprint(seqsOf(after)) != fmt.Sprint(seqsOf(before)) || strings.Join(datasOf(after), "|") != strings.Join(datasOf(before), "|") {
		t.Fatalf("after reopening: %v %q, before %v %q", seqsOf(after), datasOf(after), seqsOf(before), datasOf(before))
	}
	for i := range after {
		if !after[i].At.Equal(before[i].At) {
			t.Fatalf("record %d At %v after reopening, %v before", after[i].Seq, after[i].At, before[i].At)
		}
	}
	if _, err := b2.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: strKey("x"), Fn: logFn(backend.Put, "v", "more")}); err != nil {
		t.Fatal(err)
	}
	recs := readAllLog(t, ctx, cl2, ref, before[len(before)-1].Seq)
	if len(recs) != 1 || string(recs[0].Data) != "more" {
		t.Fatalf("a record after reopening: %q", datasOf(recs))
	}
}
