package engine

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// The offsets checkpoint keeps the offsets view (offsets_view.go)
// durable once the segments that committed it are reclaimed: a reclaim
// deletes a segment only after the checkpoint covers its offsets
// (reclaim.go). It is several objects in one format
// (segment.EncodeCheckpoint):
//
//	{root}/_offsets        the source offsets (keys without idem/)
//	{root}/_idem/{bucket}  the idempotency keys submitted in one bucket
//
// A bucket spans IdemBucketWidth (IdempotencyWindow /
// IdemBucketsPerWindow) of wall time. New keys land in the newest bucket,
// so a write round rewrites _offsets and a bucket or two, however many
// keys the window holds; and expiry drops whole buckets.
//
// Writes are coalesced: a reclaim waits for its segment's offsets
// (ensureCheckpoint); the first waiter schedules a round CheckpointDelay
// later (0 while closing), and that round serves every reclaim meanwhile.
// A round writes every dirty bucket (RecoveryConcurrency at a time), then
// _offsets if its source offsets changed — in that order, so that an
// old-format _offsets, which held every idempotency key, is rewritten
// without them only once they are durable in their buckets. When it is
// over, waiters whose offsets are all durable are released.
//
// Every write is conditional on the version of the object last read or
// written (If-Match; If-None-Match when none is known), so two writers (a
// superseded one still running) only ever add: a refused or unheard write
// re-reads its object and max-merges it into the view, and the round is
// tried again after a backoff.
//
// A bucket whose end is more than IdempotencyWindow ago expires: it is
// dropped from the view and its object deleted, once, best effort; a
// retry later than that is a new unit. The sweeper (sweepIdemBuckets)
// deletes bucket objects a crash left behind or a late write put back.
//
// Recovery reads _offsets and, by name, every bucket from one before the
// oldest that can hold an unexpired key to one after the current one
// (margins for clock skew between incarnations): GET is read-after-write
// consistent where LIST is not, and a missing bucket is an empty one.
// The bucket width must not change between incarnations (a different
// IdempotencyWindow names other buckets: recovery would not find the
// keys of the last window).

type checkpointWaiter struct {
	want segment.Offsets
	done func()
}

// ensureCheckpoint calls done once the checkpoint durably covers want
// (an idempotency key that expired meanwhile needs nothing).
func (e *Engine) ensureCheckpoint(want segment.Offsets, done func()) {
	if e.committed.durable(want, e.idemCutoff()) {
		done()
		return
	}
	e.ckptWaiters = append(e.ckptWaiters, checkpointWaiter{want: want, done: done})
	e.scheduleCheckpoint()
}

func (e *Engine) scheduleCheckpoint() {
	if e.ckptWriting || e.ckptScheduled {
		return
	}
	e.ckptScheduled = true
	delay := e.cfg.CheckpointDelay
	if e.state == stateClosing {
		delay = 0 // nothing more will be coalesced: do not hold the close
	}
	e.p.Timers.AfterFunc(delay, func() {
		e.ckptScheduled = false
		if !e.ckptWriting && e.state != stateFailed {
			e.writeCheckpoint(0)
		}
	})
}

// writeCheckpoint runs one round: the dirty buckets, then _offsets.
func (e *Engine) writeCheckpoint(attempt int) {
	if e.state == stateFailed {
		return
	}
	if e.ckptWriting != (attempt > 0) { // INVARIANT: one round at a time; a retry continues its round
		e.broken("one checkpoint round at a time: attempt %d starts with a round running %t", attempt, e.ckptWriting)
		return
	}
	e.ckptWriting = true
	e.expireIdempotencyKeys()
	e.writeParts(e.committed.dirtyBuckets(), func(ok bool) {
		if ok && e.committed.sources.dirty() {
			e.writeParts([]*viewPart{e.committed.sources}, func(ok bool) { e.roundDone(attempt, ok) })
			return
		}
		e.roundDone(attempt, ok)
	})
}

