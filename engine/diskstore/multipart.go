package diskstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/skipprd/skipprd/engine"
)

// partsMax is S3's largest part number.
const partsMax = 10000

// idAttempts bounds the ids CreateMultipartUpload tries.
const idAttempts = 4

// noSuchUpload is the answer for an upload that is unknown, finished, or
// of another key.
func noSuchUpload(key, id string) error {
	return fmt.Errorf("diskstore: upload %s of %s: %w", id, key, engine.ErrNoSuchUpload)
}

// CreateMultipartUpload implements engine.ObjectStore. The upload exists
// once its metadata file is durable under its name: a crash before that
// leaves at most an upload directory without metadata, which names no
// upload and is removed when a listing meets it.
func (s *Store) CreateMultipartUpload(key string, done func(uploadID string, err error)) {
	if err := checkKey(key); err != nil {
		s.later(func() { done("", invalidKey("create upload", key, err)) })
		return
	}
	s.createUpload(key, 0, func(id string, err error) {
		if err != nil {
			done("", fmt.Errorf("diskstore: create upload of %s: %w", key, err))
			return
		}
		done(id, nil)
	})
}

func (s *Store) createUpload(key string, attempt int, done func(id string, err error)) {
	id := s.newID()
	name := "u" + id
	updir := s.uploadDir(id)
	s.locks.acquire(name, exclusive, func() {
		finish := func(err error) {
			s.locks.release(name)
			if err != nil {
				done("", err)
				return
			}
			done(id, nil)
		}
		// The upload directory is not cached as durable: it goes away.
		s.ensureDir(s.uploads, func(err error) {
			if err != nil {
				finish(err)
				return
			}
			s.makeUploadDir(key, updir, func(taken bool, err error) {
				switch {
				case taken && attempt+1 < idAttempts:
					// The id is taken (or its leftovers are there).
					s.locks.release(name)
					s.createUpload(key, attempt+1, done)
				case taken:
					finish(fmt.Errorf("diskstore: %d upload ids in a row were taken", idAttempts))
				default:
					finish(err)
				}
			})
		})
	})
}

// makeUploadDir makes the upload's directory and its metadata, unless the
// directory holds something already (taken: its id is in use).
func (s *Store) makeUploadDir(key, updir string, done func(taken bool, err error)) {
	s.disk.MkdirAll(updir, func(err error) {
		if err != nil {
			done(false, diskErr("mkdir", updir, err))
			return
		}
		s.disk.ReadDir(updir, func(names []string, err error) {
			switch {
			case err != nil:
				done(false, diskErr("readdir", updir, err))
			case len(names) > 0:
				done(true, nil)
			default:
				s.writeMeta(key, updir, func(err error) { done(false, err) })
			}
		})
	})
}

// writeMeta makes the new upload directory's metadata durable, and the
// directory's entry in uploads/.
func (s *Store) writeMeta(key, updir string, done func(error)) {
	b := encodeMeta(meta{key: key, initiatedUnixMs: s.clock.WallUnixMs()})
	path := updir + "/" + metaName
	fill := func(f engine.File, done func(error)) { writeChunks(f, path, [][]byte{b}, done) }
	s.writeAtomic(updir, path, true, fill, func(err error) {
		if err != nil {
			if !errors.Is(err, engine.ErrAmbiguous) {
				s.disk.Remove(updir, func(error) { done(err) }) // empty again
				return
			}
			done(err)
			return
		}
		s.syncDir(s.uploads, func(err error) {
			if err != nil {
				done(ambiguous("syncdir", s.uploads, err))
				return
			}
			done(nil)
		})
	})
}

