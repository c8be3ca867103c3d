package blobstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsafe marks a filesystem store refusing to work on a path it cannot
// trust: a symlink at some position of a key, a root owned by another user
// or open to group or others, a replaced root, or an ancestor directory
// writable by group or others without the sticky bit.
var ErrUnsafe = errors.New("store: unsafe filesystem path")

// FS is the filesystem store. Objects live at root/<key>, one file per key,
// in directories that mirror the key's components.
//
// Rules (docs/backup-design.md section 2):
//   - the root and every directory the store creates are 0700, objects 0600;
//   - the root must be a directory owned by the server's effective user and
//     not accessible by group or others; every operation re-opens the root
//     without following symlinks and re-checks owner, mode and identity
//     (device and inode as at NewFS);
//   - no ancestor of the root may be writable by group or others unless it
//     has the sticky bit (checked by NewFS and Validate);
//   - every key is resolved component by component with openat and
//     O_NOFOLLOW: a symlink at any position is refused with ErrUnsafe;
//   - Put writes a temporary file beside the target (its name contains a
//     backslash, so no key can name it and List never shows it), fsyncs it,
//     renames it over the key and fsyncs the directory. PutIfAbsent links the
//     temporary file to the key instead (link fails if the key exists).
type FS struct {
	root     string // absolute, symlink-free path
	uid      int
	dev, ino uint64
}

// fsTempPrefix starts the name of every temporary file. The backslash makes
// it an invalid key component.
const fsTempPrefix = ".extenddb-tmp\\"

// fsCopyBuf is the size of the copy buffers Put and Get use.
const fsCopyBuf = 1 << 20

var fsBufPool = sync.Pool{New: func() any { b := make([]byte, fsCopyBuf); return &b }}

// NewFS opens (creating it with mode 0700 if missing; its parent must exist)
// the filesystem store rooted at root and checks the root rules.
func NewFS(root string) (*FS, error) {
	if root == "" {
		return nil, errors.New("fsstore: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsstore: root %q: %w", root, err)
	}
	if err := os.Mkdir(abs, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("fsstore: create root: %w", err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return nil, fmt.Errorf("fsstore: root: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%w: root %s is a symlink", ErrUnsafe, abs)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("fsstore: root: %w", err)
	}
	s := &FS{root: real, uid: os.Geteuid()}
	if err := checkAncestors(real); err != nil {
		return nil, err
	}
	fd, st, err := s.openRootRaw()
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	s.dev, s.ino = uint64(st.Dev), uint64(st.Ino)
	return s, nil
}

// Root is the store's absolute root directory.
func (s *FS) Root() string { return s.root }

func (s *FS) String() string { return "fs:" + s.root }

// checkAncestors refuses an ancestor of dir that is a symlink or is writable
// by group or others without the sticky bit.
func checkAncestors(dir string) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("fsstore: ancestor %s: %w", p, err)
		}
		m := fi.Mode()
		if m&os.ModeSymlink != 0 {
			return fmt.Errorf("%w: ancestor %s of the root is a symlink", ErrUnsafe, p)
		}
		if m.Perm()&0o022 != 0 && m&os.ModeSticky == 0 {
			return fmt.Errorf("%w: ancestor %s of the root is writable by group or others (mode %04o) without the sticky bit", ErrUnsafe, p, m.Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (s *FS) openRootRaw() (int, *unix.Stat_t, error) {
	fd, err := unix.Open(s.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return -1, nil, fmt.Errorf("%w: root %s is not a directory (or is a symlink)", ErrUnsafe, s.root)
		}
		return -1, nil, fmt.Errorf("fsstore: open root %s: %w", s.root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("fsstore: stat root %s: %w", s.root, err)
	}
	if int(st.Uid) != s.uid {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%w: root %s is owned by uid %d, not by the server's uid %d", ErrUnsafe, s.root, st.Uid, s.uid)
	}
	if st.Mode&0o077 != 0 {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%w: root %s has mode %04o; it must not be accessible by group or others (chmod 0700)", ErrUnsafe, s.root, st.Mode&0o7777)
	}
	return fd, &st, nil
}

// openRoot opens the root and re-checks its owner, mode and identity.
func (s *FS) openRoot() (int, error) {
	fd, st, err := s.openRootRaw()
	if err != nil {
		return -1, err
	}
	if uint64(st.Dev) != s.dev || uint64(st.Ino) != s.ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: root %s was replaced since the store was opened", ErrUnsafe, s.root)
	}
	return fd, nil
}

// errNoDir: a directory component of a key does not exist (or is a file).
var errNoDir = errors.New("fsstore: no such directory")

// refuseIfSymlink classifies a failed no-follow open of name in dir.
func refuseIfSymlink(dir int, name, key string, err error) error {
	var st unix.Stat_t
	if serr := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%w: %q in key %q is a symlink", ErrUnsafe, name, key)
	}
	return err
}

