package objects

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// dirStore lists the regular files under a directory, recursively.
// Symbolic links are not followed: a link could leave the directory or
// make one file appear under two keys.
type dirStore struct{ dir string }

// NewDirStore returns a Store over the regular files under dir; keys are
// their slash-separated paths relative to dir. A missing dir is a
// listing error (retried at every poll), not an empty listing.
func NewDirStore(dir string) Store { return dirStore{dir: dir} }

func (d dirStore) List(ctx context.Context) ([]Object, error) {
	var out []Object
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			// A file or folder removed while we walk is not an error;
			// the root missing is.
			if errors.Is(err, fs.ErrNotExist) && p != d.dir {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(d.dir, p)
		if err != nil {
			return err
		}
		out = append(out, Object{Key: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list directory %s: %w", d.dir, err)
	}
	slices.SortFunc(out, func(a, b Object) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
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