// withUpload runs fn under the upload's lock once its metadata says it is
// an upload of key; fn must call release exactly once, when it is done.
func (s *Store) withUpload(key, id string, mode lockMode, fn func(updir string, release func()), fail func(error)) {
	name := "u" + id
	updir := s.uploadDir(id)
	s.locks.acquire(name, mode, func() {
		release := func() { s.locks.release(name) }
		s.settle(updir, func(err error) {
			if err != nil {
				release()
				fail(err)
				return
			}
			s.readMeta(updir, func(m meta, err error) {
				switch {
				case errors.Is(err, engine.ErrNotFound):
					release()
					fail(noSuchUpload(key, id))
				case err != nil:
					release()
					fail(err)
				case m.key != key:
					release()
					fail(noSuchUpload(key, id))
				default:
					fn(updir, release)
				}
			})
		})
	})
}

// UploadPart implements engine.ObjectStore. Parts of one upload are
// written concurrently (the upload's lock is shared); each replaces its
// number atomically by rename. Parts are not synced (doc.go).
func (s *Store) UploadPart(key, uploadID string, n int32, body []byte, done func(etag string, err error)) {
	switch err := checkKey(key); {
	case err != nil:
		s.later(func() { done("", invalidKey("upload part", key, err)) })
		return
	case !validID(uploadID):
		s.later(func() { done("", noSuchUpload(key, uploadID)) })
		return
	case n < 1 || n > partsMax:
		s.later(func() { done("", fmt.Errorf("%w: part number %d of upload %s", ErrInvalidPart, n, uploadID)) })
		return
	}
	s.withUpload(key, uploadID, shared, func(updir string, release func()) {
		h := header{key: key, modifiedUnixMs: s.clock.WallUnixMs(), bodyLen: int64(len(body)), digest: digestOf(body)}
		hdr := encodeHeader(h)
		path := updir + "/" + partName(n)
		fill := func(f engine.File, done func(error)) {
			chunks := [][]byte{hdr}
			if len(body) > 0 {
				chunks = append(chunks, body)
			}
			writeChunks(f, path, chunks, done)
		}
		s.writeAtomic(updir, path, false, fill, func(err error) {
			release()
			if err != nil {
				done("", fmt.Errorf("diskstore: upload part %d of %s: %w", n, uploadID, err))
				return
			}
			done(h.etag(), nil)
		})
	}, func(err error) { done("", err) })
}

// CompleteMultipartUpload implements engine.ObjectStore. Under the
// upload's lock and then the key's, the parts are copied in order into a
// temp file that is synced and renamed onto the key like a PUT; only once
// that is durable is the upload's metadata removed (and that synced).
// Any failure before leaves the upload in progress, so the call can be
// retried.
//
// The ETag of the object is the digest of its whole body (not S3's
// digest of part digests).
func (s *Store) CompleteMultipartUpload(key, uploadID string, parts []engine.CompletedPart, done func(err error)) {
	switch err := checkKey(key); {
	case err != nil:
		s.later(func() { done(invalidKey("complete upload", key, err)) })
		return
	case !validID(uploadID):
		s.later(func() { done(noSuchUpload(key, uploadID)) })
		return
	}
	if err := checkParts(parts); err != nil {
		s.later(func() { done(fmt.Errorf("diskstore: complete upload %s of %s: %w", uploadID, key, err)) })
		return
	}
	s.withUpload(key, uploadID, exclusive, func(updir string, release func()) {
		s.completeLocked(key, updir, parts, func(err error) {
			release()
			if err != nil {
				err = fmt.Errorf("diskstore: complete upload %s of %s: %w", uploadID, key, err)
			}
			done(err)
		})
	}, done)
}

// completeLocked completes the upload under its lock: under the key's, the
// object is written from the parts; then the upload's metadata goes.
func (s *Store) completeLocked(key, updir string, parts []engine.CompletedPart, done func(error)) {
	name := "o" + key
	dir, path := s.objectPath(key)
	s.locks.acquire(name, exclusive, func() {
		s.ensureDir(dir, func(err error) {
			if err != nil {
				s.locks.release(name)
				done(err)
				return
			}
			s.writeCompleted(key, dir, path, updir, parts, func(err error) {
				s.locks.release(name)
				if err != nil {
					done(err)
					return
				}
				s.finishUpload(updir, done)
			})
		})
	})
}

