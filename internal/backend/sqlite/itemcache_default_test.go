package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestItemCacheDefault: the item cache is bounded at 16 MiB by default, in
// Options and in the storage.sqlite section (its Go heap counts about
// twice in RSS; docs/benchmarks.md, "Peak RSS of the SQLite server").
func TestItemCacheDefault(t *testing.T) {
	b, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "db.sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Stats().CacheMaxBytes; got != 16<<20 {
		t.Errorf("item cache bound %d, want %d", got, 16<<20)
	}
	if c := Driver().NewConfig().(*Config); c.ItemCacheMB != 16 {
		t.Errorf("storage.sqlite.item_cache_mb default %d, want 16", c.ItemCacheMB)
	}
	for _, k := range Driver().Keys {
		if k.Key == "item_cache_mb" && k.Default != "16" {
			t.Errorf("documented default %q, want 16", k.Default)
		}
	}
}
