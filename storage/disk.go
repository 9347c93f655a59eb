package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ncw/directio"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/recordpath"
)

// Permissions of what OSDisk creates. Files are not executable and not
// world-writable; the WAL holds user data, but operators read it with
// their own tools, hence group/other read.
const (
	filePerm = 0o644
	dirPerm  = 0o755
)

// DiskOptions tune OSDisk.
type DiskOptions struct {
	// Logger receives the one-time notice that the filesystem refused
	// O_DIRECT. nil: slog.Default().
	Logger *slog.Logger
}

// OSDisk is engine.Disk on real files under a root directory. Each call
// runs on a worker goroutine and its completion is posted to the loop.
// Calls on one File run on that file's serial queue, so they complete in
// call order; other calls are not ordered with each other.
type OSDisk struct {
	loop *Loop
	root string // absolute
	log  *slog.Logger

	directRefusedOnce sync.Once
	// openDirect opens with O_DIRECT. It is directio.OpenFile; a test
	// replaces it to reach the fallback on machines whose filesystems all
	// accept O_DIRECT.
	openDirect func(name string, flag int, perm os.FileMode) (*os.File, error)
}

var _ engine.Disk = (*OSDisk)(nil)

// NewOSDisk returns a disk rooted at root, which must be an existing
// directory.
func NewOSDisk(l *Loop, root string, opts DiskOptions) (*OSDisk, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("storage: disk root %q: %w", root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("storage: disk root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("storage: disk root %q is not a directory", abs)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &OSDisk{loop: l, root: abs, log: logger, openDirect: directio.OpenFile}, nil
}

// resolve maps a port path (slash-separated, relative to the root; "" or
// "." is the root itself) to an OS path. A path that is absolute or climbs
// out of the root is a programmer error in the caller.
func (d *OSDisk) resolve(path string) string {
	if path == "" {
		path = "."
	}
	local, err := filepath.Localize(path)
	if err != nil {
		panic(fmt.Sprintf("storage: disk path %q is not a clean relative path: %v", path, err))
	}
	return filepath.Join(d.root, local)
}

// background runs op on a worker goroutine and posts done(err).
func (d *OSDisk) background(op func() error, done func(error)) {
	recordpath.Spine()
	go func() {
		err := op()
		d.loop.Post(func() { recordpath.Spine(); done(err) })
	}()
}

// Open implements engine.Disk. See openFile for Create and Direct.
func (d *OSDisk) Open(path string, mode engine.OpenMode, done func(f engine.File, err error)) {
	name := d.resolve(path)
	var file engine.File
	d.background(func() error {
		f, err := d.openFile(path, name, mode)
		if err != nil {
			return pathError("open", path, err)
		}
		file = f
		return nil
	}, func(err error) { done(file, err) })
}

// Rename implements engine.Disk (rename(2): atomic, replaces to).
func (d *OSDisk) Rename(from, to string, done func(err error)) {
	src, dst := d.resolve(from), d.resolve(to)
	d.background(func() error {
		return pathError("rename", from+" -> "+to, os.Rename(src, dst))
	}, done)
}

// Remove implements engine.Disk. A missing path is ErrNotFound; the
// caller decides whether that is fine.
func (d *OSDisk) Remove(path string, done func(err error)) {
	name := d.resolve(path)
	d.background(func() error { return pathError("remove", path, os.Remove(name)) }, done)
}

// ReadDir implements engine.Disk. Names are sorted here rather than
// trusted to os.ReadDir, because the contract promises the order.
func (d *OSDisk) ReadDir(dir string, done func(names []string, err error)) {
	name := d.resolve(dir)
	var names []string
	d.background(func() error {
		entries, err := os.ReadDir(name)
		if err != nil {
			return pathError("readdir", dir, err)
		}
		names = make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		return nil
	}, func(err error) { done(names, err) })
}

// SyncDir implements engine.Disk: fsync of the directory itself, which is
// what makes entries created, renamed or removed in it durable.
func (d *OSDisk) SyncDir(dir string, done func(err error)) {
	name := d.resolve(dir)
	d.background(func() error { return pathError("syncdir", dir, syncDir(name)) }, done)
}

func syncDir(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	syncErr := f.Sync()
	closeErr := f.Close()
	return errors.Join(syncErr, closeErr)
}

// MkdirAll implements engine.Disk. The new entries are durable only after
// SyncDir of each parent, like any other entry.
func (d *OSDisk) MkdirAll(dir string, done func(err error)) {
	name := d.resolve(dir)
	d.background(func() error { return pathError("mkdir", dir, os.MkdirAll(name, dirPerm)) }, done)
}

// pathError wraps an OS error with the operation and port path, adding
// the engine sentinel where the engine branches on it.
func pathError(op, path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("storage: %s %s: %w: %w", op, path, engine.ErrNotFound, err)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("storage: %s %s: %w: %w", op, path, engine.ErrExists, err)
	}
	return fmt.Errorf("storage: %s %s: %w", op, path, err)
}
