package mongodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/extenddb/extenddb/internal/backend"
)

// The crash test: a child process runs transfers between items as
// multi-item transactions (on the ledger) and is killed with SIGKILL at a
// random moment, several times; after each kill, a fresh process (a new
// Backend) must never see part of a transaction: the sum over the items is
// the initial total through GetItem, TransactGet and Scan, and the next
// child's transactions settle what the dead one left.

const crashChildEnv = "EXTENDDB_TEST_MONGODB_CRASH_CHILD"

// txLockTimeout keeps the dead coordinators' locks short in these tests.
const txLockTimeout = 3 * time.Second

type crashSpec struct {
	URI      string           `json:"uri"`
	Database string           `json:"db"`
	Table    backend.TableRef `json:"table"`
	Keys     int              `json:"keys"`
	Lease    time.Duration    `json:"lease"`
}

func crashKey(i int) []byte { return []byte(fmt.Sprintf("acct%02d", i)) }

func balance(item []byte) int {
	n, _ := strconv.Atoi(string(item))
	return n
}

// crashChild transfers 1 between random pairs of items until killed.
func crashChild() {
	var spec crashSpec
	if err := json.Unmarshal([]byte(os.Getenv(crashChildEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	b, err := Open(context.Background(), Options{URI: spec.URI, Database: spec.Database, LeaseDuration: spec.Lease, TxLockTimeout: txLockTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	for n := 0; ; n++ {
		from := rand.IntN(spec.Keys)
		to := (from + 1 + rand.IntN(spec.Keys-1)) % spec.Keys
		add := func(d int) backend.WriteFunc {
			return func(old []byte) (backend.Change, error) {
				return backend.Change{Op: backend.Put, Item: []byte(strconv.Itoa(balance(old) + d))}, nil
			}
		}
		_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
			{Table: spec.Table, PK: crashKey(from), Fn: add(-1)},
			{Table: spec.Table, PK: crashKey(to), Fn: add(1)},
		}})
		if err != nil && !backend.IsKind(err, backend.KindTransactionConflict) {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(2)
		}
		if n == 0 {
			fmt.Println("first transfer done")
		}
	}
}

// runAndKill starts this test binary as the child that env names (spec
// its configuration), waits for its first line (it has started writing),
// lets it run 100-500 ms more and kills it with SIGKILL.
func runAndKill(t *testing.T, round int, env string, spec []byte) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := out.Read(buf); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("round %d: child: %v", round, err)
	}
	time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestCrashMidTransaction(t *testing.T) {
	// A killed writer's item version claim holds its item for one lease
	// (ADR 0017); a short lease keeps the test short.
	const lease = 2 * time.Second
	b := openT(t, Options{LeaseDuration: lease, TxLockTimeout: txLockTimeout})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "crash", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const keys, each = 6, 100
	for i := range keys {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: crashKey(i), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(strconv.Itoa(each))}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	spec, _ := json.Marshal(crashSpec{URI: uri, Database: testDB, Table: ref, Keys: keys, Lease: lease})
	check := func(round int) {
		t.Helper()
		// A fresh process's view: a new Backend (its own pool and ledger).
		fresh := openT(t, Options{LeaseDuration: lease, TxLockTimeout: txLockTimeout})
		sum := 0
		var gets []backend.GetItemParams
		for i := range keys {
			g, err := fresh.GetItem(ctx, backend.GetItemParams{Table: ref, PK: crashKey(i)})
			if err != nil {
				t.Fatal(err)
			}
			sum += balance(g.Item)
			gets = append(gets, backend.GetItemParams{Table: ref, PK: crashKey(i)})
		}
		if sum != keys*each {
			t.Fatalf("round %d: GetItem sum %d, want %d (part of a transaction is visible)", round, sum, keys*each)
		}
		tg, err := fresh.TransactGet(ctx, backend.TransactGetParams{Keys: gets})
		if err != nil {
			t.Fatalf("round %d: TransactGet: %v", round, err)
		}
		sum = 0
		for _, it := range tg.Items {
			sum += balance(it)
		}
		if sum != keys*each {
			t.Fatalf("round %d: TransactGet sum %d, want %d", round, sum, keys*each)
		}
		sc, err := fresh.Scan(ctx, backend.ScanParams{Table: ref, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		sum = 0
		for _, r := range sc.Rows {
			sum += balance(r.Item)
		}
		if sum != keys*each || len(sc.Rows) != keys {
			t.Fatalf("round %d: Scan %d rows, sum %d, want %d rows, sum %d", round, len(sc.Rows), sum, keys, keys*each)
		}
	}
	locksLeft := 0
	for round := range 4 {
		runAndKill(t, round, crashChildEnv, spec)
		n, err := b.items(ref.ID).CountDocuments(ctx, bson.D{{Key: "lk", Value: bson.D{{Key: "$exists", Value: true}}}})
		if err != nil {
			t.Fatal(err)
		}
		locksLeft += int(n)
		check(round)
	}
	t.Logf("%d locks left behind by the killed processes over 4 rounds", locksLeft)
	// The sweep finishes what the dead coordinators left.
	time.Sleep(b.ledger.Options().LockTimeout + 500*time.Millisecond)
	if _, err := b.ledger.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		// A plain write settles any lock left on its item.
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: crashKey(i), Fn: func(old []byte) (backend.Change, error) {
			return backend.Change{Op: backend.Keep}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.db.Collection(txColl).CountDocuments(ctx, bson.D{{Key: "st", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil || n != 0 {
		t.Fatalf("%d transaction records left after the sweep (%v)", n, err)
	}
	check(4)
}

// TestSnapshotDuringTransactions: snapshots opened while ledger
// transactions move value between items always hold the whole total: the
// instant never cuts a transaction (locks are settled at the open, and a
// release after it keeps the pre-image).
func TestSnapshotDuringTransactions(t *testing.T) {
	b := openT(t, Options{})
	ctx := t.Context()
	acct := fmt.Sprintf("acct-%08x", rand.Uint32())
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: acct, Name: "snaptx", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const keys, each = 6, 100
	for i := range keys {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: crashKey(i), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(strconv.Itoa(each))}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 4)
	for w := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				from := r.IntN(keys)
				to := (from + 1 + r.IntN(keys-1)) % keys
				add := func(d int) backend.WriteFunc {
					return func(old []byte) (backend.Change, error) {
						return backend.Change{Op: backend.Put, Item: []byte(strconv.Itoa(balance(old) + d))}, nil
					}
				}
				_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
					{Table: ref, PK: crashKey(from), Fn: add(-1)}, {Table: ref, PK: crashKey(to), Fn: add(1)}}})
				if err != nil && !backend.IsKind(err, backend.KindTransactionConflict) {
					done <- err
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		for range 4 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}()
	for round := range 4 {
		time.Sleep(150 * time.Millisecond)
		snap, err := b.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: acct, Name: "snaptx", PageSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		sum, n := 0, 0
		for {
			r, err := snap.Items.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			sum += balance(r.Item)
			n++
			time.Sleep(20 * time.Millisecond) // let transfers commit while the stream reads
		}
		snap.Items.Close()
		if sum != keys*each || n != keys {
			t.Fatalf("round %d: snapshot of %d items sums to %d, want %d items summing to %d", round, n, sum, keys, keys*each)
		}
	}
}