// writeCompleted writes the object of a completed upload: its parts'
// bodies in order after room for the header, then the header.
func (s *Store) writeCompleted(key, dir, path, updir string, parts []engine.CompletedPart, done func(error)) {
	hdrLen := header{key: key}.size()
	fill := func(f engine.File, done func(error)) {
		s.copyParts(f, path, updir, key, parts, hdrLen, func(bodyLen int64, digest [16]byte, err error) {
			if err != nil {
				done(err)
				return
			}
			h := header{key: key, modifiedUnixMs: s.clock.WallUnixMs(), bodyLen: bodyLen, digest: digest}
			writeChunks(f, path, [][]byte{encodeHeader(h)}, done)
		})
	}
	s.writeAtomic(dir, path, true, fill, done)
}

// checkParts checks a Complete's parts list before anything is read.
func checkParts(parts []engine.CompletedPart) error {
	if len(parts) == 0 {
		return fmt.Errorf("%w: no parts", ErrInvalidPart)
	}
	for i, p := range parts {
		if p.Number < 1 || p.Number > partsMax || (i > 0 && p.Number <= parts[i-1].Number) {
			return fmt.Errorf("%w: part number %d at position %d (numbers ascend within [1, %d])", ErrInvalidPart, p.Number, i, partsMax)
		}
	}
	return nil
}

// copyParts copies the bodies of parts, in order, into f from offset
// off, copyChunk bytes at a time, checking each part's ETag against the
// list and its body against its digest, and returns the total length and
// digest of what it wrote.
func (s *Store) copyParts(f engine.File, fpath, updir, key string, parts []engine.CompletedPart, off int64,
	done func(bodyLen int64, digest [16]byte, err error)) {
	c := &partCopy{s: s, f: f, fpath: fpath, updir: updir, key: key, parts: parts, off: off, done: done, whole: xxh3.New128()}
	c.next(0)
}

// partCopy is one copyParts: part by part, chunk by chunk, each chunk
// read, hashed (into its part's digest and the whole body's) and written.
type partCopy struct {
	s     *Store
	f     engine.File // the object's temp file
	fpath string
	updir string
	key   string
	parts []engine.CompletedPart
	off   int64 // where the body starts in f
	done  func(bodyLen int64, digest [16]byte, err error)
	whole *xxh3.Hasher128
	buf   []byte // the chunk buffer, reused
	total int64  // body bytes written

	// The part being copied.
	i     int
	ppath string
	pf    engine.File
	ph    header
	part  *xxh3.Hasher128
	at    int64  // body bytes of the part copied
	chunk []byte // the chunk in flight
}

// next opens part i, or answers once every part is copied.
func (c *partCopy) next(i int) {
	if i == len(c.parts) {
		c.done(c.total, c.whole.Sum128().Bytes(), nil)
		return
	}
	c.i, c.ppath = i, c.updir+"/"+partName(c.parts[i].Number)
	c.s.openChecked(c.ppath, c.key, c.opened)
}

func (c *partCopy) opened(pf engine.File, ph header, _ []byte, err error) {
	cp := c.parts[c.i]
	switch {
	case errors.Is(err, engine.ErrNotFound):
		c.done(0, [16]byte{}, fmt.Errorf("%w: part %d was not uploaded", ErrInvalidPart, cp.Number))
		return
	case errors.Is(err, engine.ErrCorrupt):
		c.done(0, [16]byte{}, damagedPart(cp.Number, err))
		return
	case err != nil:
		c.done(0, [16]byte{}, err)
		return
	}
	c.pf, c.ph, c.part, c.at = pf, ph, xxh3.New128(), 0
	if ph.etag() != cp.ETag {
		c.fail(fmt.Errorf("%w: part %d has ETag %s, not %s", ErrInvalidPart, cp.Number, ph.etag(), cp.ETag))
		return
	}
	c.step()
}

