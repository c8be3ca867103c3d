package backup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/postgres"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/faultstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
)

// The job tests run on every SQL backend: SQLite always, PostgreSQL when
// EXTENDDB_TEST_BACKENDS names it (EXTENDDB_TEST_POSTGRES_DSN: a database
// from which each test creates its own, since one catalog binds one store).

type backendCase struct {
	name string
	open func(t testing.TB) backend.Backend
}

func backends(t testing.TB) []backendCase {
	out := []backendCase{{"sqlite", func(t testing.TB) backend.Backend {
		b, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir() + "/db.sqlite"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}}}
	if strings.Contains(os.Getenv("EXTENDDB_TEST_BACKENDS"), "postgres") {
		admin := os.Getenv("EXTENDDB_TEST_POSTGRES_DSN")
		if admin == "" {
			t.Fatal("EXTENDDB_TEST_BACKENDS names postgres but EXTENDDB_TEST_POSTGRES_DSN is empty")
		}
		out = append(out, backendCase{"postgres", func(t testing.TB) backend.Backend {
			dsn := pgDatabase(t, admin)
			open := func() backend.Backend {
				b, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			b := open()
			siblings.Store(b, open)
			return b
		}})
	}
	return out
}

// siblings maps a PostgreSQL backend to a function that opens another
// one (another connection pool, as another server has) on its database.
var siblings sync.Map

// otherServer is the backend another server would have on b's database:
// its own pool on PostgreSQL; on SQLite (one process per database file)
// the same backend.
func otherServer(b backend.Backend) backend.Backend {
	if f, ok := siblings.Load(b); ok {
		return f.(func() backend.Backend)()
	}
	return b
}

// pgDatabase creates a database of the test's own (prefix of the admin
// database's name) and drops it at the end.
func pgDatabase(t testing.TB, admin string) string {
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/") + fmt.Sprintf("_t%08x", rand.Uint32())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, admin)
		if err == nil {
			c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// descJSON is what the test tables keep as their description: already
// the DynamoDB TableDescription (the engine keeps its own form and
// describes it; the job only needs the JSON).
type descJSON struct{}

func (descJSON) TableDescriptionJSON(t *backend.Table) ([]byte, error) { return t.Desc, nil }

func (descJSON) StoredDescription(src []byte) ([]byte, error) { return src, nil }

const account = "000000000000"

// restoreInto starts m's restore of bk into a new table name of account,
// created on b as a restore target.
func restoreInto(ctx context.Context, m *Manager, b backend.Backend, bk backend.BackupRecord, name string) error {
	return m.RestoreTable(ctx, bk, account, name, func(ctx context.Context) (*backend.Table, error) {
		res, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: name, Desc: []byte(`{"restoring":true}`)})
		if err != nil {
			return nil, err
		}
		return res.Table, nil
	})
}

func createTable(t testing.TB, b backend.Backend, name string) backend.TableRef {
	desc := fmt.Sprintf(`{"TableName":%q,"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],`+
		`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}],"TableStatus":"ACTIVE"}`, name)
	res, err := b.CreateTable(context.Background(), backend.CreateTableParams{Account: account, Name: name, Desc: []byte(desc)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Table.Ref()
}

func item(i int, v string) (pk, sk, raw []byte) {
	it := attr.Item{"pk": {Type: attr.S, Str: fmt.Sprintf("p%d", i%13)}, "sk": {Type: attr.N, Str: fmt.Sprint(i)},
		"v": {Type: attr.S, Str: v + strings.Repeat("x", 100)}}
	pk, _ = attr.KeyBytes(it["pk"])
	sk, _ = attr.KeyBytes(it["sk"])
	return pk, sk, attr.EncodeItem(it)
}

func put(t *testing.T, b backend.Backend, ref backend.TableRef, i int, v string) {
	pk, sk, raw := item(i, v)
	_, err := b.WriteItem(context.Background(), backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Blind: true,
		Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: raw}, nil }})
	if err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, b backend.Backend, ref backend.TableRef, i int) {
	pk, sk, _ := item(i, "")
	_, err := b.WriteItem(context.Background(), backend.WriteItemParams{Table: ref, PK: pk, SK: sk,
		Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Delete}, nil }})
	if err != nil {
		t.Fatal(err)
	}
}

