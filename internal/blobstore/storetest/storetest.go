// Package storetest is the conformance suite of the store contract
// (internal/blobstore). Every store runs it from its tests:
//
//	storetest.Run(t, func(t *testing.T) blobstore.Store { return newEmptyStore(t) })
//
// newStore must answer a new, empty store for each call (each subtest
// gets its own). The suite checks behaviour through the contract only;
// store-specific rules (filesystem permissions, S3 multipart bookkeeping)
// are tested beside each store, or through Options hooks.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
)

// Options tune the suite for one store.
type Options struct {
	// LargeSize is the size of the large-object cases. S3 stores pass more
	// than their multipart threshold so that multipart uploads are
	// exercised. Default 3 MiB + 17 bytes.
	LargeSize int
	// MaxKeyLen is the longest key the store is asked to hold (default
	// blobstore.MaxKeyLen). An S3 store with a prefix has 1024 - len(prefix).
	MaxKeyLen int
	// AfterFailedPut, when set, runs after every failed or cancelled Put
	// and must fail t if the store left something behind that the contract
	// cannot see (an open multipart upload on S3).
	AfterFailedPut func(t *testing.T, s blobstore.Store)
}

// Result counts the suite's subtests.
type Result struct {
	Passed, Failed, Skipped int
}

func (r Result) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// Run runs the suite with default options.
func Run(t *testing.T, newStore func(t *testing.T) blobstore.Store) {
	RunWith(t, newStore, Options{})
}

// RunWith runs the suite and answers the subtest counts.
func RunWith(t *testing.T, newStore func(t *testing.T) blobstore.Store, opts Options) Result {
	if opts.LargeSize == 0 {
		opts.LargeSize = 3<<20 + 17
	}
	if opts.MaxKeyLen == 0 {
		opts.MaxKeyLen = blobstore.MaxKeyLen
	}
	var res Result
	var mu sync.Mutex
	for _, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				if t.Skipped() {
					res.Skipped++
				}
			})
			c.fn(t, &suite{newStore: newStore, opts: opts})
		})
		mu.Lock()
		if !ok {
			res.Failed++
		} else {
			res.Passed++
		}
		mu.Unlock()
	}
	res.Passed -= res.Skipped
	return res
}

type suite struct {
	newStore func(t *testing.T) blobstore.Store
	opts     Options
}

var cases = []struct {
	name string
	fn   func(t *testing.T, s *suite)
}{
	{"KeyRule", testKeyRule},
	{"LongKeys", testLongKeys},
	{"PutGet", testPutGet},
	{"Overwrite", testOverwrite},
	{"NotFound", testNotFound},
	{"GetRange", testGetRange},
	{"Head", testHead},
	{"PutIfAbsent", testPutIfAbsent},
	{"PutIfAbsentRace", testPutIfAbsentRace},
	{"ConcurrentPut", testConcurrentPut},
	{"List", testList},
	{"Walk", testWalk},
	{"DeletePrefix", testDeletePrefix},
	{"DeletePrefixConcurrent", testDeletePrefixConcurrent},
	{"FailedPutSmall", func(t *testing.T, s *suite) { testFailedPut(t, s, 1000) }},
	{"FailedPutLarge", func(t *testing.T, s *suite) { testFailedPut(t, s, s.opts.LargeSize) }},
	{"CancelledGet", testCancelledGet},
	{"Validate", testValidate},
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func put(t *testing.T, s blobstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), key, bytes.NewReader(data)); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
}

func get(t *testing.T, s blobstore.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b
}

func mustEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes %q..., want %d bytes %q...", what, len(got), head(got), len(want), head(want))
	}
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

func keys(infos []blobstore.ObjectInfo) []string {
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Key
	}
	return out
}

func list(t *testing.T, s blobstore.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(ctxT(t), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys(infos)
}

func wantNotFound(t *testing.T, s blobstore.Store, key string) {
	t.Helper()
	if _, err := s.Head(ctxT(t), key); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Head(%q): got %v, want ErrNotFound", key, err)
	}
	rc, err := s.Get(ctxT(t), key)
	if err == nil {
		rc.Close()
	}
	if !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get(%q): got %v, want ErrNotFound", key, err)
	}
}