// walk opens the directories comps below dir without following symlinks,
// creating missing ones (0700, parent fsynced) when create is set. It
// returns the fds of every directory opened, deepest last; the caller closes
// them with closeAll. A missing directory without create is errNoDir, as is
// a component that is a regular file.
func walk(dir int, comps []string, key string, create bool) ([]int, error) {
	fds := make([]int, 0, len(comps))
	cur := dir
	for _, c := range comps {
		var fd int
		var err error
		for range 8 {
			fd, err = unix.Openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != unix.ENOENT || !create {
				break
			}
			if merr := unix.Mkdirat(cur, c, 0o700); merr == nil {
				if serr := unix.Fsync(cur); serr != nil {
					closeAll(fds)
					return nil, fmt.Errorf("fsstore: fsync directory: %w", serr)
				}
			} else if merr != unix.EEXIST {
				closeAll(fds)
				return nil, fmt.Errorf("fsstore: create directory %q of key %q: %w", c, key, merr)
			}
		}
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				err = refuseIfSymlink(cur, c, key, err) // before cur is closed
			}
			closeAll(fds)
			switch err {
			case unix.ELOOP, unix.ENOTDIR:
				if create {
					return nil, fmt.Errorf("fsstore: key %q: component %q is an object, not a directory", key, c)
				}
				return nil, errNoDir
			case unix.ENOENT:
				return nil, errNoDir
			}
			if errors.Is(err, ErrUnsafe) {
				return nil, err
			}
			return nil, fmt.Errorf("fsstore: open directory %q of key %q: %w", c, key, err)
		}
		fds = append(fds, fd)
		cur = fd
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// dirOf answers the fd of the deepest directory of a walk (or the root).
func dirOf(root int, fds []int) int {
	if len(fds) == 0 {
		return root
	}
	return fds[len(fds)-1]
}

func splitKey(key string) (dirs []string, name string) {
	comps := strings.Split(key, "/")
	return comps[:len(comps)-1], comps[len(comps)-1]
}

func tempName() string {
	var b [12]byte
	rand.Read(b[:])
	return fsTempPrefix + hex.EncodeToString(b[:])
}

func (s *FS) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, false)
}

func (s *FS) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, true)
}

func (s *FS) put(ctx context.Context, key string, r io.Reader, exclusive bool) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	dirs, name := splitKey(key)

	// Create the temporary file. A concurrent DeletePrefix may remove an
	// empty directory between the walk and the create: walk again.
	var fds []int
	var tmp string
	var fd int
	for attempt := 0; ; attempt++ {
		fds, err = walk(root, dirs, key, true)
		if err != nil {
			return err
		}
		dir := dirOf(root, fds)
		if exclusive {
			var st unix.Stat_t
			if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				closeAll(fds)
				return fmt.Errorf("%w: %q", ErrExists, key)
			}
		}
		tmp = tempName()
		fd, err = unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			break
		}
		closeAll(fds)
		if err != unix.ENOENT || attempt >= 5 {
			return fmt.Errorf("fsstore: create temporary file for %q: %w", key, err)
		}
	}
	defer closeAll(fds)
	dir := dirOf(root, fds)
	f := os.NewFile(uintptr(fd), tmp)
	published := false
	defer func() {
		if !published {
			f.Close()
			unix.Unlinkat(dir, tmp, 0)
		}
	}()

	bp := fsBufPool.Get().(*[]byte)
	_, err = io.CopyBuffer(onlyWriter{f}, CtxReader(ctx, r), *bp)
	fsBufPool.Put(bp)
	if err != nil {
		return fmt.Errorf("fsstore: put %q: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsstore: put %q: fsync: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var cur unix.Stat_t
	if unix.Fstatat(dir, name, &cur, unix.AT_SYMLINK_NOFOLLOW) == nil && cur.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%w: %q in key %q is a symlink", ErrUnsafe, name, key)
	}
	if exclusive {
		err = unix.Linkat(dir, tmp, dir, name, 0)
		if err == unix.EEXIST {
			return fmt.Errorf("%w: %q", ErrExists, key)
		}
	} else {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
			return fmt.Errorf("fsstore: put %q: the key is a directory of other keys", key)
		}
		return fmt.Errorf("fsstore: put %q: publish: %w", key, err)
	}
	published = true
	cerr := f.Close()
	if exclusive {
		unix.Unlinkat(dir, tmp, 0)
	}
	if err := unix.Fsync(dir); err != nil {
		return fmt.Errorf("fsstore: put %q: fsync directory: %w", key, err)
	}
	if cerr != nil {
		return fmt.Errorf("fsstore: put %q: close: %w", key, cerr)
	}
	return nil
}

