package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func newFS(t *testing.T) (*FS, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "store")
	s, err := NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

func fsPut(t *testing.T, s *FS, key, data string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestFSModes(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	s, err := NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	fsPut(t, s, "a/b/c", "x")
	if err := s.PutIfAbsent(context.Background(), "a/d", strings.NewReader("y")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, root + "/a", root + "/a/b"} {
		if m := perm(t, p); m != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", p, m)
		}
	}
	for _, p := range []string{root + "/a/b/c", root + "/a/d"} {
		if m := perm(t, p); m != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", p, m)
		}
	}
}

func TestFSRootRules(t *testing.T) {
	ctx := context.Background()
	t.Run("RootOpenToOthers", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "r")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		if _, err := NewFS(dir); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("NewFS on a 0755 root: %v, want ErrUnsafe", err)
		}
		os.Chmod(dir, 0o700)
		s, err := NewFS(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o750) // changed under a running store
		if _, err := s.Head(ctx, "k"); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("Head after chmod 0750: %v, want ErrUnsafe", err)
		}
	})
	t.Run("RootOwnedByAnother", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to chown")
		}
		s, root := newFS(t)
		fsPut(t, s, "k", "v")
		if err := os.Chown(root, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Get":      func() error { _, err := s.Get(ctx, "k"); return err }(),
			"Put":      s.Put(ctx, "k", strings.NewReader("w")),
			"List":     func() error { _, err := s.List(ctx, ""); return err }(),
			"Delete":   s.DeletePrefix(ctx, "k"),
			"Validate": s.Validate(ctx),
		} {
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("%s on a root owned by uid 4242: %v, want ErrUnsafe", name, err)
			}
		}
		if _, err := NewFS(root); !errors.Is(err, ErrUnsafe) {
			t.Errorf("NewFS: %v, want ErrUnsafe", err)
		}
	})
	t.Run("Ancestors", func(t *testing.T) {
		base := t.TempDir()
		anc := filepath.Join(base, "shared")
		if err := os.Mkdir(anc, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(anc, 0o777)
		if _, err := NewFS(filepath.Join(anc, "store")); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("NewFS below a 0777 ancestor: %v, want ErrUnsafe", err)
		}
		os.Chmod(anc, 0o770)
		if _, err := NewFS(filepath.Join(anc, "store")); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("NewFS below a 0770 ancestor: %v, want ErrUnsafe", err)
		}
		os.Chmod(anc, os.ModeSticky|0o777) // sticky, like /tmp
		s, err := NewFS(filepath.Join(anc, "store"))
		if err != nil {
			t.Fatalf("NewFS below a sticky 1777 ancestor: %v", err)
		}
		os.Chmod(anc, 0o777)
		if err := s.Validate(ctx); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("Validate after the ancestor lost its sticky bit: %v, want ErrUnsafe", err)
		}
	})
	t.Run("RootSymlink", func(t *testing.T) {
		base := t.TempDir()
		real := filepath.Join(base, "real")
		os.Mkdir(real, 0o700)
		link := filepath.Join(base, "link")
		os.Symlink(real, link)
		if _, err := NewFS(link); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("NewFS on a symlink root: %v, want ErrUnsafe", err)
		}
	})
	t.Run("RootReplaced", func(t *testing.T) {
		s, root := newFS(t)
		fsPut(t, s, "k", "v")
		if err := os.Rename(root, root+".old"); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(root, 0o700)
		if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrUnsafe) {
			t.Fatalf("Get after the root was replaced: %v, want ErrUnsafe", err)
		}
		os.Remove(root)
		if _, err := s.Get(ctx, "k"); err == nil {
			t.Fatal("Get with the root gone succeeded")
		}
	})
}