func (e *Engine) roundDone(attempt int, ok bool) {
	if !ok {
		e.p.Timers.AfterFunc(e.backoff(min(attempt, AttemptsMax)), func() { e.writeCheckpoint(attempt + 1) })
		return
	}
	e.ckptWriting = false
	cutoff := e.idemCutoff()
	waiting := e.ckptWaiters
	e.ckptWaiters = nil
	var again []checkpointWaiter
	for _, w := range waiting {
		if e.committed.durable(w.want, cutoff) {
			w.done()
		} else {
			again = append(again, w) // changed during the round
		}
	}
	if len(again) > 0 {
		e.ckptWaiters = append(again, e.ckptWaiters...)
		e.scheduleCheckpoint()
	}
}

// writeParts writes the parts' objects; ok reports that all landed.
// done is not called once the engine has failed closed.
func (e *Engine) writeParts(parts []*viewPart, done func(ok bool)) {
	ok := true
	e.forEach(len(parts), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		e.writePart(parts[i], func(landed bool) {
			ok = ok && landed
			d(nil)
		})
	}, func(error) {
		if e.state != stateFailed {
			done(ok)
		}
	})
}

// writePart puts p's object, conditional on the version last seen. A
// refused or unheard write re-reads the object into the view (so the
// next attempt holds both writers' keys) and reports false.
func (e *Engine) writePart(p *viewPart, done func(landed bool)) {
	v := e.committed
	if !v.live(p) {
		done(true) // expired since the round began: nothing to keep
		return
	}
	key := e.partKey(p)
	if len(p.flight) > 0 { // beginWrite REQUIRES it; fail closed rather than panic
		e.broken("one write per checkpoint object at a time: %s written while %d keys of another write are in flight", key, len(p.flight))
		done(false)
		return
	}
	body, err := segment.EncodeCheckpoint(e.epoch, v.beginWrite(p))
	if err != nil {
		v.endWrite(p, false)
		err = fmt.Errorf("offsets checkpoint %s: %w", key, err)
		e.alert(err)
		e.failClosed(err)
		done(false)
		return
	}
	in := PutObjectInput{Key: key, Body: body, IfMatch: p.etag, IfNoneMatch: p.etag == ""}
	e.p.Store.PutObject(in, func(etag string, err error) {
		if err == nil {
			p.etag = etag
			v.endWrite(p, true)
			done(true)
			return
		}
		e.mark(MarkCheckpointConflict)
		v.endWrite(p, false)
		e.readPart(v, p, func(err error) {
			if errors.Is(err, ErrCorrupt) {
				e.alert(err) // merging is impossible, and overwriting would lose what it holds
				e.failClosed(err)
			}
			done(false)
		})
	})
}

func (e *Engine) partKey(p *viewPart) string {
	if p.bucket == sourcesPart {
		return e.layout.CheckpointKey()
	}
	return e.layout.IdemBucketKey(p.bucket)
}

// readPart GETs p's object, max-merges it into v and notes its version.
func (e *Engine) readPart(v *offsetsView, p *viewPart, done func(error)) {
	e.fetchPart(p, func(r partRead) { done(e.settlePart(v, p, r)) })
}

// partRead is what a GET of one checkpoint object found.
type partRead struct {
	o    segment.Offsets
	etag string
	err  error // ErrNotFound: no object
}

// fetchPart GETs and decodes p's object.
func (e *Engine) fetchPart(p *viewPart, done func(partRead)) {
	key := e.partKey(p)
	var o segment.Offsets
	in := GetObjectInput{Key: key, Limit: segment.CheckpointBytesMax}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		_, o, err = segment.DecodeCheckpoint(key, raw)
		return err
	}, func(_ []byte, info ObjectInfo, err error) {
		if err != nil && !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("read offsets checkpoint %s: %w", key, err)
		}
		done(partRead{o: o, etag: info.ETag, err: err})
	})
}

// settlePart merges what fetchPart found into v. A missing object is an
// empty one (version ""); if p's object existed before, whatever the view
// thought durable in it is not.
func (e *Engine) settlePart(v *offsetsView, p *viewPart, r partRead) error {
	switch {
	case errors.Is(r.err, ErrNotFound):
		if p.etag != "" {
			v.objectLost(p)
		}
		p.etag = ""
		return nil
	case r.err != nil:
		return r.err
	}
	v.mergeObject(r.o, p)
	p.etag = r.etag
	if p.stale && p.bucket == sourcesPart {
		e.mark(MarkCheckpointOldFormat)
	}
	return nil
}