// onlyWriter hides *os.File's ReadFrom so CopyBuffer uses our buffer and our
// context checks on every read.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// openObject opens the object at key for reading (no symlinks anywhere).
func (s *FS) openObject(key string) (*os.File, *unix.Stat_t, error) {
	if err := ValidateKey(key); err != nil {
		return nil, nil, err
	}
	root, err := s.openRoot()
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(root)
	dirs, name := splitKey(key)
	fds, err := walk(root, dirs, key, false)
	if err != nil {
		if err == errNoDir {
			return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, key)
		}
		return nil, nil, err
	}
	defer closeAll(fds)
	dir := dirOf(root, fds)
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch err {
		case unix.ENOENT:
			return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, key)
		case unix.ELOOP:
			return nil, nil, refuseIfSymlink(dir, name, key, fmt.Errorf("fsstore: open %q: %w", key, err))
		}
		return nil, nil, fmt.Errorf("fsstore: open %q: %w", key, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("fsstore: stat %q: %w", key, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return os.NewFile(uintptr(fd), filepath.Join(s.root, key)), &st, nil
}

func (s *FS) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, _, err := s.openObject(key)
	if err != nil {
		return nil, err
	}
	return CtxReadCloser(ctx, f), nil
}

func (s *FS) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: negative offset %d", ErrInvalidRange, off)
	}
	f, st, err := s.openObject(key)
	if err != nil {
		return nil, err
	}
	if off > st.Size {
		f.Close()
		return nil, fmt.Errorf("%w: offset %d past the end of %q (%d bytes)", ErrInvalidRange, off, key, st.Size)
	}
	if n < 0 || off+n > st.Size {
		n = st.Size - off
	}
	return CtxReadCloser(ctx, struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}), nil
}

func fsInfo(key string, st *unix.Stat_t) ObjectInfo {
	mt := time.Unix(st.Mtim.Unix()).UTC()
	return ObjectInfo{
		Key:     key,
		Size:    st.Size,
		ModTime: mt,
		ETag:    fmt.Sprintf("%x-%x-%x", st.Ino, st.Size, mt.UnixNano()),
	}
}

func (s *FS) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	f, st, err := s.openObject(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	f.Close()
	return fsInfo(key, st), nil
}

// locate resolves prefix to its parent directory fds and the final name's
// lstat. found is false when nothing exists at prefix.
func (s *FS) locate(root int, prefix string) (fds []int, name string, st unix.Stat_t, found bool, err error) {
	dirs, name := splitKey(prefix)
	fds, err = walk(root, dirs, prefix, false)
	if err == errNoDir {
		return nil, name, st, false, nil
	}
	if err != nil {
		return nil, name, st, false, err
	}
	err = unix.Fstatat(dirOf(root, fds), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return fds, name, st, false, nil
	}
	if err != nil {
		closeAll(fds)
		return nil, name, st, false, fmt.Errorf("fsstore: stat %q: %w", prefix, err)
	}
	return fds, name, st, true, nil
}

func (s *FS) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return listByWalk(ctx, prefix, s.Walk)
}

// Walk visits the objects List would answer in key order, one directory
// read at a time: only the entries of the directories on the current path
// are held, never the whole tree.
func (s *FS) Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	root, err := s.prefixRoot(ctx, prefix)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if prefix == "" {
		d, err := unix.Dup(root)
		if err != nil {
			return err
		}
		return walkTree(ctx, d, "", fn)
	}
	fds, name, st, found, err := s.locate(root, prefix)
	if err != nil {
		return err
	}
	defer closeAll(fds)
	if !found {
		return nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return fn(fsInfo(prefix, &st))
	case unix.S_IFLNK:
		return fmt.Errorf("%w: %q in key %q is a symlink", ErrUnsafe, name, prefix)
	case unix.S_IFDIR:
		d, err := unix.Openat(dirOf(root, fds), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			return nil
		}
		if err != nil {
			return refuseIfSymlink(dirOf(root, fds), name, prefix, fmt.Errorf("fsstore: list %q: %w", prefix, err))
		}
		return walkTree(ctx, d, prefix+"/", fn)
	}
	return nil
}

// prefixRoot checks a prefix and the context, then opens the root
// directory (the caller closes it): how Walk and DeletePrefix begin.
func (s *FS) prefixRoot(ctx context.Context, prefix string) (int, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return -1, err
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	return s.openRoot()
}

// readDir reads the entries of the directory fd and closes it.
func readDir(fd int) ([]os.DirEntry, error) {
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	return f.ReadDir(-1)
}