// step reads the part's next chunk, or checks its digest at its end.
func (c *partCopy) step() {
	if c.at == c.ph.bodyLen {
		if c.part.Sum128().Bytes() != c.ph.digest {
			c.fail(damagedPart(c.parts[c.i].Number, fmt.Errorf("%s: the body does not match its digest %s", c.ppath, c.ph.etag())))
			return
		}
		c.pf.Close(func(error) { c.next(c.i + 1) })
		return
	}
	// Sized from a header checked against its file's size.
	want := min(copyChunk, c.ph.bodyLen-c.at)
	if int64(len(c.buf)) < want {
		c.buf = make([]byte, want)
	}
	c.chunk = c.buf[:want]
	c.pf.ReadAt(c.chunk, c.ph.size()+c.at, c.read)
}

func (c *partCopy) read(m int, err error) {
	switch {
	case err != nil:
		c.fail(diskErr("read", c.ppath, err))
		return
	case m < len(c.chunk):
		c.fail(damagedPart(c.parts[c.i].Number, fmt.Errorf("%s: read %d body bytes at %d, want %d", c.ppath, m, c.ph.size()+c.at, len(c.chunk))))
		return
	}
	_, _ = c.part.Write(c.chunk)
	_, _ = c.whole.Write(c.chunk)
	c.f.WriteAt(c.chunk, c.off+c.total, c.wrote)
}

func (c *partCopy) wrote(err error) {
	if err != nil {
		c.fail(diskErr("write", c.fpath, err))
		return
	}
	c.total += int64(len(c.chunk))
	c.at += int64(len(c.chunk))
	c.step()
}

// fail closes the part and answers err.
func (c *partCopy) fail(err error) {
	c.pf.Close(func(error) { c.done(0, [16]byte{}, err) })
}

// damagedPart is the answer for a part that fails its checks. It is
// ErrInvalidPart, not ErrCorrupt: parts are never synced, so after a crash
// a torn part is expected, not a sign of damage to anything committed;
// either way the upload cannot complete with it and the writer starts
// over.
func damagedPart(n int32, err error) error {
	return fmt.Errorf("%w: part %d is damaged: %v", ErrInvalidPart, n, err)
}

// finishUpload ends an upload whose object is durable, or which is
// aborted: its metadata goes first (the upload no longer exists once
// that is durable), then the rest of its directory.
func (s *Store) finishUpload(updir string, done func(error)) {
	path := updir + "/" + metaName
	s.disk.Remove(path, func(err error) {
		if err != nil {
			s.markDirty(updir)
			done(ambiguous("remove", path, err))
			return
		}
		s.syncDir(updir, func(err error) {
			if err != nil {
				done(ambiguous("syncdir", updir, err))
				return
			}
			s.removeUploadDir(updir, func() { done(nil) })
		})
	})
}

// removeUploadDir removes what is left of a finished upload: its parts,
// temp files and directory. Failures leave garbage that a later listing
// removes. REQUIRES: the upload's lock is held exclusively.
func (s *Store) removeUploadDir(updir string, done func()) {
	s.disk.ReadDir(updir, func(names []string, err error) {
		if err != nil {
			done()
			return
		}
		each(len(names), readsInFlight, func(i int, next func()) {
			s.disk.Remove(updir+"/"+names[i], func(error) { next() })
		}, func() {
			s.disk.Remove(updir, func(error) { done() })
		})
	})
}

