package diskstore

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine"
)

// PutObject implements engine.ObjectStore. The condition is checked and
// the object replaced under the key's exclusive lock, so no other request
// on the key comes between the two.
func (s *Store) PutObject(in engine.PutObjectInput, done func(etag string, err error)) {
	if err := checkKey(in.Key); err != nil {
		s.later(func() { done("", invalidKey("put", in.Key, err)) })
		return
	}
	name := "o" + in.Key
	dir, path := s.objectPath(in.Key)
	s.locks.acquire(name, exclusive, func() {
		finish := func(etag string, err error) {
			s.locks.release(name)
			if err != nil {
				done("", fmt.Errorf("diskstore: put %s: %w", in.Key, err))
				return
			}
			done(etag, nil)
		}
		s.ensureDir(dir, func(err error) {
			if err != nil {
				finish("", err)
				return
			}
			s.checkPut(in, dir, path, func(err error) {
				if err != nil {
					finish("", err)
					return
				}
				s.putChecked(in, dir, path, finish)
			})
		})
	})
}

// putChecked writes the object once the key's lock is held and checkPut
// allowed it.
func (s *Store) putChecked(in engine.PutObjectInput, dir, path string, done func(etag string, err error)) {
	h := header{key: in.Key, modifiedUnixMs: s.clock.WallUnixMs(),
		bodyLen: int64(len(in.Body)), digest: digestOf(in.Body)}
	hdr := encodeHeader(h)
	fill := func(f engine.File, done func(error)) {
		chunks := [][]byte{hdr}
		if len(in.Body) > 0 {
			chunks = append(chunks, in.Body)
		}
		writeChunks(f, path, chunks, done)
	}
	s.writeAtomic(dir, path, true, fill, func(err error) { done(h.etag(), err) })
}

// checkPut checks in's conditions against the current object; without
// conditions it continues at once (the caller issues a disk operation
// next). IfNoneMatch needs only the name to exist: a present file whose
// header is damaged still exists.
func (s *Store) checkPut(in engine.PutObjectInput, dir, path string, done func(error)) {
	if !in.IfNoneMatch && in.IfMatch == "" {
		done(nil)
		return
	}
	ifMatch := func() {
		s.readObject(path, in.Key, nil, func(h header, _ []byte, err error) {
			switch {
			case errors.Is(err, engine.ErrNotFound):
				done(fmt.Errorf("%w: If-Match %s: no object", engine.ErrPreconditionFailed, in.IfMatch))
			case err != nil:
				done(err)
			case h.etag() != in.IfMatch:
				done(fmt.Errorf("%w: If-Match %s: the object's ETag is %s", engine.ErrPreconditionFailed, in.IfMatch, h.etag()))
			default:
				done(nil)
			}
		})
	}
	s.settle(dir, func(err error) {
		if err != nil {
			done(err)
			return
		}
		if !in.IfNoneMatch {
			ifMatch()
			return
		}
		s.disk.Open(path, engine.OpenMode{}, func(f engine.File, err error) {
			switch {
			case errors.Is(err, engine.ErrNotFound):
				if in.IfMatch == "" {
					done(nil)
					return
				}
				ifMatch()
			case err != nil:
				done(diskErr("open", path, err))
			default:
				f.Close(func(error) {
					done(fmt.Errorf("%w: If-None-Match: the key exists", engine.ErrPreconditionFailed))
				})
			}
		})
	})
}

