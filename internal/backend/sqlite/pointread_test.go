package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestPointReads: GetItem's raw connections answer more concurrent reads
// than there are connections, keys with and without a sort key, absent
// items, never open more than Readers connections, and refuse reads once
// the backend is closed.
func TestPointReads(t *testing.T) {
	ctx := context.Background()
	for _, mmap := range []int64{0, 64 << 20} {
		t.Run(fmt.Sprintf("mmap=%d", mmap), func(t *testing.T) {
			b, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "db.sqlite"), Readers: 2, ItemCacheBytes: -1, MmapBytes: mmap})
			if err != nil {
				t.Fatal(err)
			}
			cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t"})
			if err != nil {
				t.Fatal(err)
			}
			ref := cr.Table.Ref()
			put := func(pk, sk, item string) {
				var skb []byte
				if sk != "" {
					skb = []byte(sk)
				}
				if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), SK: skb, Fn: func([]byte) (backend.Change, error) {
					return backend.Change{Op: backend.Put, Item: []byte(item)}, nil
				}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 50 {
				put(fmt.Sprint("p", i), "", fmt.Sprint("item", i))
				put(fmt.Sprint("p", i), fmt.Sprint("s", i), fmt.Sprint("sorted", i))
			}
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 50 {
						k := (i + g) % 50
						for _, c := range []struct{ sk, want string }{{"", fmt.Sprint("item", k)}, {fmt.Sprint("s", k), fmt.Sprint("sorted", k)}, {"absent", ""}} {
							var skb []byte
							if c.sk != "" {
								skb = []byte(c.sk)
							}
							res, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(fmt.Sprint("p", k)), SK: skb})
							if err != nil {
								t.Error(err)
								return
							}
							if c.want == "" && res.Item != nil || c.want != "" && !bytes.Equal(res.Item, []byte(c.want)) {
								t.Errorf("p%d/%q: %q, want %q", k, c.sk, res.Item, c.want)
							}
						}
					}
				}()
			}
			wg.Wait()
			if n := b.points.n; n > 2 {
				t.Errorf("%d point readers open, want at most 2", n)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if b.points.n != 0 {
				t.Errorf("%d point readers open after Close", b.points.n)
			}
			if _, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte("p1")}); !backend.IsKind(err, backend.KindUnavailable) {
				t.Errorf("GetItem after Close: %v, want KindUnavailable", err)
			}
		})
	}
}

// TestPointReadWaitEndsOnClose: a GetItem waiting for a point reader
// while every one is in use ends when the backend closes.
func TestPointReadWaitEndsOnClose(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, Options{Path: filepath.Join(t.TempDir(), "db.sqlite"), Readers: 1, ItemCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.points.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.GetItem(ctx, backend.GetItemParams{Table: cr.Table.Ref(), PK: []byte("k")})
		done <- err
	}()
	b.points.close()
	if err := <-done; !backend.IsKind(err, backend.KindUnavailable) {
		t.Errorf("waiting GetItem after close: %v, want KindUnavailable", err)
	}
	b.points.put(held, false)
	if b.points.n != 0 {
		t.Errorf("%d point readers open after close", b.points.n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
