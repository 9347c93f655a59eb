package sqlcatalog

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	icegoio "github.com/apache/iceberg-go/io"
)

// A warehouse in a local folder: iceberg-go's LocalFS writes a metadata
// file, a manifest list or a manifest with os.Create and closes it,
// never syncing it or its folder. The catalog's row, which names the new
// metadata file, is synced by its database (SQLite's synchronous=FULL,
// PostgreSQL's commit) — so after a power loss a table could name a file
// that never reached the disk, and no reader could open it again.
//
// So this package replaces the IO of the file scheme (and of bare paths)
// in iceberg-go's registry with durableFS: LocalFS, but every file it
// creates is fsynced before its Close returns, and so is its folder's
// entry, and every folder a write creates is made durable in its parent.
// A write whose Close returns nil is on the disk; iceberg-go commits the
// catalog row only after it. The registry is process-wide: every local
// Iceberg write of this binary goes through it.

func init() {
	factory := func(context.Context, *url.URL, map[string]string) (icegoio.IO, error) { return durableFS{}, nil }
	for _, scheme := range []string{"file", ""} {
		icegoio.Unregister(scheme)
		icegoio.Register(scheme, factory)
	}
}

// durableFS is iceberg-go's LocalFS with durable writes.
type durableFS struct{ icegoio.LocalFS }

var _ icegoio.WriteFileIO = durableFS{}

// Create implements icegoio.WriteFileIO: the file's bytes and its entry
// are durable once the writer's Close returns nil.
func (durableFS) Create(name string) (icegoio.FileWriter, error) {
	path, err := osPath(name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := mkdirDurable(dir); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &syncedFile{File: f, dir: dir}, nil
}

// WriteFile implements icegoio.WriteFileIO, durably.
func (d durableFS) WriteFile(name string, p []byte) error {
	w, err := d.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(p); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// syncedFile syncs itself and its folder on Close.
type syncedFile struct {
	*os.File
	dir string
}

func (f *syncedFile) Close() error {
	serr := f.File.Sync()
	cerr := f.File.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("sqlcatalog: write %s: %w", f.Name(), err)
	}
	return syncDir(f.dir)
}

// mkdirDurable makes dir and its missing ancestors, each created one's
// entry synced in its parent.
func mkdirDurable(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range missing {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs a folder, so the entries in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("sqlcatalog: sync folder %s: %w", dir, err)
	}
	return nil
}

// osPath is the local path of a file:// URI or a bare path.
func osPath(name string) (string, error) {
	if !strings.HasPrefix(name, "file:") {
		return name, nil
	}
	u, err := url.Parse(name)
	if err != nil {
		return "", fmt.Errorf("sqlcatalog: local file %q: %w", name, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("sqlcatalog: local file %q names host %q", name, u.Host)
	}
	if u.Path == "" {
		return "", fmt.Errorf("sqlcatalog: local file %q has no path", name)
	}
	return filepath.FromSlash(u.Path), nil
}