// TestFSSymlinks swaps a symlink in at every position of a key between
// calls and checks that every operation refuses it and nothing outside the
// store is read or written.
func TestFSSymlinks(t *testing.T) {
	ctx := context.Background()
	for _, pos := range []string{"a", "a/b", "a/b/c"} {
		t.Run(strings.ReplaceAll(pos, "/", "_"), func(t *testing.T) {
			s, root := newFS(t)
			fsPut(t, s, "a/b/c", "inside")
			if got := readAll(t, s, "a/b/c"); got != "inside" {
				t.Fatalf("before the swap: %q", got)
			}
			// Outside the store, a tree that mirrors the remaining path.
			outside := t.TempDir()
			rest := strings.TrimPrefix(strings.TrimPrefix("a/b/c", pos), "/")
			target := outside
			if rest != "" {
				os.MkdirAll(filepath.Join(outside, filepath.Dir(rest)), 0o700)
				os.WriteFile(filepath.Join(outside, rest), []byte("outside"), 0o600)
			} else {
				target = filepath.Join(outside, "file")
				os.WriteFile(target, []byte("outside"), 0o600)
			}
			p := filepath.Join(root, pos)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			checkUnsafe := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrUnsafe) {
					t.Errorf("%s with a symlink at %q: %v, want ErrUnsafe", op, pos, err)
				}
			}
			_, err := s.Get(ctx, "a/b/c")
			checkUnsafe("Get", err)
			_, err = s.GetRange(ctx, "a/b/c", 0, 1)
			checkUnsafe("GetRange", err)
			_, err = s.Head(ctx, "a/b/c")
			checkUnsafe("Head", err)
			checkUnsafe("Put", s.Put(ctx, "a/b/c", strings.NewReader("evil")))
			checkUnsafe("PutIfAbsent", s.PutIfAbsent(ctx, "a/b/c/d", strings.NewReader("evil")))
			_, err = s.List(ctx, pos)
			checkUnsafe("List", err)
			if pos != "a/b/c" {
				checkUnsafe("DeletePrefix", s.DeletePrefix(ctx, "a/b/c"))
			}
			// List of the whole store neither follows nor lists the link.
			all, err := s.List(ctx, "")
			if err != nil || len(all) != 0 {
				t.Errorf("List(\"\") = %v, %v; want nothing", all, err)
			}
			// Outside is untouched.
			var outPath string
			if rest != "" {
				outPath = filepath.Join(outside, rest)
			} else {
				outPath = target
			}
			if b, err := os.ReadFile(outPath); err != nil || string(b) != "outside" {
				t.Fatalf("outside file: %q, %v", b, err)
			}
			entries, _ := os.ReadDir(filepath.Dir(outPath))
			for _, e := range entries {
				if e.Name() != filepath.Base(outPath) {
					t.Errorf("stray file outside the store: %s", e.Name())
				}
			}
			// DeletePrefix above the link removes the link itself, not the target.
			if err := s.DeletePrefix(ctx, ""); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(outPath); err != nil || string(b) != "outside" {
				t.Fatalf("outside file after DeletePrefix: %q, %v", b, err)
			}
		})
	}
}

func readAll(t *testing.T, s Store, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFSStrayFiles(t *testing.T) {
	ctx := context.Background()
	s, root := newFS(t)
	fsPut(t, s, "d/ok", "x")
	for _, name := range []string{fsTempPrefix + "abc", "bad\\name", "ctl\x01"} {
		os.WriteFile(filepath.Join(root, "d", name), []byte("junk"), 0o600)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "d", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, "")
	if err != nil || len(got) != 1 || got[0].Key != "d/ok" {
		t.Fatalf("List = %v, %v; want only d/ok", got, err)
	}
	if _, err := s.Get(ctx, "d/fifo"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a fifo: %v, want ErrNotFound (and no hang)", err)
	}
	if err := s.DeletePrefix(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "d")); !os.IsNotExist(err) {
		t.Fatalf("directory d survived DeletePrefix: %v", err)
	}
}

type errAfter struct {
	r io.Reader
	n int
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, errors.New("boom")
	}
	if len(p) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= n
	return n, err
}

func TestFSFailedPutLeavesNoTemp(t *testing.T) {
	ctx := context.Background()
	s, root := newFS(t)
	fsPut(t, s, "d/keep", "k")
	data := bytes.Repeat([]byte("z"), 3<<20)
	if err := s.Put(ctx, "d/new", &errAfter{r: bytes.NewReader(data), n: 2 << 20}); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.PutIfAbsent(cctx, "d/new", bytes.NewReader(data)); err == nil {
		t.Fatal("PutIfAbsent with a cancelled context succeeded")
	}
	ents, _ := os.ReadDir(filepath.Join(root, "d"))
	if len(ents) != 1 || ents[0].Name() != "keep" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %q after failed puts, want only keep", names)
	}
}

func TestFSKeyConflicts(t *testing.T) {
	ctx := context.Background()
	s, _ := newFS(t)
	fsPut(t, s, "a/b", "file")
	if err := s.Put(ctx, "a/b/c", strings.NewReader("x")); err == nil || errors.Is(err, ErrUnsafe) {
		t.Fatalf("Put below an object: %v, want a plain error", err)
	}
	if err := s.Put(ctx, "a", strings.NewReader("x")); err == nil {
		t.Fatal("Put over a directory of keys succeeded")
	}
	if got := readAll(t, s, "a/b"); got != "file" {
		t.Fatalf("a/b = %q", got)
	}
}
