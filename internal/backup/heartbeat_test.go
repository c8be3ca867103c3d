package backup

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
)

func entryOf(es []SyncEntry, outcome string) *SyncEntry {
	for i := range es {
		if es[i].Outcome == outcome {
			return &es[i]
		}
	}
	return nil
}

// otherCatalog is another catalog (another database) than b's.
func otherCatalog(t *testing.T, b backend.Backend) backend.Backend {
	if b.Name() == "postgres" {
		return backends(t)[1].open(t)
	}
	return backends(t)[0].open(t)
}

// TestManagerHeartbeat: a running manager refreshes the store's heartbeat
// with its catalog, owner, host and interval; a clean Close marks it
// stopped.
func TestManagerHeartbeat(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st, err := blobstore.NewFS(t.TempDir() + "/store")
		if err != nil {
			t.Fatal(err)
		}
		m := newManager(t, b, st, nil)
		first, err := blobstore.ReadHeartbeat(ctx, st)
		if err != nil {
			t.Fatalf("no heartbeat after Start: %v", err)
		}
		host, _ := os.Hostname()
		id, _ := blobstore.ReadIdentity(ctx, st)
		if first.CatalogID != mustCatalogID(t, b) || first.StoreID != id.StoreID || first.Owner != m.Owner() || first.Host != host ||
			first.Interval != 50*time.Millisecond || first.Store != st.String() || first.Stopped || !first.Live(time.Now()) {
			t.Fatalf("heartbeat %+v", first)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			hb, err := blobstore.ReadHeartbeat(ctx, st)
			if err == nil && hb.Time.After(first.Time) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("heartbeat not refreshed: %+v %v", hb, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		m.Close()
		last, err := blobstore.ReadHeartbeat(ctx, st)
		if err != nil || !last.Stopped || last.Live(time.Now()) {
			t.Fatalf("after Close: %+v %v", last, err)
		}
	})
}

// TestAdoptStoreRefusesLiveOwner: --adopt-store refuses while the owner's
// heartbeat is live (naming the catalog, the time and the host, and
// --force); a dry run reports the refusal and changes nothing; --force
// takes the store over and says a live owner was overridden; the owner's
// server then refuses to write backups and says why.
func TestAdoptStoreRefusesLiveOwner(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st, err := blobstore.NewFS(t.TempDir() + "/store")
		if err != nil {
			t.Fatal(err)
		}
		ref := createTable(t, b, "owned")
		for i := range 10 {
			put(t, b, ref, i, "v")
		}
		m := newManager(t, b, st, func(c *Config) { c.HeartbeatInterval = time.Second; c.StaleAfter = 5 * time.Second })
		rec, err := m.CreateBackup(ctx, account, "owned", "b")
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, m, rec.ARN, backend.BackupAvailable)
		owner := mustCatalogID(t, b)
		host, _ := os.Hostname()
		idBefore, _ := blobstore.ReadIdentity(ctx, st)

		other := otherCatalog(t, b)
		ocat := other.Capabilities().Backups
		unchanged := func(what string) {
			t.Helper()
			if id, err := blobstore.ReadIdentity(ctx, st); err != nil || id != idBefore {
				t.Fatalf("%s changed the identity: %+v %v", what, id, err)
			}
			if rows, _ := ocat.ListBackups(ctx, backend.ListBackupsParams{}); len(rows) != 0 {
				t.Fatalf("%s wrote rows: %+v", what, rows)
			}
		}
		_, err = Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true})
		for _, want := range []string{owner, "heartbeat", host, "--force", time.Now().UTC().Format("2006-01-02T")} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("adopt over a live owner: %v, want %q", err, want)
			}
		}
		unchanged("a refused adoption")
		dry, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if e := entryOf(dry, OutcomeStoreRefused); e == nil || !strings.Contains(e.Detail, owner) || !Unfixed(e.Outcome) || outcomes(dry)[OutcomeAdoptable] != 1 {
			t.Fatalf("dry run over a live owner: %+v", dry)
		}
		unchanged("a dry run")
		dry, err = Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true, DryRun: true, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if e := entryOf(dry, OutcomeStoreAdoptable); e == nil || !strings.Contains(e.Detail, "live owner") {
			t.Fatalf("dry run with --force: %+v", dry)
		}
		unchanged("a dry run with --force")

		got, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		// The new identity is written: a beat of the old owner that begins
		// from now on reads it and writes nothing. (A beat that read the
		// identity before the write may still land after it: the store has
		// no compare-and-swap across the two files.)
		written := time.Now()
		e := entryOf(got, OutcomeStoreAdopted)
		if e == nil || !strings.Contains(e.Detail, "live owner") || !strings.Contains(e.Detail, "overridden") || outcomes(got)[OutcomeAdopted] != 1 {
			t.Fatalf("adopt with --force: %+v", got)
		}
		id, err := blobstore.ReadIdentity(ctx, st)
		if err != nil || id.CatalogID != mustCatalogID(t, other) || id.StoreID != idBefore.StoreID || id.AdoptedFrom != owner || id.AdoptedAt == nil {
			t.Fatalf("identity after the adoption: %+v %v", id, err)
		}

		// The server that lost the store refuses to write there, at once.
		_, err = m.CreateBackup(ctx, account, "owned", "late")
		if !backend.IsKind(err, backend.KindUnavailable) || !errors.Is(err, blobstore.ErrUnhealthy) || !strings.Contains(err.Error(), "taken over from this catalog") {
			t.Fatalf("backup after losing the store: %v", err)
		}
		if err := m.Healthy(ctx); err == nil || !strings.Contains(err.Error(), "--adopt-store") {
			t.Fatalf("health after losing the store: %v", err)
		}
		if cur, _ := m.GetBackup(ctx, rec.ARN); cur == nil {
			t.Fatal("row gone")
		} else if _, err := m.DeleteBackup(ctx, *cur); err == nil {
			t.Fatal("delete after losing the store succeeded")
		}
		// Its heartbeat loop stops writing: the next beat would name the old owner.
		time.Sleep(2500 * time.Millisecond)
		if hb, err := blobstore.ReadHeartbeat(ctx, st); err == nil && hb.CatalogID == owner && hb.Time.After(written) {
			t.Fatalf("the old owner still beats: %+v", hb)
		}
		m.Close()
		if hb, err := blobstore.ReadHeartbeat(ctx, st); err == nil && hb.CatalogID == owner && hb.Time.After(written) {
			t.Fatalf("the old owner's Close wrote a heartbeat into a store it lost: %+v", hb)
		}
	})
}

