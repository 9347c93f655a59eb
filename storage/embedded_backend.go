package storage

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
)

// boltBackend is gofakes3's bolt backend made safe to read from.
//
// s3bolt's GetObject decodes the stored record inside a bolt read
// transaction, but the decoder it uses aliases its input: the object's
// Contents and Hash point into bolt's memory map, and they are read after
// the transaction has ended. Bolt only promises a value while its
// transaction is open. Once it has ended, a write transaction may reuse
// those pages (the GET would serve another object's bytes) or grow the
// file and remap it (the GET faults on unmapped memory — the daemon died
// of exactly that, a SIGSEGV in gofakes3's ETag encoding, during a CI run).
//
// Both happen only in write transactions, so the wrapper holds a lock:
// a read takes it shared for the span from s3bolt's lookup to its own
// copy of the bytes; every method that writes takes it exclusively. A
// PUT's body is read from the network before the lock is taken, so a slow
// client cannot hold every GET back.
//
// INVARIANT: every gofakes3.Backend method that can start a bolt write
// transaction holds mu exclusively; every one that returns bolt bytes
// copies them while holding mu shared. The listing methods decode and
// copy inside their own transactions and need neither.
type boltBackend struct {
	inner *s3bolt.Backend
	mu    sync.RWMutex
}

var _ gofakes3.Backend = (*boltBackend)(nil)

func newBoltBackend(inner *s3bolt.Backend) *boltBackend { return &boltBackend{inner: inner} }

// GetObject copies the object's bytes before bolt may reuse them.
func (b *boltBackend) GetObject(bucket, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	obj, err := b.inner.GetObject(bucket, key, rng)
	if err != nil {
		return nil, err
	}
	return detach(obj, true)
}

// HeadObject copies the hash (its Contents are empty).
func (b *boltBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	obj, err := b.inner.HeadObject(bucket, key)
	if err != nil {
		return nil, err
	}
	return detach(obj, false)
}

// detach gives obj its own Hash and, with body, its own Contents.
// REQUIRES: the shared lock is held.
func detach(obj *gofakes3.Object, body bool) (*gofakes3.Object, error) {
	obj.Hash = bytes.Clone(obj.Hash)
	if !body {
		return obj, nil
	}
	data, err := io.ReadAll(obj.Contents)
	_ = obj.Contents.Close()
	if err != nil {
		return nil, fmt.Errorf("storage: embedded store: copy %q: %w", obj.Name, err)
	}
	if obj.Range != nil && int64(len(data)) != obj.Range.Length {
		return nil, fmt.Errorf("storage: embedded store: %q: copied %d bytes of a %d-byte range", obj.Name, len(data), obj.Range.Length)
	}
	if obj.Range == nil && int64(len(data)) != obj.Size {
		return nil, fmt.Errorf("storage: embedded store: %q: copied %d bytes of %d", obj.Name, len(data), obj.Size)
	}
	obj.Contents = io.NopCloser(bytes.NewReader(data))
	return obj, nil
}

// PutObject reads the body first, then writes under the exclusive lock.
func (b *boltBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64,
	cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	data, err := gofakes3.ReadAll(input, size)
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.PutObject(bucket, key, meta, bytes.NewReader(data), size, cond)
}

func (b *boltBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.CopyObject(srcBucket, srcKey, dstBucket, dstKey, meta)
}

func (b *boltBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.DeleteObject(bucket, key)
}

func (b *boltBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.DeleteMulti(bucket, keys...)
}

func (b *boltBackend) CreateBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.CreateBucket(name)
}

func (b *boltBackend) DeleteBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.DeleteBucket(name)
}

func (b *boltBackend) ForceDeleteBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.ForceDeleteBucket(name)
}

func (b *boltBackend) ListBuckets() ([]gofakes3.BucketInfo, error) { return b.inner.ListBuckets() }

func (b *boltBackend) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	return b.inner.ListBucket(name, prefix, page)
}

func (b *boltBackend) BucketExists(name string) (bool, error) { return b.inner.BucketExists(name) }