// walkTree visits the valid objects below directory fd (closed on return)
// in ascending key order; keyPrefix is "" or ends in "/". A directory's
// entries are ordered by the key text they contribute (a directory "d" as
// "d/", so that "d-x" comes before "d/y"). Entries that vanish meanwhile
// are skipped; symlinks and other non-regular files are never listed or
// followed.
func walkTree(ctx context.Context, fd int, keyPrefix string, fn func(ObjectInfo) error) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	defer unix.Close(dup)
	ents, err := readDir(fd)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed meanwhile
	}
	if err != nil {
		return fmt.Errorf("fsstore: list: %w", err)
	}
	sortName := func(e os.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(sortName(a), sortName(b)) })
	for i, e := range ents {
		ents[i] = nil // let visited entries go
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		key := keyPrefix + name
		if ValidateComponent(name) != nil || len(key) > MaxKeyLen {
			continue
		}
		switch {
		case e.Type().IsDir():
			sub, err := unix.Openat(dup, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == unix.ENOENT || err == unix.ELOOP || err == unix.ENOTDIR {
				continue
			}
			if err != nil {
				return fmt.Errorf("fsstore: list %q: %w", key, err)
			}
			if err := walkTree(ctx, sub, key+"/", fn); err != nil {
				return err
			}
		case e.Type().IsRegular():
			var st unix.Stat_t
			err := unix.Fstatat(dup, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err == unix.ENOENT {
				continue
			}
			if err != nil {
				return fmt.Errorf("fsstore: list %q: %w", key, err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG {
				if err := fn(fsInfo(key, &st)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *FS) DeletePrefix(ctx context.Context, prefix string) error {
	root, err := s.prefixRoot(ctx, prefix)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if prefix == "" {
		if err := removeChildren(ctx, root); err != nil {
			return err
		}
		return unix.Fsync(root)
	}
	fds, name, st, found, err := s.locate(root, prefix)
	if err != nil {
		return err
	}
	defer closeAll(fds)
	if !found {
		return nil
	}
	dir := dirOf(root, fds)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := removeDir(ctx, dir, name); err != nil {
			return fmt.Errorf("fsstore: delete %q: %w", prefix, err)
		}
	} else if err := unix.Unlinkat(dir, name, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("fsstore: delete %q: %w", prefix, err)
	}
	if err := unix.Fsync(dir); err != nil {
		return fmt.Errorf("fsstore: delete %q: fsync: %w", prefix, err)
	}
	// Remove directories left empty, deepest first, best effort: a
	// directory that is not empty (or already gone) ends the climb.
	dirs, _ := splitKey(prefix)
	for i := len(dirs) - 1; i >= 0; i-- {
		parent := root
		if i > 0 {
			parent = fds[i-1]
		}
		if unix.Unlinkat(parent, dirs[i], unix.AT_REMOVEDIR) != nil {
			break
		}
		unix.Fsync(parent)
	}
	return nil
}

// removeDir removes the directory name in parent and everything below it,
// never following symlinks and tolerating concurrent removal.
func removeDir(ctx context.Context, parent int, name string) error {
	for attempt := 0; ; attempt++ {
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			return nil
		}
		if err == unix.ELOOP || err == unix.ENOTDIR {
			// Replaced by a symlink or a file meanwhile: unlink the entry.
			if err := unix.Unlinkat(parent, name, 0); err != nil && err != unix.ENOENT {
				return err
			}
			return nil
		}
		if err != nil {
			return err
		}
		err = removeChildren(ctx, fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.ENOTEMPTY || attempt >= 3 {
			return err
		}
	}
}

// removeChildren removes everything inside the directory fd (kept open).
func removeChildren(ctx context.Context, fd int) error {
	d, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	if _, err := unix.Seek(d, 0, io.SeekStart); err != nil {
		unix.Close(d)
		return err
	}
	ents, err := readDir(d)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed by a concurrent deleter
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() {
			if err := removeDir(ctx, fd, e.Name()); err != nil {
				return err
			}
			continue
		}
		err := unix.Unlinkat(fd, e.Name(), 0)
		if err == unix.EISDIR {
			err = removeDir(ctx, fd, e.Name())
		}
		if err != nil && err != unix.ENOENT {
			return err
		}
	}
	return nil
}

// Validate re-checks the root and its ancestors and proves the root is
// writable by creating, syncing and removing a temporary file.
func (s *FS) Validate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkAncestors(s.root); err != nil {
		return err
	}
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	tmp := tempName()
	fd, err := unix.Openat(root, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("fsstore: validate %s: cannot create a file: %w", s.root, err)
	}
	defer unix.Unlinkat(root, tmp, 0)
	if err := unix.Fsync(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("fsstore: validate %s: fsync: %w", s.root, err)
	}
	return unix.Close(fd)
}