var badKeys = []string{
	"", "/", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "./a", "a/..",
	"a\\b", "a\x00b", "a\nb", "a\x7fb", "a\u0085b", "a\ufffeb", "a\uffffb", "a\xffb",
	strings.Repeat("x", 256), strings.Repeat("y/", 512) + "z",
}

func testKeyRule(t *testing.T, s *suite) {
	st := s.newStore(t)
	ctx := ctxT(t)
	for _, k := range badKeys {
		if err := st.Put(ctx, k, strings.NewReader("x")); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("Put(%q): got %v, want ErrInvalidKey", k, err)
		}
		if err := st.PutIfAbsent(ctx, k, strings.NewReader("x")); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q): got %v, want ErrInvalidKey", k, err)
		}
		if _, err := st.Get(ctx, k); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("Get(%q): got %v, want ErrInvalidKey", k, err)
		}
		if _, err := st.GetRange(ctx, k, 0, 1); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("GetRange(%q): got %v, want ErrInvalidKey", k, err)
		}
		if _, err := st.Head(ctx, k); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("Head(%q): got %v, want ErrInvalidKey", k, err)
		}
		if k == "" {
			continue // the empty prefix is valid
		}
		if _, err := st.List(ctx, k); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("List(%q): got %v, want ErrInvalidKey", k, err)
		}
		if err := st.DeletePrefix(ctx, k); !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("DeletePrefix(%q): got %v, want ErrInvalidKey", k, err)
		}
	}
	if got := list(t, st, ""); len(got) != 0 {
		t.Fatalf("after refused puts List(\"\") = %q, want nothing", got)
	}
	// Keys at the edges of the rule are fine.
	for _, k := range []string{"a", "a.b", "...", ".a", "a b", "ü/日本/😀", "a-_~+=,;@!$&'()", "x/" + strings.Repeat("c", 255)} {
		put(t, st, k, []byte(k))
		mustEqual(t, "Get "+k, get(t, st, k), []byte(k))
	}
}

func testLongKeys(t *testing.T, s *suite) {
	st := s.newStore(t)
	max := s.opts.MaxKeyLen
	// Components of 200 bytes, then a last one that fills the key to max.
	var parts []string
	n := 0
	for max-n > 200 {
		parts = append(parts, strings.Repeat(string(rune('a'+len(parts))), 200))
		n += 201
	}
	parts = append(parts, strings.Repeat("z", max-n))
	k := strings.Join(parts, "/")
	if len(k) != max {
		t.Fatalf("test bug: key of %d bytes, want %d", len(k), max)
	}
	put(t, st, k, []byte("long"))
	mustEqual(t, "Get long key", get(t, st, k), []byte("long"))
	if got := list(t, st, parts[0]); !slices.Equal(got, []string{k}) {
		t.Fatalf("List = %d keys, want the long key", len(got))
	}
	if err := st.DeletePrefix(ctxT(t), parts[0]); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, st, k)
}

func testPutGet(t *testing.T, s *suite) {
	st := s.newStore(t)
	small := []byte("hello, store")
	large := randBytes(s.opts.LargeSize)
	put(t, st, "a/b/small", small)
	put(t, st, "a/b/empty", nil)
	put(t, st, "a/large", large)
	put(t, st, "top", []byte("t"))
	mustEqual(t, "small", get(t, st, "a/b/small"), small)
	mustEqual(t, "empty", get(t, st, "a/b/empty"), nil)
	mustEqual(t, "large", get(t, st, "a/large"), large)
	mustEqual(t, "top", get(t, st, "top"), []byte("t"))
	// A reader that answers in odd-sized chunks.
	put(t, st, "a/chunky", nil)
	if err := st.Put(ctxT(t), "a/chunky", io.MultiReader(bytes.NewReader(small[:3]), bytes.NewReader(small[3:]))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "chunky", get(t, st, "a/chunky"), small)
}

