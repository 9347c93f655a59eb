package main

// Reads of a segment store opened read-only (storeView, owner_inspect.go)
// beyond its listing: an object whole or by range, each bounded, and the
// multipart uploads in progress.

import (
	"context"
	"fmt"
	"io"

	"github.com/skipprd/skipprd/engine"
)

// get reads the object at key, refusing one over limit bytes (the format's
// own bound: segment.MarkerBytesMax and the like). A missing object
// answers an error wrapping engine.ErrNotFound.
func (v *storeView) get(ctx context.Context, key string, limit int64) ([]byte, error) {
	return v.getIn(ctx, engine.GetObjectInput{Key: key, Limit: limit})
}

func (v *storeView) getIn(ctx context.Context, in engine.GetObjectInput) ([]byte, error) {
	var body []byte
	err := v.retry(ctx, func() error {
		var err error
		body, err = callStore(v, func(done func([]byte, error)) {
			v.store.GetObject(in, func(b []byte, _ engine.ObjectInfo, err error) { done(b, err) })
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", in.Key, v.where, err)
	}
	return body, nil
}

// objectReader reads one object by ranged GETs: an io.ReaderAt for the
// segment decoders, which read a body's headers and windows without the
// whole of it in memory.
type objectReader struct {
	ctx  context.Context
	v    *storeView
	key  string
	size int64
}

// readChunkMax bounds one ranged GET (segment.VerifyBody reads by 1 MiB).
const readChunkMax = 8 << 20

func (r objectReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= r.size {
		return 0, fmt.Errorf("reading %s in %s: offset %d of an object of %d bytes: %w", r.key, r.v.where, off, r.size, io.EOF)
	}
	n := 0
	for n < len(p) && off+int64(n) < r.size {
		length := min(int64(len(p)-n), r.size-off-int64(n), readChunkMax)
		b, err := r.v.getIn(r.ctx, engine.GetObjectInput{Key: r.key,
			Range: &engine.ByteRange{Start: off + int64(n), Length: length}, Limit: length})
		if err != nil {
			return n, err
		}
		if int64(len(b)) != length {
			return n, fmt.Errorf("reading %s in %s: range [%d, +%d) answered %d bytes", r.key, r.v.where, off+int64(n), length, len(b))
		}
		n += copy(p[n:], b)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// uploads returns the multipart uploads in progress under prefix.
func (v *storeView) uploads(ctx context.Context, prefix string) ([]engine.Upload, error) {
	key, id := "", ""
	return collectPages(ctx, v, fmt.Sprintf("the uploads under %q", prefix), func() ([]engine.Upload, bool, error) {
		p, err := callStore(v, func(done func(engine.UploadsPage, error)) {
			v.store.ListMultipartUploads(prefix, key, id, done)
		})
		if err != nil {
			return nil, false, err
		}
		key, id = p.NextKeyMarker, p.NextUploadIDMarker
		return p.Uploads, p.Truncated, nil
	})
}
