package storetest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/faultstore"
	"github.com/extenddb/extenddb/internal/blobstore/internal/s3test"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/blobstore/storetest"
)

var (
	resultsMu sync.Mutex
	results   = map[string]storetest.Result{}
)

func record(name string, r storetest.Result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results[name] = r
}

// TestMain prints, on stdout, which stores the conformance suite exercised
// and how it went, so a run that silently tested less is visible.
func TestMain(m *testing.M) {
	code := m.Run()
	sel, err := s3test.Selected()
	resultsMu.Lock()
	var names []string
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s (%s)", n, results[n]))
	}
	resultsMu.Unlock()
	if err != nil {
		fmt.Println("store conformance: invalid selection:", err)
	} else {
		fmt.Printf("store conformance: asked for %s; exercised: %s\n", strings.Join(sel, ","), strings.Join(parts, ", "))
		for _, n := range sel {
			if _, ok := results[n]; !ok {
				fmt.Printf("store conformance: %s was asked for but not exercised\n", n)
				if code == 0 && os.Getenv("EXTENDDB_TEST_ALLOW_PARTIAL") == "" && isFullRun() {
					code = 1
				}
			}
		}
	}
	os.Exit(code)
}

// isFullRun: no -run filter was given (a filtered run may legitimately
// leave stores out).
func isFullRun() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.run") {
			return false
		}
	}
	return true
}

func TestConformanceFS(t *testing.T) {
	if !s3test.Wants(t, "fs") {
		t.Skip("fs not selected by EXTENDDB_TEST_STORES")
	}
	r := storetest.RunWith(t, func(t *testing.T) blobstore.Store {
		s, err := blobstore.NewFS(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{})
	record("fs", r)
}

func TestConformanceMem(t *testing.T) {
	r := storetest.RunWith(t, func(t *testing.T) blobstore.Store { return memstore.New() }, storetest.Options{})
	record("mem", r)
}

// The fault decorator with no fault injected is a transparent store.
func TestConformanceFaultPassthrough(t *testing.T) {
	r := storetest.RunWith(t, func(t *testing.T) blobstore.Store { return faultstore.New(memstore.New()) }, storetest.Options{})
	record("faultstore(mem)", r)
}

func runS3(t *testing.T, srv s3test.Server) {
	const prefix = "backups/test"
	r := storetest.RunWith(t, func(t *testing.T) blobstore.Store {
		bucket := s3test.NewBucket(t, srv)
		s, err := blobstore.Open(context.Background(), s3test.Config(srv, bucket, prefix))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{
		LargeSize: 2*blobstore.MinPartSize + 12345, // three parts
		MaxKeyLen: blobstore.MaxKeyLen - len(prefix) - 1,
		AfterFailedPut: func(t *testing.T, s blobstore.Store) {
			t.Helper()
			if open := s3test.OpenUploads(t, srv, s.(*blobstore.S3).Bucket()); len(open) > 0 {
				t.Fatalf("%s: multipart uploads left open after a failed put: %q", srv.Name, open)
			}
		},
	})
	record(srv.Name, r)
}

func TestConformanceGofakes3(t *testing.T) {
	if !s3test.Wants(t, "gofakes3") {
		t.Skip("gofakes3 not selected by EXTENDDB_TEST_STORES")
	}
	runS3(t, s3test.Gofakes3(t))
}

func TestConformanceMoto(t *testing.T) {
	if !s3test.Wants(t, "moto") {
		t.Skip("moto not selected by EXTENDDB_TEST_STORES")
	}
	runS3(t, s3test.Moto(t))
}