func testOverwrite(t *testing.T, s *suite) {
	st := s.newStore(t)
	put(t, st, "k/o", []byte("first version"))
	h1, err := st.Head(ctxT(t), "k/o")
	if err != nil {
		t.Fatal(err)
	}
	large := randBytes(s.opts.LargeSize)
	put(t, st, "k/o", large)
	mustEqual(t, "after overwrite with large", get(t, st, "k/o"), large)
	put(t, st, "k/o", []byte("third"))
	mustEqual(t, "after overwrite with small", get(t, st, "k/o"), []byte("third"))
	h3, err := st.Head(ctxT(t), "k/o")
	if err != nil {
		t.Fatal(err)
	}
	if h3.Size != 5 || h3.ETag == h1.ETag {
		t.Fatalf("Head after overwrite = %+v, first was %+v: want size 5 and a new ETag", h3, h1)
	}
	if got := list(t, st, ""); !slices.Equal(got, []string{"k/o"}) {
		t.Fatalf("List = %q, want [k/o]", got)
	}
}

func testNotFound(t *testing.T, s *suite) {
	st := s.newStore(t)
	wantNotFound(t, st, "missing")
	wantNotFound(t, st, "no/such/dir/key")
	put(t, st, "d/present", []byte("x"))
	wantNotFound(t, st, "d/absent")
	wantNotFound(t, st, "d") // a "directory" is not an object
	wantNotFound(t, st, "d/present/below")
	if _, err := st.GetRange(ctxT(t), "d/absent", 0, 1); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("GetRange missing: got %v, want ErrNotFound", err)
	}
	if _, err := st.GetRange(ctxT(t), "d/absent", 0, 0); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("GetRange missing, n=0: got %v, want ErrNotFound", err)
	}
}

func getRange(t *testing.T, st blobstore.Store, key string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := st.GetRange(ctxT(t), key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func testGetRange(t *testing.T, s *suite) {
	st := s.newStore(t)
	put(t, st, "r/digits", []byte("0123456789"))
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, 10, "0123456789"}, {2, 3, "234"}, {8, 5, "89"}, {3, -1, "3456789"},
		{0, -1, "0123456789"}, {9, 1, "9"}, {10, 5, ""}, {10, -1, ""}, {0, 0, ""}, {4, 0, ""},
	} {
		got, err := getRange(t, st, "r/digits", c.off, c.n)
		if err != nil || string(got) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	for _, off := range []int64{11, 1000} {
		if _, err := getRange(t, st, "r/digits", off, 1); !errors.Is(err, blobstore.ErrInvalidRange) {
			t.Errorf("GetRange(%d, 1): got %v, want ErrInvalidRange", off, err)
		}
	}
	put(t, st, "r/empty", nil)
	if got, err := getRange(t, st, "r/empty", 0, -1); err != nil || len(got) != 0 {
		t.Errorf("GetRange(empty, 0, -1) = %q, %v; want empty", got, err)
	}
	large := randBytes(s.opts.LargeSize)
	put(t, st, "r/large", large)
	mid := int64(len(large) / 2)
	for _, c := range [][2]int64{{mid - 1000, 5000}, {0, 1}, {int64(len(large)) - 7, 100}, {1 << 20, -1}} {
		got, err := getRange(t, st, "r/large", c[0], c[1])
		if err != nil {
			t.Fatalf("GetRange large %v: %v", c, err)
		}
		end := int64(len(large))
		if c[1] >= 0 && c[0]+c[1] < end {
			end = c[0] + c[1]
		}
		mustEqual(t, fmt.Sprintf("GetRange large %v", c), got, large[c[0]:end])
	}
}

func testHead(t *testing.T, s *suite) {
	st := s.newStore(t)
	before := time.Now().Add(-2 * time.Minute)
	put(t, st, "h/x", []byte("12345"))
	info, err := st.Head(ctxT(t), "h/x")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(2 * time.Minute)
	if info.Key != "h/x" || info.Size != 5 || info.ETag == "" || info.ModTime.Before(before) || info.ModTime.After(after) {
		t.Fatalf("Head = %+v", info)
	}
	infos, err := st.List(ctxT(t), "h")
	if err != nil || len(infos) != 1 {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	if l := infos[0]; l.Key != "h/x" || l.Size != 5 || l.ETag == "" || l.ModTime.Before(before) || l.ModTime.After(after) {
		t.Fatalf("List info = %+v, Head = %+v", l, info)
	}
}

func testPutIfAbsent(t *testing.T, s *suite) {
	st := s.newStore(t)
	ctx := ctxT(t)
	if err := st.PutIfAbsent(ctx, "p/once", strings.NewReader("first")); err != nil {
		t.Fatal(err)
	}
	err := st.PutIfAbsent(ctx, "p/once", strings.NewReader("second"))
	if !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("second PutIfAbsent: got %v, want ErrExists", err)
	}
	large := randBytes(s.opts.LargeSize)
	if err := st.PutIfAbsent(ctx, "p/once", bytes.NewReader(large)); !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("large PutIfAbsent on an existing key: got %v, want ErrExists", err)
	}
	mustEqual(t, "after refused PutIfAbsent", get(t, st, "p/once"), []byte("first"))
	if err := st.PutIfAbsent(ctx, "p/large", bytes.NewReader(large)); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "large PutIfAbsent", get(t, st, "p/large"), large)
	if err := st.PutIfAbsent(ctx, "p/empty", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	// Put replaces what PutIfAbsent wrote; DeletePrefix frees the key.
	put(t, st, "p/once", []byte("third"))
	mustEqual(t, "Put after PutIfAbsent", get(t, st, "p/once"), []byte("third"))
	if err := st.DeletePrefix(ctx, "p/once"); err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(ctx, "p/once", strings.NewReader("again")); err != nil {
		t.Fatalf("PutIfAbsent after delete: %v", err)
	}
	if got := list(t, st, "p"); !slices.Equal(got, []string{"p/empty", "p/large", "p/once"}) {
		t.Fatalf("List = %q", got)
	}
}

