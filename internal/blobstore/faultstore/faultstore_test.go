package faultstore_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/faultstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

func TestFaults(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	fs := faultstore.New(mem)

	fs.Inject(faultstore.Fault{Op: faultstore.OpPut, Nth: 2})
	if err := fs.Put(ctx, "a", strings.NewReader("1")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Put(ctx, "b", strings.NewReader("2")); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("2nd Put: %v", err)
	}
	if _, err := mem.Head(ctx, "b"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatal("failed Put reached the inner store")
	}
	if err := fs.Put(ctx, "c", strings.NewReader("3")); err != nil || fs.Calls(faultstore.OpPut) != 3 {
		t.Fatalf("3rd Put: %v, calls %d", err, fs.Calls(faultstore.OpPut))
	}

	// After: the write lands, the caller sees an error.
	boom := errors.New("lost answer")
	fs.Inject(faultstore.Fault{Op: faultstore.OpPutIfAbsent, KeyPrefix: "x", After: true, Err: boom})
	if err := fs.PutIfAbsent(ctx, "x/1", strings.NewReader("v")); !errors.Is(err, boom) {
		t.Fatalf("After fault: %v", err)
	}
	if _, err := mem.Head(ctx, "x/1"); err != nil {
		t.Fatal("After fault: the write did not land")
	}
	if err := fs.PutIfAbsent(ctx, "y", strings.NewReader("v")); err != nil {
		t.Fatalf("KeyPrefix leaked: %v", err)
	}

	// A Put whose input is cut short publishes nothing.
	fs.Inject(faultstore.Fault{Op: faultstore.OpPut, KeyPrefix: "cut", Cut: true, CutAfter: 3})
	if err := fs.Put(ctx, "cut/k", strings.NewReader("abcdef")); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("cut Put: %v", err)
	}
	if _, err := mem.Head(ctx, "cut/k"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatal("cut Put published")
	}

	// A Get stream cut short.
	fs.Inject(faultstore.Fault{Op: faultstore.OpGet, Cut: true, CutAfter: 1})
	rc, err := fs.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if string(b) != "1" || !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("cut Get: %q %v", b, err)
	}
	fs.Reset()
	put := func(k string) { fs.Put(ctx, k, strings.NewReader("0123456789")) }
	put("long")
	fs.Inject(faultstore.Fault{Op: faultstore.OpGetRange, Cut: true, CutAfter: 2})
	rc, _ = fs.GetRange(ctx, "long", 0, -1)
	if b, err := io.ReadAll(rc); string(b) != "01" || err == nil {
		t.Fatalf("cut GetRange: %q %v", b, err)
	}

	// Delay only delays; a delay respects the context.
	fs.Inject(faultstore.Fault{Op: faultstore.OpHead, Delay: 30 * time.Millisecond})
	start := time.Now()
	if _, err := fs.Head(ctx, "long"); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("delayed Head: %v after %v", err, time.Since(start))
	}
	fs.Inject(faultstore.Fault{Op: faultstore.OpList, Delay: time.Hour})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := fs.List(cctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delayed List: %v", err)
	}
	fs.Inject(faultstore.Fault{Op: faultstore.OpDeletePrefix})
	fs.Inject(faultstore.Fault{Op: faultstore.OpValidate})
	if fs.DeletePrefix(ctx, "long") == nil || fs.Validate(ctx) == nil {
		t.Fatal("DeletePrefix/Validate faults not applied")
	}
}

func TestWalkFaults(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	fs := faultstore.New(mem)
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
		if err := mem.Put(ctx, k, strings.NewReader("v")); err != nil {
			t.Fatal(err)
		}
	}
	count := func(prefix string) (int, error) {
		n := 0
		err := fs.Walk(ctx, prefix, func(blobstore.ObjectInfo) error { n++; return nil })
		return n, err
	}
	// Before: nothing visited.
	fs.Inject(faultstore.Fault{Op: faultstore.OpWalk, Nth: 1})
	if n, err := count(""); !errors.Is(err, faultstore.ErrInjected) || n != 0 {
		t.Fatalf("1st Walk: %d visited, %v", n, err)
	}
	// Cut: the listing breaks after two objects.
	boom := errors.New("connection reset")
	fs.Inject(faultstore.Fault{Op: faultstore.OpWalk, Nth: 2, Cut: true, CutAfter: 2, Err: boom})
	if n, err := count(""); !errors.Is(err, boom) || n != 2 {
		t.Fatalf("cut Walk: %d visited, %v", n, err)
	}
	// After: everything visited, then the error.
	fs.Inject(faultstore.Fault{Op: faultstore.OpWalk, Nth: 3, After: true})
	if n, err := count(""); !errors.Is(err, faultstore.ErrInjected) || n != 4 {
		t.Fatalf("After Walk: %d visited, %v", n, err)
	}
	// KeyPrefix limits the fault; calls are counted.
	fs.Inject(faultstore.Fault{Op: faultstore.OpWalk, KeyPrefix: "b"})
	if n, err := count("a"); err != nil || n != 3 {
		t.Fatalf("Walk(a): %d visited, %v", n, err)
	}
	if _, err := count("b"); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("Walk(b): %v", err)
	}
	if got := fs.Calls(faultstore.OpWalk); got != 5 {
		t.Fatalf("Walk calls = %d, want 5", got)
	}
}