// readCheckpoint reads the checkpoint into a new view, for recovery:
// _offsets and the buckets idemBucketsToRead names, RecoveryConcurrency
// GETs at a time. The objects are merged once all are read, in part
// order, into a map sized for all their keys: recovery costs the keys of
// the window, and growing the map through them would rehash it a dozen
// times.
func (e *Engine) readCheckpoint(done func(*offsetsView, error)) {
	v := newOffsetsView(e.cfg.IdempotencyWindow)
	v.inv = e.failClosed
	parts := []*viewPart{v.sources}
	lo, hi := e.idemBucketsToRead(v)
	for b := lo; b <= hi; b++ {
		parts = append(parts, v.part(b))
	}
	reads := make([]partRead, len(parts))
	e.forEach(len(parts), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		e.fetchPart(parts[i], func(r partRead) {
			reads[i] = r
			if errors.Is(r.err, ErrNotFound) {
				d(nil)
				return
			}
			d(r.err)
		})
	}, func(err error) {
		if err != nil {
			done(v, err)
			return
		}
		keys := 0
		for _, r := range reads {
			keys += len(r.o)
		}
		v.reserve(keys)
		for i, r := range reads {
			if err := e.settlePart(v, parts[i], r); err != nil {
				done(v, err)
				return
			}
		}
		done(v, nil)
	})
}

// idemBucketsToRead is the range of buckets recovery reads: from one
// before the bucket of now − window to one after the bucket of now: at
// most ⌈window / width⌉ + 3 buckets.
func (e *Engine) idemBucketsToRead(v *offsetsView) (lo, hi int64) {
	now := max(e.p.Clock.WallUnixMs(), 0)
	lo = max(v.bucketOf(uint64(max(e.idemCutoff(), 0)))-1, 0)
	return lo, v.bucketOf(uint64(now)) + 1
}

// idemCutoff is the wall time before which idempotency keys expire.
func (e *Engine) idemCutoff() int64 {
	return e.p.Clock.WallUnixMs() - e.cfg.IdempotencyWindow.Milliseconds()
}

// expireIdempotencyKeys drops the expired buckets and deletes the
// objects of those that had one, once each: a failure, or a write of
// ours still in flight landing afterwards, leaves the object to the
// sweeper.
func (e *Engine) expireIdempotencyKeys() {
	dropped, keys := e.committed.expire(e.idemCutoff())
	if keys > 0 {
		e.mark(MarkIdempotencyExpired)
	}
	for _, p := range dropped {
		if p.etag != "" {
			e.p.Store.DeleteObject(e.layout.IdemBucketKey(p.bucket), func(error) {})
		}
	}
}

// sweepIdemBuckets deletes bucket objects that expired more than one
// bucket ago by name and were last written as long ago: what a crashed
// incarnation, or a write landing after expiry, left behind. Names sort
// by bucket, so the listing stops at the first one still young. One
// attempt each: the next sweep retries.
func (e *Engine) sweepIdemBuckets(token string) {
	e.p.Store.ListObjects(e.layout.IdemBucketsPrefix(), token, func(page ListPage, err error) {
		if err != nil || e.state == stateFailed {
			return
		}
		old, young := e.sweepableBuckets(page.Objects)
		e.forEach(len(old), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
			e.p.Store.DeleteObject(old[i], func(err error) {
				if err == nil {
					e.mark(MarkIdemBucketSwept)
				}
				d(nil)
			})
		}, func(error) {
			if !young && page.NextToken != "" {
				e.sweepIdemBuckets(page.NextToken)
			}
		})
	})
}

// sweepableBuckets picks the listed bucket objects to delete; young
// reports that the listing reached buckets too recent to delete.
func (e *Engine) sweepableBuckets(objs []ObjectInfo) (old []string, young bool) {
	wall := e.p.Clock.WallUnixMs()
	ageMs := e.cfg.IdempotencyWindow.Milliseconds() + IdemBucketWidth(e.cfg.IdempotencyWindow).Milliseconds()
	first := e.committed.firstLive(wall - ageMs)
	for _, o := range objs {
		b, ok := e.layout.ParseIdemBucketKey(o.Key)
		switch {
		case !ok:
			continue // not ours to judge
		case b >= first:
			return old, true
		case o.LastModifiedUnixMs+ageMs < wall:
			old = append(old, o.Key)
		}
	}
	return old, false
}