func testPutIfAbsentRace(t *testing.T, s *suite) {
	st := s.newStore(t)
	ctx := ctxT(t)
	const n = 8
	for round := range 3 {
		key := fmt.Sprintf("race/%d/identity", round)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = st.PutIfAbsent(ctx, key, strings.NewReader(fmt.Sprintf("writer %d", i)))
			}()
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both succeeded", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, blobstore.ErrExists):
				t.Fatalf("round %d: writer %d: %v, want nil or ErrExists", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer succeeded", round)
		}
		mustEqual(t, "winner's bytes", get(t, st, key), []byte(fmt.Sprintf("writer %d", winner)))
	}
}

func testConcurrentPut(t *testing.T, s *suite) {
	st := s.newStore(t)
	ctx := ctxT(t)
	versions := make([][]byte, 4)
	for i := range versions {
		versions[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i)
	}
	put(t, st, "c/k", versions[0])
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readErr error
	var once sync.Once
	wg.Add(1)
	go func() { // a reader sees whole versions only
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rc, err := st.Get(ctx, "c/k")
			if err != nil {
				once.Do(func() { readErr = err })
				return
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err == nil && !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, b) }) {
				err = fmt.Errorf("read a mix of versions (%d bytes)", len(b))
			}
			if err != nil {
				once.Do(func() { readErr = err })
				return
			}
		}
	}()
	var wwg sync.WaitGroup
	for i := range versions {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for range 3 {
				if err := st.Put(ctx, "c/k", bytes.NewReader(versions[i])); err != nil {
					once.Do(func() { readErr = err })
				}
			}
		}()
	}
	wwg.Wait()
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	got := get(t, st, "c/k")
	if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, got) }) {
		t.Fatalf("final object (%d bytes) is none of the versions", len(got))
	}
	if l := list(t, st, ""); !slices.Equal(l, []string{"c/k"}) {
		t.Fatalf("List = %q, want [c/k]", l)
	}
}

var listKeys = []string{
	"a/b/c", "a/b/d/e", "a/b/d/f", "a/bc/x", "a/b.x", "a/b-", "a/b0", "b", "u/z", "u/é", "u/日", "u/Z",
}

