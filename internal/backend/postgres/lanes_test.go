package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/extenddb/extenddb/internal/backend"
)

func putT(t testing.TB, b *Backend, ref backend.TableRef, k, v string) {
	t.Helper()
	_, err := b.WriteItem(context.Background(), backend.WriteItemParams{Table: ref, PK: []byte(k),
		Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte(v)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadLanes: concurrent GetItems through the lanes answer each its own
// item, absent keys answer no item, a deleted table answers
// KindTableNotFound, and several GetItems share a pipeline.
func TestReadLanes(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN, ReadLanes: 2})
	ref := createTable(t, b, "lanes")
	for i := range 50 {
		putT(t, b, ref, fmt.Sprintf("k%03d", i), fmt.Sprintf("v%03d", i))
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := (w*7 + i) % 60 // 50..59 are absent
				k := fmt.Sprintf("k%03d", n)
				res, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(k)})
				if err != nil {
					t.Errorf("get %s: %v", k, err)
					return
				}
				want := ""
				if n < 50 {
					want = fmt.Sprintf("v%03d", n)
				}
				if string(res.Item) != want || (n >= 50) != (res.Item == nil) {
					t.Errorf("get %s: item %q, want %q", k, res.Item, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	pipes, gets := b.LaneStats()
	t.Logf("%d GetItems in %d pipelines", gets, pipes)
	if gets != 32*200 {
		t.Errorf("lanes answered %d of %d GetItems", gets, 32*200)
	}
	if pipes >= gets {
		t.Errorf("no pipeline carried more than one GetItem (%d pipelines, %d gets)", pipes, gets)
	}
	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("k001")}); !backend.IsKind(err, backend.KindTableNotFound) {
		t.Fatalf("get on a deleted table: %v, want KindTableNotFound", err)
	}
}

// TestReadLanesCanceled: a GetItem whose context has ended answers
// KindUnavailable, and the lanes go on serving.
func TestReadLanesCanceled(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN, ReadLanes: 1})
	ref := createTable(t, b, "lanescancel")
	putT(t, b, ref, "a", "va")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("a")}); !backend.IsKind(err, backend.KindUnavailable) {
		t.Fatalf("canceled get: %v, want KindUnavailable", err)
	}
	res, err := b.GetItem(t.Context(), backend.GetItemParams{Table: ref, PK: []byte("a")})
	if err != nil || string(res.Item) != "va" {
		t.Fatalf("get after a canceled one: %q, %v", res.Item, err)
	}
}

// TestReadLanesKilledConnections: while an admin terminates the database's
// server processes, concurrent GetItems (through the lanes, whose
// pipelines lose their connection mid-flight) answer the right item or
// KindUnavailable, never another error or another item; most succeed.
func TestReadLanesKilledConnections(t *testing.T) {
	testReadLanesInterrupted(t, "pg_terminate_backend")
}

// TestReadLanesCanceledStatements: the same while an admin cancels the
// running statements (pg_cancel_backend: SQLSTATE 57014 mid-pipeline, the
// server skips the pipeline's rest up to its Sync): the unanswered
// GetItems run again and every answer is right or KindUnavailable.
func TestReadLanesCanceledStatements(t *testing.T) {
	testReadLanesInterrupted(t, "pg_cancel_backend")
}

func testReadLanesInterrupted(t *testing.T, fn string) {
	dsn := ownDatabase(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if i := strings.IndexAny(db, "?"); i >= 0 {
		db = db[:i]
	}
	if strings.Contains(dsn, "dbname=") {
		db = dsn[strings.LastIndex(dsn, "dbname=")+len("dbname="):]
	}
	b := openT(t, Options{DSN: dsn, MaxConns: 8, ReadLanes: 2})
	ref := createTable(t, b, "lanekill")
	for i := range 20 {
		putT(t, b, ref, fmt.Sprintf("k%02d", i), fmt.Sprintf("v%02d", i))
	}
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var okCount, unavailable atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := (w + i) % 20
				res, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(fmt.Sprintf("k%02d", n))})
				switch {
				case err == nil:
					if want := fmt.Sprintf("v%02d", n); string(res.Item) != want {
						t.Errorf("get k%02d: %q, want %q", n, res.Item, want)
						return
					}
					okCount.Add(1)
				case backend.IsKind(err, backend.KindUnavailable):
					unavailable.Add(1)
				default:
					t.Errorf("get: %v (kind not Unavailable)", err)
					return
				}
			}
		}()
	}
	// A cancel only means something to a running statement; a terminate
	// also hits the lanes' idle connections between pipelines (on a slow
	// host, as under -race, the pool's backends are idle most of the
	// time, and the next pipeline on a killed connection must fail over).
	state := ` AND state = 'active'`
	if fn == "pg_terminate_backend" {
		state = ""
	}
	// At least 6 rounds; more (up to 60) until a statement was hit, since
	// on a slow host a sample rarely finds one running.
	kills := 0
	for round := 0; round < 6 || (kills == 0 && round < 60); round++ {
		time.Sleep(150 * time.Millisecond)
		for range 20 {
			var n int
			if err := admin.QueryRow(ctx, `SELECT count(`+fn+`(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`+state, db).Scan(&n); err != nil {
				t.Fatal(err)
			}
			kills += n
		}
	}
	time.Sleep(150 * time.Millisecond)
	close(stop)
	wg.Wait()
	pipes, gets := b.LaneStats()
	t.Logf("%s hit %d processes; %d gets answered, %d KindUnavailable, %d retries; lanes: %d gets in %d pipelines",
		fn, kills, okCount.Load(), unavailable.Load(), b.Retries(), gets, pipes)
	if kills == 0 {
		t.Fatalf("%s hit no server process", fn)
	}
	if okCount.Load() == 0 || gets == 0 {
		t.Fatal("no GetItem succeeded through the lanes")
	}
}

// TestReadLanesAfterClose: a GetItem on a closed backend answers
// KindUnavailable at once (it does not wait for a lane that is gone).
func TestReadLanesAfterClose(t *testing.T) {
	need(t)
	b, err := Open(context.Background(), Options{DSN: testDSN, ReadLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	ref := createTable(t, b, "lanesclose")
	b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("a")}); !backend.IsKind(err, backend.KindUnavailable) || ctx.Err() != nil {
		t.Fatalf("get after Close: %v (context: %v), want KindUnavailable at once", err, ctx.Err())
	}
}
