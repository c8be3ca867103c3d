package blobstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/internal/s3test"
)

// heartbeatStores answers the filesystem store and the selected S3 stores.
func heartbeatStores(t *testing.T) map[string]blobstore.Store {
	ctx := context.Background()
	out := map[string]blobstore.Store{}
	fs, err := blobstore.NewFS(t.TempDir() + "/store")
	if err != nil {
		t.Fatal(err)
	}
	out["fs"] = fs
	for _, srv := range s3Servers(t) {
		st, err := blobstore.Open(ctx, s3test.Config(srv, s3test.NewBucket(t, srv), "hb"))
		if err != nil {
			t.Fatal(err)
		}
		out[srv.Name] = st
	}
	return out
}

// TestHeartbeat: the heartbeat is a plain object next to the identity,
// rewritten in place without touching the identity; it is live for three
// of its intervals; a store without one answers ErrNotFound.
func TestHeartbeat(t *testing.T) {
	for name, st := range heartbeatStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := blobstore.ReadHeartbeat(ctx, st); !errors.Is(err, blobstore.ErrNotFound) {
				t.Fatalf("no heartbeat: %v, want ErrNotFound", err)
			}
			id, err := blobstore.EnsureIdentity(ctx, st, "cat-A")
			if err != nil {
				t.Fatal(err)
			}
			before, err := st.Head(ctx, blobstore.IdentityKey)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			hb := blobstore.Heartbeat{CatalogID: "cat-A", StoreID: id.StoreID, Owner: "srv-1", Host: "host-1",
				Store: st.String(), Time: now.Add(-time.Minute), Interval: 15 * time.Second}
			for range 2 { // written twice: a plain put replaces it
				if err := blobstore.WriteHeartbeat(ctx, st, hb); err != nil {
					t.Fatal(err)
				}
				hb.Time = now
			}
			got, err := blobstore.ReadHeartbeat(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != blobstore.HeartbeatVersion || got.CatalogID != "cat-A" || got.Host != "host-1" || got.Owner != "srv-1" ||
				!got.Time.Equal(now.Truncate(time.Millisecond)) || got.Interval != 15*time.Second || got.StaleAfter() != 45*time.Second {
				t.Fatalf("heartbeat read back: %+v", got)
			}
			if !got.Live(now.Add(44*time.Second)) || got.Live(now.Add(46*time.Second)) {
				t.Fatal("a heartbeat is live for three intervals, then stale")
			}
			if !got.Live(now.Add(-time.Hour)) {
				t.Fatal("a heartbeat from the future (clock skew) is live")
			}
			stopped := hb
			stopped.Stopped = true
			if err := blobstore.WriteHeartbeat(ctx, st, stopped); err != nil {
				t.Fatal(err)
			}
			if got, err := blobstore.ReadHeartbeat(ctx, st); err != nil || !got.Stopped || got.Live(now) {
				t.Fatalf("a clean stop's heartbeat is never live: %+v %v", got, err)
			}
			after, err := st.Head(ctx, blobstore.IdentityKey)
			if err != nil || after.ETag != before.ETag || after.Size != before.Size {
				t.Fatalf("the heartbeat disturbed the identity: %+v -> %+v %v", before, after, err)
			}
			if again, err := blobstore.ReadIdentity(ctx, st); err != nil || again != id {
				t.Fatalf("identity after heartbeats: %+v %v", again, err)
			}
			// Health still sees an empty store of the owner as healthy.
			if h, err := blobstore.CheckHealth(ctx, st, "cat-A", nil, false); err != nil || !h.Healthy() {
				t.Fatalf("health with a heartbeat: %+v %v", h, err)
			}
		})
	}
}

// TestHeartbeatInvalid: a damaged or newer heartbeat is an error, not a
// missing one.
func TestHeartbeatInvalid(t *testing.T) {
	ctx := context.Background()
	st, err := blobstore.NewFS(t.TempDir() + "/store")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`not json`, `{"version":9,"catalog_id":"c","time":"2026-01-01T00:00:00Z","interval_seconds":1}`,
		`{"version":1,"time":"2026-01-01T00:00:00Z","interval_seconds":1}`} {
		st.Put(ctx, blobstore.HeartbeatKey, strings.NewReader(body))
		if _, err := blobstore.ReadHeartbeat(ctx, st); err == nil || errors.Is(err, blobstore.ErrNotFound) {
			t.Fatalf("%s: %v", body, err)
		}
	}
}

// TestAdoptedIdentityHealth: a catalog whose store was taken over from it
// is told when, from where and how to take it back.
func TestAdoptedIdentityHealth(t *testing.T) {
	at := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	id := &blobstore.Identity{Version: 1, StoreID: "st-1", CatalogID: "cat-B", AdoptedFrom: "cat-A", AdoptedAt: &at, AdoptedOn: "host-b"}
	err := blobstore.EvaluateHealth(id, true, "cat-A", []string{"st-1"}).Err()
	for _, want := range []string{"catalog cat-B", "taken over from this catalog", "2026-11-30T14:00:00Z", "host-b", "--adopt-store"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: want %q", err, want)
		}
	}
}