func putAll(t *testing.T, st blobstore.Store, ks []string) {
	for _, k := range ks {
		put(t, st, k, []byte("v:"+k))
	}
}

func sorted(ks []string) []string {
	c := slices.Clone(ks)
	slices.Sort(c)
	return c
}

func testList(t *testing.T, s *suite) {
	st := s.newStore(t)
	if got := list(t, st, ""); len(got) != 0 {
		t.Fatalf("List of an empty store = %q", got)
	}
	putAll(t, st, listKeys)
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", sorted(listKeys)},
		{"a", sorted(listKeys[:7])},
		{"a/b", []string{"a/b/c", "a/b/d/e", "a/b/d/f"}},
		{"a/b/d", []string{"a/b/d/e", "a/b/d/f"}},
		{"a/b/c", []string{"a/b/c"}},
		{"a/bc", []string{"a/bc/x"}},
		{"b", []string{"b"}},
		{"u", []string{"u/Z", "u/z", "u/é", "u/日"}},
		{"a/b/c/d", nil},
		{"zzz", nil},
		{"a/bb", nil},
	} {
		got := list(t, st, c.prefix)
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	infos, err := st.List(ctxT(t), "a/b/d")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range infos {
		if o.Size != int64(len("v:"+o.Key)) {
			t.Errorf("List info %+v: wrong size", o)
		}
	}
	// Many keys in one directory, beyond one S3 listing page.
	many := putMany(t, st, 1005)
	if got := list(t, st, "m"); !slices.Equal(got, many) {
		t.Fatalf("List(m) answered %d keys, want %d in order", len(got), len(many))
	}
	if err := st.DeletePrefix(ctxT(t), "m"); err != nil {
		t.Fatal(err)
	}
	if got := list(t, st, "m"); len(got) != 0 {
		t.Fatalf("after DeletePrefix(m): %d keys left", len(got))
	}
}

