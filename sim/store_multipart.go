package sim

import (
	"bytes"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// upload is one multipart upload: in progress while active, then kept
// only as long as listings still show it.
type upload struct {
	key, id         string
	initiatedUnixMs int64
	// parts by number. INVARIANT: nil once !active.
	parts map[int32]part
	// active is true until Complete or Abort.
	// INVARIANT: once false, stays false.
	active bool
	// visibleAt / lingerUntil: as for entry (store_list.go).
	visibleAt, lingerUntil time.Duration
}

// part is one uploaded part. INVARIANT: body is never modified in place.
type part struct {
	body []byte
	sum  [16]byte
}

// partsMax is S3's largest part number.
const partsMax = 10000

func (u *upload) info() engine.Upload {
	return engine.Upload{Key: u.key, UploadID: u.id, InitiatedUnixMs: u.initiatedUnixMs}
}

func (u *upload) listed(now time.Duration) bool {
	if u.active {
		return now >= u.visibleAt
	}
	return now < u.lingerUntil
}

// CreateMultipartUpload implements engine.ObjectStore.
func (c *storeClient) CreateMultipartUpload(key string, done func(uploadID string, err error)) {
	var id string
	c.s.submit(c.inc, OpCreateUpload, key, 0, func() error {
		id = c.s.createUpload(key)
		return nil
	}, func(err error) {
		if err != nil {
			id = ""
		}
		done(id, err)
	})
}

// createUpload starts an upload with a fresh opaque id. Ids are random
// (from the id stream) rather than sequential so the engine cannot come to
// rely on upload ids sorting in creation order.
func (s *Store) createUpload(key string) string {
	id := ""
	for id == "" || s.uploads[id] != nil {
		id = strconv.FormatUint(s.idRand.Uint64(), 36)
	}
	now := s.sched.now
	u := &upload{
		key: key, id: id, initiatedUnixMs: s.sched.WallUnixMs(),
		parts: make(map[int32]part), active: true,
		visibleAt: now + s.lagRand.Duration(s.cfg.ListLagMin, s.cfg.ListLagMax),
	}
	i, _ := slices.BinarySearchFunc(s.uploadOrder, u, compareUploads)
	s.uploadOrder = slices.Insert(s.uploadOrder, i, u)
	s.uploads[id] = u
	return id
}

func compareUploads(a, b *upload) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// activeUpload returns the upload if it is in progress for key.
func (s *Store) activeUpload(key, id string) *upload {
	u := s.uploads[id]
	if u == nil || !u.active || u.key != key {
		return nil
	}
	return u
}

// UploadPart implements engine.ObjectStore. The body is copied at issue
// and checked at completion, as for PutObject.
func (c *storeClient) UploadPart(key, uploadID string, n int32, body []byte, done func(etag string, err error)) {
	sent := bytes.Clone(body)
	var etag string
	c.s.submitUpload(c.inc, OpUploadPart, key, uploadID, len(sent), func() error {
		var err error
		etag, err = c.s.uploadPart(key, uploadID, n, sent)
		return err
	}, func(err error) {
		mustBeUnchanged(OpUploadPart, key, body, sent)
		if err != nil {
			etag = ""
		}
		done(etag, err)
	})
}

func (s *Store) uploadPart(key, id string, n int32, body []byte) (string, error) {
	u := s.activeUpload(key, id)
	if u == nil {
		return "", engine.ErrNoSuchUpload
	}
	if n < 1 || n > partsMax {
		return "", ErrInvalidPart
	}
	if body == nil {
		body = []byte{}
	}
	p := part{body: body, sum: contentHash(body)}
	u.parts[n] = p
	return quoteHex(p.sum[:]), nil
}

// CompleteMultipartUpload implements engine.ObjectStore. The parts list
// is copied at issue.
func (c *storeClient) CompleteMultipartUpload(key, uploadID string, parts []engine.CompletedPart, done func(err error)) {
	list := slices.Clone(parts)
	c.s.submitUpload(c.inc, OpComplete, key, uploadID, 0, func() error {
		return c.s.completeUpload(key, uploadID, list)
	}, done)
}

// completeUpload assembles the parts, in order, into the object at key.
func (s *Store) completeUpload(key, id string, list []engine.CompletedPart) error {
	u := s.activeUpload(key, id)
	if u == nil {
		return engine.ErrNoSuchUpload
	}
	body, etag, err := u.assemble(list, s.cfg.PartSizeMin)
	if err != nil {
		return err
	}
	s.write(key, body, etag)
	s.finishUpload(u)
	return nil
}

// assemble checks the parts list as S3 does and returns the object body
// and its multipart ETag: the MD5 of the concatenated part MD5s, "-N".
func (u *upload) assemble(list []engine.CompletedPart, partSizeMin int) ([]byte, string, error) {
	if len(list) == 0 {
		return nil, "", ErrInvalidPart
	}
	size := 0
	sums := make([]byte, 0, 16*len(list))
	for i, cp := range list {
		p, ok := u.parts[cp.Number]
		if !ok || cp.ETag != quoteHex(p.sum[:]) || (i > 0 && cp.Number <= list[i-1].Number) {
			return nil, "", ErrInvalidPart
		}
		if i < len(list)-1 && len(p.body) < partSizeMin {
			return nil, "", ErrInvalidPart
		}
		size += len(p.body)
		sums = append(sums, p.sum[:]...)
	}
	body := make([]byte, 0, size)
	for _, cp := range list {
		body = append(body, u.parts[cp.Number].body...)
	}
	sum := contentHash(sums)
	etag := `"` + hex.EncodeToString(sum[:]) + "-" + strconv.Itoa(len(list)) + `"`
	return body, etag, nil
}

// AbortMultipartUpload implements engine.ObjectStore.
func (c *storeClient) AbortMultipartUpload(key, uploadID string, done func(err error)) {
	c.s.submit(c.inc, OpAbort, key, 0, func() error {
		u := c.s.activeUpload(key, uploadID)
		if u == nil {
			return engine.ErrNoSuchUpload
		}
		c.s.finishUpload(u)
		return nil
	}, done)
}

// finishUpload ends an upload; it lingers in listings if it was listed.
func (s *Store) finishUpload(u *upload) {
	now := s.sched.now
	visible := u.listed(now)
	u.active, u.parts = false, nil
	if visible {
		u.lingerUntil = now + s.lagRand.Duration(s.cfg.ListLingerMin, s.cfg.ListLingerMax)
	}
	if u.lingerUntil > now {
		s.lingering++
		return
	}
	i, found := slices.BinarySearchFunc(s.uploadOrder, u, compareUploads)
	if !found {
		panic("sim: finished upload missing from the listing order: " + u.id)
	}
	s.uploadOrder = slices.Delete(s.uploadOrder, i, i+1)
	delete(s.uploads, u.id)
}
