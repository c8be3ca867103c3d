package blobstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

func TestEvaluateHealth(t *testing.T) {
	id := &blobstore.Identity{Version: 1, StoreID: "st-1", CatalogID: "cat-A"}
	for _, c := range []struct {
		name    string
		id      *blobstore.Identity
		objects bool
		known   []string
		healthy bool
		needs   bool
		want    string
	}{
		{"fresh store", nil, false, nil, true, true, ""},
		{"ours", id, true, []string{"st-1", "st-1", ""}, true, false, ""},
		{"ours, no rows", id, false, nil, true, false, ""},
		{"other catalog", &blobstore.Identity{Version: 1, StoreID: "st-1", CatalogID: "cat-B"}, true, nil, false, false, "catalog cat-B"},
		{"missing identity, objects", nil, true, nil, false, false, "no extenddb-store.json"},
		{"missing identity, rows", nil, false, []string{"st-1"}, false, false, "wrong or wiped"},
		{"two ids in rows", id, true, []string{"st-1", "st-2"}, false, false, "2 stores"},
		{"rows name another store", id, true, []string{"st-9"}, false, false, "store st-9"},
	} {
		h := blobstore.EvaluateHealth(c.id, c.objects, "cat-A", c.known)
		if h.Healthy() != c.healthy || h.NeedsIdentity != c.needs {
			t.Errorf("%s: %+v", c.name, h)
			continue
		}
		if !c.healthy {
			err := h.Err()
			if !errors.Is(err, blobstore.ErrUnhealthy) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want ErrUnhealthy mentioning %q", c.name, err, c.want)
			}
		} else if h.Err() != nil {
			t.Errorf("%s: Err = %v", c.name, h.Err())
		}
	}
}

func TestCheckHealthAndIdentity(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	h, err := blobstore.CheckHealth(ctx, s, "cat-A", nil, false)
	if err != nil || !h.NeedsIdentity || s.Len() != 0 {
		t.Fatalf("fresh, create=false: %+v %v", h, err)
	}
	// Racing servers of two catalogs: one identity wins, the loser is unhealthy.
	var wg sync.WaitGroup
	res := make([]blobstore.Health, 2)
	for i, cat := range []string{"cat-A", "cat-B"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := blobstore.CheckHealth(ctx, s, cat, nil, true)
			if err != nil {
				t.Error(err)
			}
			res[i] = h
		}()
	}
	wg.Wait()
	if res[0].Healthy() == res[1].Healthy() {
		t.Fatalf("both or neither healthy: %+v", res)
	}
	id, err := blobstore.ReadIdentity(ctx, s)
	if err != nil || id.Version != 1 || !strings.HasPrefix(id.StoreID, "st-") {
		t.Fatalf("identity %+v %v", id, err)
	}
	again, err := blobstore.EnsureIdentity(ctx, s, id.CatalogID)
	if err != nil || again != id {
		t.Fatalf("EnsureIdentity on an existing identity: %+v %v, want %+v", again, err, id)
	}
	h, err = blobstore.CheckHealth(ctx, s, id.CatalogID, []string{id.StoreID}, true)
	if err != nil || !h.Healthy() || h.Identity.StoreID != id.StoreID {
		t.Fatalf("owner: %+v %v", h, err)
	}
	// Identity lost while backups exist.
	s.Put(ctx, "acct/t/b1/extenddb-manifest.json", strings.NewReader("{}"))
	s.DeletePrefix(ctx, blobstore.IdentityKey)
	h, err = blobstore.CheckHealth(ctx, s, id.CatalogID, nil, true)
	if err != nil || h.Healthy() || s.Len() != 1 {
		t.Fatalf("lost identity: %+v %v (objects %d)", h, err, s.Len())
	}
	// A newer identity version is refused.
	s2 := memstore.New()
	s2.Put(ctx, blobstore.IdentityKey, strings.NewReader(`{"version":2,"store_id":"x","catalog_id":"y"}`))
	if _, err := blobstore.CheckHealth(ctx, s2, "y", nil, true); err == nil {
		t.Fatal("identity version 2 accepted")
	}
}