// putMany puts n one-byte objects m/00000, m/00001, ... (16 at a time)
// and answers their keys in order.
func putMany(t *testing.T, st blobstore.Store, n int) []string {
	t.Helper()
	many := make([]string, n)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range many {
		many[i] = fmt.Sprintf("m/%05d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := st.Put(ctx, many[i], strings.NewReader("x")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return many
}

// walk answers the keys Walk(prefix) visits, failing on a walk error.
func walk(t *testing.T, st blobstore.Store, prefix string) []blobstore.ObjectInfo {
	t.Helper()
	var out []blobstore.ObjectInfo
	if err := st.Walk(ctxT(t), prefix, func(o blobstore.ObjectInfo) error {
		out = append(out, o)
		return nil
	}); err != nil {
		t.Fatalf("Walk(%q): %v", prefix, err)
	}
	return out
}

func testWalk(t *testing.T, s *suite) {
	st := s.newStore(t)
	if got := walk(t, st, ""); len(got) != 0 {
		t.Fatalf("Walk of an empty store visited %q", keys(got))
	}
	putAll(t, st, listKeys)
	// Files and directories whose names sort around "/" in one directory:
	// key order, not directory order ("d-x" < "d/y" < "d0").
	extra := []string{"w/d/y", "w/d-x", "w/d0", "w/d/a/b", "w/d.z", "w/c"}
	putAll(t, st, extra)
	for _, prefix := range []string{"", "a", "a/b", "a/b/d", "a/b/c", "a/bc", "b", "u", "w", "w/d", "a/b/c/d", "zzz", "a/bb"} {
		got := walk(t, st, prefix)
		want, err := st.List(ctxT(t), prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys(got), keys(want)) {
			t.Errorf("Walk(%q) visited %q, List answered %q", prefix, keys(got), keys(want))
		}
		if !slices.IsSorted(keys(got)) {
			t.Errorf("Walk(%q) visited %q: not in ascending key order", prefix, keys(got))
		}
		for i := range got {
			if i < len(want) && (got[i].Size != want[i].Size || got[i].ETag != want[i].ETag || !got[i].ModTime.Equal(want[i].ModTime)) {
				t.Errorf("Walk(%q): %+v, List: %+v", prefix, got[i], want[i])
			}
		}
	}
	if got, want := keys(walk(t, st, "w")), []string{"w/c", "w/d-x", "w/d.z", "w/d/a/b", "w/d/y", "w/d0"}; !slices.Equal(got, want) {
		t.Errorf("Walk(w) = %q, want %q", got, want)
	}
	if got, want := keys(walk(t, st, "a/b")), []string{"a/b/c", "a/b/d/e", "a/b/d/f"}; !slices.Equal(got, want) {
		t.Errorf("Walk(a/b) = %q, want %q (whole-component prefix)", got, want)
	}
	// fn's error stops the walk at once and comes back unchanged.
	stop := errors.New("stop here")
	var seen []string
	err := st.Walk(ctxT(t), "", func(o blobstore.ObjectInfo) error {
		seen = append(seen, o.Key)
		if len(seen) == 3 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Walk with fn failing: got %v, want fn's error unchanged", err)
	}
	if all := keys(walk(t, st, "")); !slices.Equal(seen, all[:3]) {
		t.Fatalf("Walk stopped after %q, want the first three keys %q", seen, all[:3])
	}
	// Bad prefixes are refused before any visit.
	for _, k := range []string{"/", "a/", "a//b", ".."} {
		err := st.Walk(ctxT(t), k, func(blobstore.ObjectInfo) error {
			t.Fatalf("Walk(%q) visited an object", k)
			return nil
		})
		if !errors.Is(err, blobstore.ErrInvalidKey) {
			t.Errorf("Walk(%q): got %v, want ErrInvalidKey", k, err)
		}
	}
	// A cancelled context fails the walk.
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if err := st.Walk(ctx, "", func(blobstore.ObjectInfo) error { return nil }); err == nil {
		t.Errorf("Walk with a cancelled context succeeded")
	}
	// Beyond one S3 listing page: every key once, in order, and an early
	// stop in the second page.
	many := putMany(t, st, 1005)
	ctx = ctxT(t)
	if got := keys(walk(t, st, "m")); !slices.Equal(got, many) {
		t.Fatalf("Walk(m) visited %d keys, want %d in order", len(got), len(many))
	}
	n := 0
	err = st.Walk(ctx, "m", func(o blobstore.ObjectInfo) error {
		if n++; n == 1002 {
			return stop
		}
		return nil
	})
	if err != stop || n != 1002 {
		t.Fatalf("Walk(m) stopped in its second page: err %v after %d objects", err, n)
	}
}

func testDeletePrefix(t *testing.T, s *suite) {
	st := s.newStore(t)
	ctx := ctxT(t)
	putAll(t, st, listKeys)
	if err := st.DeletePrefix(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/b-", "a/b.x", "a/b0", "a/bc/x", "b", "u/Z", "u/z", "u/é", "u/日"}
	if got := list(t, st, ""); !slices.Equal(got, want) {
		t.Fatalf("after DeletePrefix(a/b): %q, want %q", got, want)
	}
	wantNotFound(t, st, "a/b/c")
	for _, p := range []string{"a/b", "nothing/here", "a/b0/below"} {
		if err := st.DeletePrefix(ctx, p); err != nil {
			t.Fatalf("DeletePrefix(%q) of nothing: %v", p, err)
		}
	}
	if err := st.DeletePrefix(ctx, "a/b0"); err != nil { // an exact key
		t.Fatal(err)
	}
	wantNotFound(t, st, "a/b0")
	// A key can be reused under a deleted prefix.
	put(t, st, "a/b/c", []byte("new"))
	mustEqual(t, "reput", get(t, st, "a/b/c"), []byte("new"))
	if err := st.DeletePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got := list(t, st, ""); len(got) != 0 {
		t.Fatalf("after DeletePrefix(\"\"): %q", got)
	}
	put(t, st, "a/b/c", []byte("again"))
	mustEqual(t, "put after delete all", get(t, st, "a/b/c"), []byte("again"))
}

func testDeletePrefixConcurrent(t *testing.T, s *suite) {
	st := s.newStore(t)
	ctx := ctxT(t)
	var ks []string
	for i := range 40 {
		ks = append(ks, fmt.Sprintf("x/t/%d/data/%03d", i%4, i))
	}
	putAll(t, st, ks)
	put(t, st, "x/keep", []byte("k"))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.DeletePrefix(ctx, "x/t")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("deleter %d: %v", i, err)
		}
	}
	if got := list(t, st, ""); !slices.Equal(got, []string{"x/keep"}) {
		t.Fatalf("after concurrent deletes: %q", got)
	}
}

var errBoom = errors.New("storetest: reader failed")

// failingReader answers data then fails (or cancels a context and keeps
// answering data).
type failingReader struct {
	data   []byte
	failAt int
	cancel context.CancelFunc
	pos    int
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.pos >= r.failAt {
		if r.cancel != nil {
			r.cancel()
		} else {
			return 0, errBoom
		}
	}
	if r.pos >= len(r.data) {
		return 0, io.EOF
	}
	end := min(len(r.data), r.pos+len(p))
	if r.cancel == nil || r.pos < r.failAt {
		end = min(end, max(r.failAt, r.pos+1))
	}
	n := copy(p, r.data[r.pos:end])
	r.pos += n
	return n, nil
}

func testFailedPut(t *testing.T, s *suite, size int) {
	st := s.newStore(t)
	data := randBytes(size)
	old := []byte("the old version")
	put(t, st, "f/existing", old)
	after := func(what string) {
		t.Helper()
		wantNotFound(t, st, "f/new")
		mustEqual(t, what+": existing object", get(t, st, "f/existing"), old)
		if got := list(t, st, ""); !slices.Equal(got, []string{"f/existing"}) {
			t.Fatalf("%s: List = %q, want only f/existing", what, got)
		}
		if s.opts.AfterFailedPut != nil {
			s.opts.AfterFailedPut(t, st)
		}
	}
	failAt := size * 3 / 4
	type putFn func(context.Context, string, io.Reader) error
	for _, m := range []struct {
		name string
		fn   putFn
	}{{"Put", st.Put}, {"PutIfAbsent", st.PutIfAbsent}} {
		for _, key := range []string{"f/new", "f/existing"} {
			if m.name == "PutIfAbsent" && key == "f/existing" {
				continue
			}
			err := m.fn(ctxT(t), key, &failingReader{data: data, failAt: failAt})
			if !errors.Is(err, errBoom) {
				t.Fatalf("%s(%s) with a failing reader: got %v, want the reader's error", m.name, key, err)
			}
			after(m.name + " failing reader on " + key)

			ctx, cancel := context.WithCancel(ctxT(t))
			err = m.fn(ctx, key, &failingReader{data: data, failAt: failAt, cancel: cancel})
			if err == nil {
				t.Fatalf("%s(%s) cancelled midway: succeeded", m.name, key)
			}
			if !errors.Is(err, context.Canceled) {
				t.Logf("%s(%s) cancelled midway: %v (not context.Canceled)", m.name, key, err)
			}
			after(m.name + " cancelled on " + key)

			err = m.fn(ctx, key, bytes.NewReader(data)) // ctx already cancelled
			if err == nil {
				t.Fatalf("%s(%s) with a cancelled context: succeeded", m.name, key)
			}
			after(m.name + " with a cancelled context on " + key)
		}
	}
}

func testCancelledGet(t *testing.T, s *suite) {
	st := s.newStore(t)
	data := randBytes(256 << 10)
	put(t, st, "g/x", data)
	ctx, cancel := context.WithCancel(ctxT(t))
	rc, err := st.Get(ctx, "g/x")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 10)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(rc); err == nil {
		t.Fatal("reading a Get stream after cancelling its context succeeded")
	}
	if _, err := st.Get(ctx, "g/x"); err == nil {
		t.Fatal("Get with a cancelled context succeeded")
	}
}

func testValidate(t *testing.T, s *suite) {
	st := s.newStore(t)
	if err := st.Validate(ctxT(t)); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if st.String() == "" {
		t.Fatal("String() is empty")
	}
	if got := list(t, st, ""); len(got) != 0 {
		t.Fatalf("Validate left objects: %q", got)
	}
}