// GetObject implements engine.ObjectStore. A GET of the whole body checks
// it against the digest in its header (the ETag); a ranged GET reads only
// the header and the range, and cannot.
func (s *Store) GetObject(in engine.GetObjectInput, done func(body []byte, info engine.ObjectInfo, err error)) {
	if err := checkKey(in.Key); err != nil {
		s.later(func() { done(nil, engine.ObjectInfo{}, invalidKey("get", in.Key, err)) })
		return
	}
	if in.Limit <= 0 {
		s.later(func() {
			done(nil, engine.ObjectInfo{}, fmt.Errorf("%w: get %s: limit %d must be positive", ErrInvalidRange, in.Key, in.Limit))
		})
		return
	}
	var rng *engine.ByteRange
	if in.Range != nil {
		r := *in.Range
		rng = &r
	}
	dir, path := s.objectPath(in.Key)
	span := func(h header) (start, end int64, err error) {
		start, end = 0, h.bodyLen
		if rng != nil {
			if rng.Start < 0 || rng.Length <= 0 || rng.Start >= end {
				return 0, 0, fmt.Errorf("%w: get %s: range [%d, +%d) of an object of %d bytes", ErrInvalidRange, in.Key, rng.Start, rng.Length, end)
			}
			start = rng.Start
			end = min(end, rng.Start+min(rng.Length, BodyMax)) // clipped at the end, as S3 does
		}
		if end-start > in.Limit {
			return 0, 0, fmt.Errorf("%w: get %s: %d bytes, limit %d", engine.ErrTooLarge, in.Key, end-start, in.Limit)
		}
		return start, end, nil
	}
	s.read(in.Key, dir, path, span, func(h header, body []byte, err error) {
		if err == nil && int64(len(body)) == h.bodyLen && digestOf(body) != h.digest {
			err = corrupt(path, fmt.Errorf("the body does not match its digest %s", h.etag()))
		}
		if err != nil {
			done(nil, engine.ObjectInfo{}, err)
			return
		}
		done(body, info(in.Key, h), nil)
	})
}

// HeadObject implements engine.ObjectStore.
func (s *Store) HeadObject(key string, done func(info engine.ObjectInfo, err error)) {
	if err := checkKey(key); err != nil {
		s.later(func() { done(engine.ObjectInfo{}, invalidKey("head", key, err)) })
		return
	}
	dir, path := s.objectPath(key)
	s.read(key, dir, path, nil, func(h header, _ []byte, err error) {
		if err != nil {
			done(engine.ObjectInfo{}, err)
			return
		}
		done(info(key, h), nil)
	})
}

// read is GET and HEAD: under the key's shared lock (after any write of
// the key queued before it), from a settled directory.
func (s *Store) read(key, dir, path string, span func(h header) (int64, int64, error), done func(h header, body []byte, err error)) {
	name := "o" + key
	s.locks.acquire(name, shared, func() {
		finish := func(h header, body []byte, err error) {
			s.locks.release(name)
			done(h, body, err)
		}
		s.settle(dir, func(err error) {
			if err != nil {
				finish(header{}, nil, err)
				return
			}
			s.readObject(path, key, span, finish)
		})
	})
}

func info(key string, h header) engine.ObjectInfo {
	return engine.ObjectInfo{Key: key, Size: h.bodyLen, ETag: h.etag(), LastModifiedUnixMs: h.modifiedUnixMs}
}

// DeleteObject implements engine.ObjectStore: Remove, then SyncDir. A
// missing key is deleted too — and its directory is still synced, since
// the Remove that made it missing may be one whose sync failed.
func (s *Store) DeleteObject(key string, done func(err error)) {
	if err := checkKey(key); err != nil {
		s.later(func() { done(invalidKey("delete", key, err)) })
		return
	}
	name := "o" + key
	dir, path := s.objectPath(key)
	s.locks.acquire(name, exclusive, func() {
		finish := func(err error) {
			s.locks.release(name)
			if err != nil {
				err = fmt.Errorf("diskstore: delete %s: %w", key, err)
			}
			done(err)
		}
		s.disk.Remove(path, func(err error) {
			if err != nil && !errors.Is(err, engine.ErrNotFound) {
				s.markDirty(dir)
				finish(ambiguous("remove", path, err))
				return
			}
			s.syncDir(dir, func(err error) {
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					finish(ambiguous("syncdir", dir, err))
					return
				}
				finish(nil)
			})
		})
	})
}
