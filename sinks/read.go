package sinks

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// Reading a lake file back, for a sink that rewrites its own files (the
// Iceberg sink's small-file rewrite). The caller knows the file's size
// from the table's metadata, so every read is bounded by it, and a file
// of another size is an error, never a longer read. A read may come
// back damaged on the way (a flipped bit), and a rewrite that took a
// damaged read for the file would replace good rows with bad ones for
// good: so every file is read twice and the two reads must agree, byte
// for byte; reads that disagree are an ordinary error (try again later).
// Two damaged reads that agree would need the same damage twice.

// ReadFile reads the file at rel (a path under the sink's root) of size
// bytes, twice, and hands done its bytes if both reads agree.
func (p *ParquetDir) ReadFile(rel string, size int64, done func([]byte, error)) {
	if done == nil || size < 0 {
		panic(fmt.Sprintf("sinks: ParquetDir ReadFile %q with no callback or a negative size %d", rel, size))
	}
	if path.Clean(rel) != rel || strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") {
		panic(fmt.Sprintf("sinks: ParquetDir ReadFile path %q is not a clean path inside the sink's folder", rel))
	}
	full := path.Join(p.root, rel)
	once := func(next func([]byte, error)) { p.readOnce(full, size, next) }
	twice(once, func(b []byte, err error) {
		if err != nil {
			err = fmt.Errorf("sinks: read %s: %w", full, err)
		}
		done(b, err)
	})
}

// readOnce opens path, checks it holds size bytes, reads them and
// closes it.
func (p *ParquetDir) readOnce(path string, size int64, done func([]byte, error)) {
	p.disk.Open(path, engine.OpenMode{}, func(f engine.File, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		finish := func(b []byte, err error) { f.Close(func(error) { done(b, err) }) } // read-only: a failed close loses nothing
		f.Size(func(got int64, err error) {
			switch {
			case err != nil:
				finish(nil, err)
				return
			case got != size:
				finish(nil, fmt.Errorf("the file holds %d bytes, the table says %d", got, size))
				return
			}
			b := make([]byte, size)
			f.ReadAt(b, 0, func(n int, err error) {
				if err == nil && int64(n) != size {
					err = fmt.Errorf("read %d of its %d bytes: it changed", n, size)
				}
				if err != nil {
					b = nil
				}
				finish(b, err)
			})
		})
	})
}

// ReadObject reads the object at key (a key of the bucket, the sink's
// prefix not added) of size bytes, twice, and hands done its bytes if
// both reads agree.
func (p *ParquetObjects) ReadObject(key string, size int64, done func([]byte, error)) {
	if done == nil || size < 0 {
		panic(fmt.Sprintf("sinks: ParquetObjects ReadObject %q with no callback or a negative size %d", key, size))
	}
	once := func(next func([]byte, error)) {
		in := engine.GetObjectInput{Key: key, Limit: max(size, 1)}
		p.store.GetObject(in, func(b []byte, info engine.ObjectInfo, err error) {
			if err == nil && (int64(len(b)) != size || info.Size != size) {
				err = fmt.Errorf("got %d bytes of an object of %d, the table says %d: it changed, or the answer was cut short", len(b), info.Size, size)
			}
			if err != nil {
				b = nil
			}
			next(b, err)
		})
	}
	twice(once, func(b []byte, err error) {
		if err != nil {
			err = fmt.Errorf("sinks: read object %s: %w", key, err)
		}
		done(b, err)
	})
}

// twice runs read two times and answers the bytes if both agree.
func twice(read func(func([]byte, error)), done func([]byte, error)) {
	read(func(first []byte, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		read(func(second []byte, err error) {
			switch {
			case err != nil:
				done(nil, err)
			case !bytes.Equal(first, second):
				done(nil, fmt.Errorf("two reads of its %d bytes disagree: one was damaged on the way", len(first)))
			default:
				done(first, nil)
			}
		})
	})
}
