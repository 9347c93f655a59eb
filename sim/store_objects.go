package sim

import (
	"bytes"
	"encoding/hex"
	"github.com/zeebo/xxh3"
	"strconv"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// storeClient is one incarnation's engine.ObjectStore.
type storeClient struct {
	s   *Store
	inc *Incarnation
}

// entry is one key of the bucket: the object it holds, if any, and its
// listing visibility (store_list.go).
type entry struct {
	// present is true while the key exists (the truth).
	present bool
	// body, etag and modifiedUnixMs describe the current object when
	// present, and the last one (for lingering listings) when not.
	// INVARIANT: body is never modified in place.
	body           []byte
	etag           string
	modifiedUnixMs int64
	// visibleAt: a present key is listed from this time on.
	visibleAt time.Duration
	// lingerUntil: a deleted key is listed until this time.
	lingerUntil time.Duration
	// sound: the bytes before corruption at rest (Rot) damaged body; nil
	// if it was not damaged since it was last written.
	sound []byte
}

func (e *entry) info(key string) engine.ObjectInfo {
	return engine.ObjectInfo{Key: key, Size: int64(len(e.body)), ETag: e.etag, LastModifiedUnixMs: e.modifiedUnixMs}
}

// PutObject implements engine.ObjectStore. The body is copied at issue
// (the bytes are "on the wire") and compared with the caller's buffer at
// completion: a changed buffer means the engine broke the borrow rule.
func (c *storeClient) PutObject(in engine.PutObjectInput, done func(etag string, err error)) {
	body := bytes.Clone(in.Body)
	var etag string
	c.s.submit(c.inc, OpPut, in.Key, len(body), func() error {
		var err error
		etag, err = c.s.put(in.Key, body, in.IfNoneMatch, in.IfMatch)
		return err
	}, func(err error) {
		mustBeUnchanged(OpPut, in.Key, in.Body, body)
		if err != nil {
			etag = ""
		}
		done(etag, err)
	})
}

// put applies a (conditional) PUT atomically.
func (s *Store) put(key string, body []byte, ifNoneMatch bool, ifMatch string) (string, error) {
	e := s.entries[key]
	exists := e != nil && e.present
	if ifNoneMatch && exists {
		return "", engine.ErrPreconditionFailed
	}
	if ifMatch != "" && (!exists || e.etag != ifMatch) {
		return "", engine.ErrPreconditionFailed
	}
	etag := bodyETag(body)
	s.write(key, body, etag)
	return etag, nil
}

// GetObject implements engine.ObjectStore.
// REQUIRES: in.Limit > 0.
func (c *storeClient) GetObject(in engine.GetObjectInput, done func(body []byte, info engine.ObjectInfo, err error)) {
	if in.Limit <= 0 {
		panic("sim: GetObject " + in.Key + ": Limit must be > 0, got " + strconv.FormatInt(in.Limit, 10))
	}
	var rng *engine.ByteRange
	if in.Range != nil {
		r := *in.Range
		rng = &r
	}
	var body []byte
	var info engine.ObjectInfo
	size := 0 // what travels back: the range, not the whole object
	if e := c.s.entries[in.Key]; e != nil && e.present {
		size = len(e.body)
		if rng != nil {
			size = int(max(min(int64(size)-rng.Start, rng.Length), 0))
		}
	}
	c.s.submit(c.inc, OpGet, in.Key, size, func() error {
		var err error
		body, info, err = c.s.get(in.Key, rng, in.Limit)
		if err == nil {
			body = c.s.maybeCorrupt(in.Key, body)
		}
		return err
	}, func(err error) {
		if err != nil {
			body, info = nil, engine.ObjectInfo{}
		}
		done(body, info, err)
	})
}

// get reads the truth. The returned body shares the stored bytes, capped
// at its end so an append cannot reach them: stored bodies are never
// written in place (put and corruption at rest replace them), and an
// engine that wrote into a GET's answer would damage the stored object,
// which the oracle's digests report — a loud failure, never a hidden one.
func (s *Store) get(key string, rng *engine.ByteRange, limit int64) ([]byte, engine.ObjectInfo, error) {
	e := s.entries[key]
	if e == nil || !e.present {
		return nil, engine.ObjectInfo{}, engine.ErrNotFound
	}
	start, end := int64(0), int64(len(e.body))
	if rng != nil {
		if rng.Start < 0 || rng.Length <= 0 || rng.Start >= end {
			return nil, engine.ObjectInfo{}, ErrInvalidRange
		}
		start = rng.Start
		end = min(end, rng.Start+rng.Length) // S3 clips a range at the end
	}
	if end-start > limit {
		return nil, engine.ObjectInfo{}, engine.ErrTooLarge
	}
	if e.sound != nil && !bytes.Equal(e.sound[start:end], e.body[start:end]) {
		s.rotten = append(s.rotten, key)
	}
	return e.body[start:end:end], e.info(key), nil
}

// maybeCorrupt damages a GET's answer when the fault plan says so.
func (s *Store) maybeCorrupt(key string, body []byte) []byte {
	rc, ok := s.cfg.Faults.(ReadCorrupter)
	if !ok || strings.HasPrefix(key, landingRoot) {
		// The objects source checks no body against a checksum (the S3
		// client validates response checksums in production): its reads
		// are spared, or a flipped byte would pass as data.
		return body
	}
	if param, bad := rc.CorruptRead(key); bad {
		s.counts[OpGet].Corrupted++
		return CorruptBytes(bytes.Clone(body), param)
	}
	return body
}

// HeadObject implements engine.ObjectStore.
func (c *storeClient) HeadObject(key string, done func(info engine.ObjectInfo, err error)) {
	var info engine.ObjectInfo
	c.s.submit(c.inc, OpHead, key, 0, func() error {
		e := c.s.entries[key]
		if e == nil || !e.present {
			return engine.ErrNotFound
		}
		info = e.info(key)
		return nil
	}, func(err error) {
		if err != nil {
			info = engine.ObjectInfo{}
		}
		done(info, err)
	})
}

// DeleteObject implements engine.ObjectStore.
func (c *storeClient) DeleteObject(key string, done func(err error)) {
	c.s.submit(c.inc, OpDelete, key, 0, func() error {
		c.s.remove(key)
		return nil
	}, done)
}

// write makes body the object at key (create or overwrite).
func (s *Store) write(key string, body []byte, etag string) {
	e := s.entries[key]
	now := s.sched.now
	switch {
	case e == nil:
		e = &entry{visibleAt: now + s.lagRand.Duration(s.cfg.ListLagMin, s.cfg.ListLagMax)}
		s.insertKey(key, e)
	case !e.present && e.listed(now):
		e.visibleAt = now // still in the listing: recreating keeps it there
		s.lingering--
	case !e.present:
		e.visibleAt = now + s.lagRand.Duration(s.cfg.ListLagMin, s.cfg.ListLagMax)
		s.lingering--
	}
	if body == nil {
		body = []byte{}
	}
	e.present, e.body, e.etag, e.modifiedUnixMs, e.sound = true, body, etag, s.sched.WallUnixMs(), nil
}

// Rot replaces a present object's bytes in place in the truth, as a
// medium that rotted would (corruption at rest): same key, size and ETag.
// A GET answered with damaged bytes of it is remembered (RottenReads).
func (s *Store) Rot(key string, damage func([]byte) []byte) bool {
	e := s.entries[key]
	if e == nil || !e.present || len(e.body) == 0 {
		return false
	}
	if e.sound == nil {
		e.sound = e.body
	}
	e.body = damage(bytes.Clone(e.body))
	return true
}

// RottenReads lists the keys whose GET was answered with bytes corruption
// at rest had damaged, in order.
func (s *Store) RottenReads() []string { return s.rotten }

// remove deletes key; deleting a missing key is a no-op.
func (s *Store) remove(key string) {
	e := s.entries[key]
	if e == nil || !e.present {
		return
	}
	now := s.sched.now
	visible := e.listed(now)
	e.present = false
	if !visible {
		s.removeKey(key) // never listed yet: it never will be
		return
	}
	e.lingerUntil = now + s.lagRand.Duration(s.cfg.ListLingerMin, s.cfg.ListLingerMax)
	if e.lingerUntil == now {
		s.removeKey(key)
		return
	}
	s.lingering++
}

// bodyETag is a single-PUT object's ETag: the quoted hex of a 128-bit
// hash of the body, shaped like S3's MD5 ETag. The engine never relies on
// how an ETag is computed, so the model uses a hash that costs nothing
// next to the simulated work.
func bodyETag(body []byte) string {
	sum := contentHash(body)
	return quoteHex(sum[:])
}

func contentHash(b []byte) [16]byte { return xxh3.Hash128(b).Bytes() }

func quoteHex(b []byte) string {
	out := make([]byte, 0, 2+2*len(b)+8)
	out = append(out, '"')
	out = hex.AppendEncode(out, b)
	return string(append(out, '"'))
}

// mustBeUnchanged panics if the engine modified a buffer it lent to a
// request still in flight (engine/ports.go: borrowed until done).
func mustBeUnchanged(op Op, key string, lent, sent []byte) {
	if !bytes.Equal(lent, sent) {
		panic("sim: engine modified the body of " + op.String() + " " + key +
			" while the request was in flight (buffers are borrowed until done)")
	}
}

// Remove deletes key from the truth at once, as if another client's
// DELETE had just landed (tests that model a foreign writer).
func (s *Store) Remove(key string) {
	s.remove(key)
	if s.OnApply != nil {
		s.OnApply(OpDelete, key)
	}
}
