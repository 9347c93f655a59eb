package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// dirStore lists the regular files under a directory, recursively.
// Symbolic links are not followed: a link could leave the directory or
// make one file appear under two keys.
type dirStore struct {
	dir      string
	pageSize int // files per listing page
}

// dirPageSize is a directory listing's page: a page costs a read of
// each folder on the way to its first file, and stats of its files.
const dirPageSize = 1000

// NewDirStore returns a Store over the regular files under dir; keys are
// their slash-separated paths relative to dir. A missing dir is a
// listing error (retried at every poll), not an empty listing.
func NewDirStore(dir string) Store { return dirStore{dir: dir, pageSize: dirPageSize} }

// List walks the tree in key order: a folder's entries sorted by what
// their keys start with — a file's name, a folder's name and "/" — so
// that a depth-first walk meets keys in ascending byte order ("a-b"
// before "a/c", though the folder "a" sorts before the file "a-b").
// Folders whose keys all sort at or before after are not read.
func (d dirStore) List(ctx context.Context, after string) (Page, error) {
	w := dirWalk{ctx: ctx, root: d.dir, after: after, limit: d.pageSize}
	if err := w.walk("", true); err != nil && !errors.Is(err, errPageFull) {
		return Page{}, fmt.Errorf("list directory %s after %q: %w", d.dir, after, err)
	}
	return w.page, nil
}

// errPageFull ends a walk whose page is full.
var errPageFull = errors.New("page full")

// dirWalk is one page's walk.
type dirWalk struct {
	ctx   context.Context
	root  string
	after string
	limit int
	page  Page
}

// walk lists the folder at key prefix rel ("" or ending in "/").
func (w *dirWalk) walk(rel string, root bool) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(w.root, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) && !root {
		return nil // removed while we walk
	}
	if err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(entryKey(a), entryKey(b)) })
	for _, e := range entries {
		key := rel + entryKey(e)
		switch {
		case e.IsDir() && (key > w.after || strings.HasPrefix(w.after, key)):
			if err := w.walk(key, false); err != nil {
				return err
			}
		case e.Type().IsRegular() && key > w.after:
			if err := w.file(key, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// entryKey is what the keys of e start with: its name, and "/" for a
// folder.
func entryKey(e fs.DirEntry) string {
	if e.IsDir() {
		return e.Name() + "/"
	}
	return e.Name()
}

// file adds the file at key to the page, or ends the walk on a full one.
func (w *dirWalk) file(key string, e fs.DirEntry) error {
	if len(w.page.Objects) == w.limit {
		w.page.Next = w.page.Objects[len(w.page.Objects)-1].Key
		return errPageFull
	}
	info, err := e.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	w.page.Objects = append(w.page.Objects, Object{Key: key, Size: info.Size()})
	return nil
}

func (d dirStore) Open(_ context.Context, key string, off int64) (io.ReadCloser, error) {
	f, err := d.open(key)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("seek %s to %d: %w", f.Name(), off, err)
	}
	return f, nil
}

func (d dirStore) ReaderAt(_ context.Context, key string, _ int64) (ReadAtCloser, error) {
	return d.open(key)
}

// open opens key, which must stay inside the directory.
func (d dirStore) open(key string) (*os.File, error) {
	rel := filepath.FromSlash(key)
	if !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("key %q is not a path inside %s", key, d.dir)
	}
	return os.Open(filepath.Join(d.dir, rel))
}
