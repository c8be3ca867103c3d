package backup

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// TestReconcilerKeepsOtherCatalogsSpools: the spool directory is often
// the system's temporary directory, shared by servers of other catalogs
// (another data directory, another database). A reconciler removes the
// spool directories of its own catalog's dead owners only, never those of
// another catalog's running restore (nor those of an older version, whose
// names carry no catalog).
func TestReconcilerKeepsOtherCatalogsSpools(t *testing.T) {
	open := backends(t)[0].open
	spool := t.TempDir()
	withSpool := func(c *Config) { c.SpoolDir = spool }
	a := newManager(t, open(t), memstore.New(), withSpool)
	b := newManager(t, open(t), memstore.New(), withSpool)
	if a.catalogID == "" || a.catalogID == b.catalogID {
		t.Fatalf("catalog ids %q and %q", a.catalogID, b.catalogID)
	}
	mine := filepath.Join(spool, a.spoolDirPrefix()+"srv-dead0001-123")
	theirs := filepath.Join(spool, b.spoolDirPrefix()+"srv-live0002-456")
	legacy := filepath.Join(spool, spoolPrefix+"srv-old0003-789")
	for _, d := range []string{mine, theirs, legacy} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("the spool of this catalog's dead owner is still there: %v", err)
	}
	for _, d := range []string{theirs, legacy} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: removed by another catalog's reconciler: %v", filepath.Base(d), err)
		}
	}
}