// TestAdoptStoreStaleOrNoHeartbeat: an owner whose heartbeat is older than
// three intervals (crashed), or a store without a heartbeat (written by an
// older server), is adopted without --force.
func TestAdoptStoreStaleOrNoHeartbeat(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		for _, c := range []struct {
			name string
			hb   *blobstore.Heartbeat
			want string
		}{
			{"stale", &blobstore.Heartbeat{CatalogID: "cat-gone", Host: "old-host", Time: time.Now().Add(-time.Hour), Interval: 15 * time.Second}, "old-host"},
			{"none", nil, "no heartbeat"},
			{"another catalog's", &blobstore.Heartbeat{CatalogID: "cat-third", Host: "h3", Time: time.Now(), Interval: time.Hour}, "no heartbeat"},
		} {
			t.Run(c.name, func(t *testing.T) {
				st, err := blobstore.NewFS(t.TempDir() + "/store")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := blobstore.EnsureIdentity(ctx, st, "cat-gone"); err != nil {
					t.Fatal(err)
				}
				if c.hb != nil {
					if err := blobstore.WriteHeartbeat(ctx, st, *c.hb); err != nil {
						t.Fatal(err)
					}
				}
				other := otherCatalog(t, b)
				dry, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true, DryRun: true})
				if err != nil || entryOf(dry, OutcomeStoreAdoptable) == nil {
					t.Fatalf("dry run: %+v %v", dry, err)
				}
				if id, _ := blobstore.ReadIdentity(ctx, st); id.CatalogID != "cat-gone" {
					t.Fatalf("dry run adopted: %+v", id)
				}
				got, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true})
				if err != nil {
					t.Fatal(err)
				}
				e := entryOf(got, OutcomeStoreAdopted)
				if e == nil || !strings.Contains(e.Detail, "cat-gone") || !strings.Contains(e.Detail, c.want) || strings.Contains(e.Detail, "overridden") {
					t.Fatalf("adopt: %+v", got)
				}
				if id, _ := blobstore.ReadIdentity(ctx, st); id.CatalogID != mustCatalogID(t, other) || id.AdoptedFrom != "cat-gone" {
					t.Fatalf("not adopted: %+v", id)
				}
			})
		}
	})
}

// TestForceNeedsAdoptStore: --force alone is refused.
func TestForceNeedsAdoptStore(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		st, _ := blobstore.NewFS(t.TempDir() + "/store")
		if _, err := Sync(context.Background(), b, st, descJSON{}, SyncOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "--adopt-store") {
			t.Fatalf("--force without --adopt-store: %v", err)
		}
	})
}