func newManager(t testing.TB, b backend.Backend, st blobstore.Store, mod func(*Config)) *Manager {
	cfg := Config{Backend: b, Store: st, Describer: descJSON{}, TargetFileBytes: 16 << 10,
		HeartbeatInterval: 50 * time.Millisecond, StaleAfter: 2 * time.Second, ReconcileInterval: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func waitStatus(t *testing.T, m *Manager, arn string, want ...string) *backend.BackupRecord {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := m.GetBackup(context.Background(), arn)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if r != nil && r.Status == w {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("backup %s: status %+v, want %v", arn, r, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func forEach(t *testing.T, fn func(t *testing.T, b backend.Backend)) {
	for _, bc := range backends(t) {
		t.Run(bc.name, func(t *testing.T) { fn(t, bc.open(t)) })
	}
}

// TestBackupPinsTheInstant: a backup holds exactly the items acknowledged
// before it was requested, none written after, in several data files that
// verify completely; the sidecar is in sha256sum form.
func TestBackupPinsTheInstant(t *testing.T) {
	// One catalog binds one store: a backend each.
	for _, bc := range backends(t) {
		t.Run(bc.name+"/memstore", func(t *testing.T) { testPins(t, bc.open(t), memstore.New(), "") })
		t.Run(bc.name+"/fs", func(t *testing.T) {
			root := t.TempDir() + "/store"
			st, err := blobstore.NewFS(root)
			if err != nil {
				t.Fatal(err)
			}
			testPins(t, bc.open(t), st, root)
		})
	}
}

func testPins(t *testing.T, b backend.Backend, st blobstore.Store, fsRoot string) {
	{
		tbl := fmt.Sprintf("tbl%d", rand.Uint32())
		ref := createTable(t, b, tbl)
		const n = 600
		for i := range n {
			put(t, b, ref, i, "before")
		}
		var once sync.Once
		m := newManager(t, b, st, func(c *Config) {
			c.Hook = func(p string) {
				if p == PointSnapshotOpen {
					once.Do(func() {
						// Writes after the instant: none may be in the backup.
						for i := range 50 {
							put(t, b, ref, i, "after")
							del(t, b, ref, n-1-i)
						}
						put(t, b, ref, n+1, "after")
					})
				}
			}
		})
		rec, err := m.CreateBackup(t.Context(), account, tbl, "first")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != backend.BackupCreating || rec.Generation != 1 || rec.Owner != m.Owner() {
			t.Fatalf("CreateBackup = %+v", rec)
		}
		got := waitStatus(t, m, rec.ARN, backend.BackupAvailable, backend.BackupFailed)
		if got.Status != backend.BackupAvailable {
			t.Fatalf("backup FAILED: %s", got.Message)
		}
		if got.ItemCount != n {
			t.Fatalf("item count %d, want %d", got.ItemCount, n)
		}
		bk, err := Verify(t.Context(), st, rec.ARN)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if len(bk.DataFiles) < 2 {
			t.Fatalf("%d data files, want several", len(bk.DataFiles))
		}
		seen := map[string]bool{}
		err = bk.Items(t.Context(), func(r *format.Record) error {
			it, err := r.Decode()
			if err != nil {
				return err
			}
			if !strings.HasPrefix(it["v"].Str, "before") {
				return fmt.Errorf("item %v written after the instant is in the backup", it["sk"])
			}
			seen[it["sk"].Str] = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != n {
			t.Fatalf("%d distinct items, want %d", len(seen), n)
		}
		sc, err := st.Get(t.Context(), format.SidecarKey(rec.Prefix+"/"))
		if err != nil {
			t.Fatal(err)
		}
		sc.Close()
		if fsRoot != "" {
			// The sidecar verifies with sha256sum -c in the backup's directory.
			cmd := exec.Command("sha256sum", "-c", format.SidecarName)
			cmd.Dir = fsRoot + "/" + rec.Prefix
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sha256sum -c: %v\n%s", err, out)
			}
		}
	}
}

// TestBackupStoreFailure: a failing upload fails the job, the row is
// FAILED and nothing is left in the store.
func TestBackupStoreFailure(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ref := createTable(t, b, "tbl")
		for i := range 400 {
			put(t, b, ref, i, "v")
		}
		fst := faultstore.New(memstore.New())
		m := newManager(t, b, fst, nil)
		// The backup's second Put under its table's prefix fails (the store
		// owner's heartbeat also Puts, at its own pace).
		fst.Inject(faultstore.Fault{Op: faultstore.OpPut, KeyPrefix: account + "/tbl", Nth: 2, NthUnderPrefix: true})
		rec, err := m.CreateBackup(t.Context(), account, "tbl", "doomed")
		if err != nil {
			t.Fatal(err)
		}
		got := waitStatus(t, m, rec.ARN, backend.BackupAvailable, backend.BackupFailed)
		if got.Status != backend.BackupFailed || got.Message == "" {
			t.Fatalf("after a failed upload: %+v", got)
		}
		// The job removes its objects right after its FAILED write matched
		// (fencing: only the row's owner may delete them).
		deadline := time.Now().Add(10 * time.Second)
		for {
			left, err := fst.Inner().List(t.Context(), rec.Prefix)
			if err == nil && len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("objects left 10 s after a failed backup: %v, %v", left, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestBackupErrors: a missing table and the job bound.
func TestBackupErrors(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		createTable(t, b, "tbl")
		block := make(chan struct{})
		m := newManager(t, b, memstore.New(), func(c *Config) {
			c.MaxConcurrentJobs = 1
			c.Hook = func(p string) {
				if p == PointSnapshotOpen {
					<-block
				}
			}
		})
		if _, err := m.CreateBackup(t.Context(), account, "nope", "x1"); !backend.IsKind(err, backend.KindTableNotFound) {
			t.Fatalf("missing table: %v", err)
		}
		rec, err := m.CreateBackup(t.Context(), account, "tbl", "one")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.CreateBackup(t.Context(), account, "tbl", "two"); !backend.IsKind(err, backend.KindLimitExceeded) {
			t.Fatalf("over max_concurrent_jobs: %v", err)
		}
		close(block)
		waitStatus(t, m, rec.ARN, backend.BackupAvailable)
		// The job frees its slot when its goroutine returns, just after the
		// AVAILABLE write: a new job may meet the limit for that moment.
		var rec2 *backend.BackupRecord
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			rec2, err = m.CreateBackup(t.Context(), account, "tbl", "three")
			if err == nil || !backend.IsKind(err, backend.KindLimitExceeded) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("after the job ended the slot is free: %v", err)
		}
		waitStatus(t, m, rec2.ARN, backend.BackupAvailable)
	})
}

// TestFencing: the owner of a job stops heartbeating (a paused process);
// three other servers (on PostgreSQL each with its own pool on the one
// database) reconcile at once: the job is taken over exactly once and
// failed; when the stale owner wakes up, its writes do not land and what it
// uploaded late is removed.
func TestFencing(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ref := createTable(t, b, "tbl")
		for i := range 300 {
			put(t, b, ref, i, "v")
		}
		st := memstore.New()
		paused, resume := make(chan struct{}), make(chan struct{})
		var once, resumed sync.Once
		wake := func() { resumed.Do(func() { close(resume) }) }
		a := newManager(t, b, st, func(c *Config) {
			c.HeartbeatInterval = time.Hour // a paused process sends none
			c.Hook = func(p string) {
				if p == PointMidData {
					once.Do(func() { close(paused); <-resume })
				}
			}
		})
		t.Cleanup(wake) // before a.Close (cleanups run last first)
		rec, err := a.CreateBackup(t.Context(), account, "tbl", "fenced")
		if err != nil {
			t.Fatal(err)
		}
		<-paused
		// Three servers reconcile at once (each also does at Start).
		var wg sync.WaitGroup
		others := map[string]bool{}
		var mu sync.Mutex
		time.Sleep(700 * time.Millisecond)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Another server: on PostgreSQL its own connection pool.
				other := newManager(t, otherServer(b), st, func(c *Config) { c.StaleAfter = 500 * time.Millisecond })
				mu.Lock()
				others[other.Owner()] = true
				mu.Unlock()
				if err := other.Reconcile(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, _ := a.GetBackup(t.Context(), rec.ARN)
		// Generation 2: taken over exactly once, by one of the others.
		if got.Status != backend.BackupFailed || got.Generation != 2 || !others[got.Owner] {
			t.Fatalf("after takeover: %+v", got)
		}
		wake()
		// The stale owner finishes its upload, but AVAILABLE does not land.
		time.Sleep(500 * time.Millisecond)
		a.Close()
		got, _ = a.GetBackup(context.Background(), rec.ARN)
		if got.Status != backend.BackupFailed {
			t.Fatalf("the stale owner's write landed: %+v", got)
		}
		// Late uploads are removed by the reconciler.
		cleaner := newManager(t, b, st, nil)
		if err := cleaner.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if left, _ := st.List(context.Background(), rec.Prefix); len(left) != 0 {
			t.Fatalf("%d objects of a fenced job left", len(left))
		}
	})
}

// TestDeleteBackup: AVAILABLE -> DELETING -> DELETED, objects gone; a
// delete interrupted after the manifest is gone is finished by the
// reconciler once its claim is stale.
func TestDeleteBackup(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ref := createTable(t, b, "tbl")
		for i := range 100 {
			put(t, b, ref, i, "v")
		}
		st := memstore.New()
		stuck := make(chan struct{})
		var first atomic.Bool
		m := newManager(t, b, st, func(c *Config) {
			c.StaleAfter = 300 * time.Millisecond
			c.Hook = func(p string) {
				if p == PointDeleteNoManifest {
					if first.CompareAndSwap(false, true) {
						<-stuck // the first delete "crashes" here
					}
				}
			}
		})
		defer close(stuck)
		mk := func(name string) *backend.BackupRecord {
			rec, err := m.CreateBackup(t.Context(), account, "tbl", name)
			if err != nil {
				t.Fatal(err)
			}
			return waitStatus(t, m, rec.ARN, backend.BackupAvailable)
		}
		b1, b2 := mk("one"), mk("two")
		res, err := m.DeleteBackup(t.Context(), *b1)
		if err != nil || !res.Matched || res.Record.Status != backend.BackupDeleting {
			t.Fatalf("DeleteBackup = %+v, %v", res, err)
		}
		// A second delete of the same generation does not match.
		if res, err := m.DeleteBackup(t.Context(), *b1); err != nil || res.Matched {
			t.Fatalf("second DeleteBackup = %+v, %v", res, err)
		}
		time.Sleep(400 * time.Millisecond)
		if _, err := Verify(t.Context(), st, b1.ARN); err == nil {
			t.Fatalf("a half-deleted backup verifies")
		}
		if err := m.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, m, b1.ARN, backend.BackupDeleted)
		if left, _ := st.List(t.Context(), b1.Prefix); len(left) != 0 {
			t.Fatalf("%d objects left after delete", len(left))
		}
		if _, err := m.DeleteBackup(t.Context(), *b2); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, m, b2.ARN, backend.BackupDeleted)
		if left, _ := st.List(t.Context(), b2.Prefix); len(left) != 0 {
			t.Fatalf("%d objects left after delete", len(left))
		}
	})
}

// TestUnhealthyStore: a store owned by another catalog refuses backups
// with an error that says so.
func TestUnhealthyStore(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		createTable(t, b, "tbl")
		st := memstore.New()
		if _, err := blobstore.EnsureIdentity(t.Context(), st, "cat-someone-else"); err != nil {
			t.Fatal(err)
		}
		m := newManager(t, b, st, nil)
		_, err := m.CreateBackup(t.Context(), account, "tbl", "x12")
		if !backend.IsKind(err, backend.KindUnavailable) || !errors.Is(err, blobstore.ErrUnhealthy) || !strings.Contains(err.Error(), "cat-someone-else") {
			t.Fatalf("unhealthy store: %v", err)
		}
	})
}

// TestBackupWaitsForASnapshotSlot: with every snapshot slot of the
// backend held, CreateBackup waits for one to be freed instead of
// answering LimitExceeded at once.
func TestBackupWaitsForASnapshotSlot(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		createTable(t, b, "tbl")
		se := b.Capabilities().Snapshots
		var held []*backend.TableSnapshot
		for {
			s, err := se.OpenTableSnapshot(t.Context(), backend.OpenSnapshotParams{Account: account, Name: "tbl"})
			if backend.IsKind(err, backend.KindLimitExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, s)
			if len(held) > 64 {
				t.Fatal("open snapshots are not bounded")
			}
		}
		m := newManager(t, b, memstore.New(), nil)
		time.AfterFunc(300*time.Millisecond, func() { held[0].Items.Close() })
		defer func() {
			for _, s := range held[1:] {
				s.Items.Close()
			}
		}()
		start := time.Now()
		rec, err := m.CreateBackup(t.Context(), account, "tbl", "waited")
		if err != nil {
			t.Fatalf("CreateBackup while the slots were held for 300 ms: %v", err)
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("CreateBackup returned after %v, before a slot was freed", d)
		}
		waitStatus(t, m, rec.ARN, backend.BackupAvailable)
	})
}