// AbortMultipartUpload implements engine.ObjectStore.
func (s *Store) AbortMultipartUpload(key, uploadID string, done func(err error)) {
	switch err := checkKey(key); {
	case err != nil:
		s.later(func() { done(invalidKey("abort upload", key, err)) })
		return
	case !validID(uploadID):
		s.later(func() { done(noSuchUpload(key, uploadID)) })
		return
	}
	s.withUpload(key, uploadID, exclusive, func(updir string, release func()) {
		s.finishUpload(updir, func(err error) {
			release()
			if err != nil {
				err = fmt.Errorf("diskstore: abort upload %s of %s: %w", uploadID, key, err)
			}
			done(err)
		})
	}, done)
}

// ListMultipartUploads implements engine.ObjectStore. It reads every
// upload's metadata (uploads are few: one per segment body being
// written), sorts them by key then id, and pages them after the markers.
// As in S3, a key marker without an id marker starts after every upload
// of that key. An upload directory without metadata is a leftover: it is
// removed, under the upload's lock, if it still has none then.
func (s *Store) ListMultipartUploads(prefix, keyMarker, uploadIDMarker string, done func(page engine.UploadsPage, err error)) {
	s.disk.ReadDir(s.uploads, func(names []string, err error) {
		if errors.Is(err, engine.ErrNotFound) {
			done(engine.UploadsPage{}, nil)
			return
		}
		if err != nil {
			done(engine.UploadsPage{}, fmt.Errorf("diskstore: list uploads: %w", diskErr("readdir", s.uploads, err)))
			return
		}
		var ids []string
		for _, name := range names {
			if validID(name) {
				ids = append(ids, name)
			}
		}
		ups := make([]engine.Upload, len(ids))
		present := make([]bool, len(ids))
		errs := make([]error, len(ids))
		each(len(ids), readsInFlight, func(i int, next func()) {
			s.readMeta(s.uploadDir(ids[i]), func(m meta, err error) {
				switch {
				case errors.Is(err, engine.ErrNotFound):
					s.removeAbandoned(ids[i])
				case err != nil:
					errs[i] = err
				default:
					ups[i], present[i] = engine.Upload{Key: m.key, UploadID: ids[i], InitiatedUnixMs: m.initiatedUnixMs}, true
				}
				next()
			})
		}, func() {
			var all []engine.Upload
			for i := range ids {
				if errs[i] != nil {
					done(engine.UploadsPage{}, fmt.Errorf("diskstore: list uploads: %w", errs[i]))
					return
				}
				if present[i] && strings.HasPrefix(ups[i].Key, prefix) {
					all = append(all, ups[i])
				}
			}
			done(s.uploadsPage(all, keyMarker, uploadIDMarker), nil)
		})
	})
}

func (s *Store) uploadsPage(all []engine.Upload, keyMarker, idMarker string) engine.UploadsPage {
	slices.SortFunc(all, func(a, b engine.Upload) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.UploadID, b.UploadID)
	})
	i, _ := slices.BinarySearchFunc(all, true, func(u engine.Upload, _ bool) int {
		after := u.Key > keyMarker || (u.Key == keyMarker && idMarker != "" && u.UploadID > idMarker)
		if after {
			return 1
		}
		return -1
	})
	var page engine.UploadsPage
	for ; i < len(all); i++ {
		if len(page.Uploads) == s.pageSize {
			last := page.Uploads[len(page.Uploads)-1]
			page.Truncated, page.NextKeyMarker, page.NextUploadIDMarker = true, last.Key, last.UploadID
			break
		}
		page.Uploads = append(page.Uploads, all[i])
	}
	return page
}

// removeAbandoned removes the directory of upload id if it has no
// metadata once its lock is held (a Create in progress holds it until
// the metadata is durable). Nothing waits for it.
func (s *Store) removeAbandoned(id string) {
	name := "u" + id
	updir := s.uploadDir(id)
	s.locks.acquire(name, exclusive, func() {
		s.readMeta(updir, func(_ meta, err error) {
			if !errors.Is(err, engine.ErrNotFound) {
				s.locks.release(name)
				return
			}
			s.removeUploadDir(updir, func() { s.locks.release(name) })
		})
	})
}
