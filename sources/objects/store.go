package objects

import (
	"context"
	"io"
)

// Store is where objects are listed and read: a local directory
// (NewDirStore) or an S3 prefix (NewS3Store). Keys are slash-separated
// and relative to the directory or prefix.
type Store interface {
	// List returns a page of the objects under the directory or prefix
	// whose keys sort after after ("": from the first), in key order,
	// with sizes. The source filters temporary names itself.
	List(ctx context.Context, after string) (Page, error)
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

// Page is one page of a listing.
type Page struct {
	Objects []Object // sorted by key, all after the page's after
	// Next is where the next page starts (after it); "" when the listing
	// ends with this page. A page may hold no object and still have a
	// Next (S3 folder markers alone).
	Next string
}
