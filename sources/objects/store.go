package objects

import (
	"context"
	"io"
)

// Store is where objects are listed and read: a local directory
// (NewDirStore) or an S3 prefix (NewS3Store). Keys are slash-separated
// and relative to the directory or prefix.
type Store interface {
	// List returns every object under the directory or prefix, sorted by
	// key, with sizes. The source filters temporary names itself.
	List(ctx context.Context) ([]Object, error)
	// Open reads an object from byte offset off (0 ≤ off < its size) to
	// its end.
	Open(ctx context.Context, key string, off int64) (io.ReadCloser, error)
	// ReaderAt gives random access to an object of the listed size, for
	// Parquet; reads may go on under ctx until Close.
	ReaderAt(ctx context.Context, key string, size int64) (ReadAtCloser, error)
}

// Object is one listed object.
type Object struct {
	Key  string
	Size int64
}

// ReadAtCloser is random access to one object.
type ReadAtCloser interface {
	io.ReaderAt
	io.Closer
}
