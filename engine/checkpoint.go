package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// checkpointing is the offsets checkpoint's state; what is durable where
// is in admission.committed and admission.keys.
type checkpointing struct {
	ckptWriting   bool // a write round is running; INVARIANT: one at a time (writeCheckpoint)
	ckptScheduled bool
	// ckptWaiters wait for the checkpoint to cover their offsets.
	// INVARIANT: none waits with no round running or scheduled (check).
	ckptWaiters []checkpointWaiter
}

// check: a waiter always has a round running or scheduled to answer it.
func (c *checkpointing) check() error {
	if len(c.ckptWaiters) > 0 && !c.ckptWriting && !c.ckptScheduled {
		return invariantError("a checkpoint waiter has a round running or scheduled: %d waiting, none", len(c.ckptWaiters))
	}
	return nil
}

// The offsets checkpoint keeps committed progress durable once the
// segments that committed it are reclaimed: a reclaim deletes a segment
// only after the checkpoint covers its offsets (reclaim.go). It is two
// stores written in one round:
//
//	{root}/_offsets  the source offsets (offsets_view.go; segment.EncodeCheckpoint)
//	{root}/_idem/…   the idempotency keys (keystore.go, keystore_io.go)
//
// Writes are coalesced: a reclaim waits for its segment's offsets
// (ensureCheckpoint); the first waiter schedules a round CheckpointDelay
// later (0 while closing), and that round serves every reclaim meanwhile.
// A round writes a run of new keys for every bucket that has some
// (RecoveryConcurrency at a time), then _offsets if its source offsets
// changed — in that order, so that an old-format _offsets, which held
// idempotency keys, is rewritten without them only once they are durable
// in the key store. Waiters whose offsets are all durable are then
// released, and the round ends with at most one merge of runs
// (keystore_merge.go).
//
// _offsets is written conditional on the version last read or written
// (If-Match; If-None-Match when none is known), so two writers (a
// superseded one still running) only ever add: a refused or unheard write
// re-reads it and max-merges it into the view, and the round is tried
// again after a backoff.
//
// A bucket of keys whose end is more than IdempotencyWindow ago expires:
// it is dropped from memory and its objects deleted, once, best effort;
// the sweeper deletes what that misses.
//
// Recovery reads _offsets and, by name, the manifest of every bucket from
// one before the oldest that can hold an unexpired key to one after the
// current one (margins for clock skew between incarnations), then the
// meta of every run they list: GET is read-after-write consistent where
// LIST is not, and a missing object is an empty one. The bucket width
// must not change between incarnations (a different IdempotencyWindow
// names other buckets: recovery would not find the keys of the last
// window).

type checkpointWaiter struct {
	want segment.Offsets
	done func()
}

// ensureCheckpoint calls done once the checkpoint durably covers want
// (an idempotency key that expired meanwhile needs nothing).
func (e *Engine) ensureCheckpoint(want segment.Offsets, done func()) {
	if e.checkpointCovers(want) {
		done()
		return
	}
	e.ckptWaiters = append(e.ckptWaiters, checkpointWaiter{want: want, done: done})
	e.scheduleCheckpoint()
	e.checkCheckpointing()
}

// checkCheckpointing runs the checkpoint stage's check.
func (e *Engine) checkCheckpointing() bool { return e.invariantHolds(e.checkpointing.check()) }

// checkpointCovers reports whether every offset of want is durable: a
// source offset in _offsets, an idempotency key in the key store.
func (e *Engine) checkpointCovers(want segment.Offsets) bool {
	for _, o := range want {
		if k, ok := strings.CutPrefix(o.Key, idemPrefix); ok {
			if !e.keys.durable(segment.KeyHashOf(k), o.Value, e.idemCutoff()) {
				return false
			}
		} else if !e.committed.durable(segment.Offsets{o}) {
			return false
		}
	}
	return true
}

// mergeCommitted max-merges the offsets of a committed segment: source
// offsets into the view, idempotency keys into the key store.
func (e *Engine) mergeCommitted(o segment.Offsets) {
	src := o
	if slices.ContainsFunc(o, isIdemOffset) {
		src = nil
		for _, x := range o {
			if k, ok := strings.CutPrefix(x.Key, idemPrefix); ok {
				e.keys.add(segment.KeyHashOf(k), x.Value)
			} else {
				src = append(src, x)
			}
		}
	}
	e.committed.merge(src)
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
		if !e.ckptScheduled {
			e.broken("a scheduled checkpoint round fires once: fired with none scheduled, a round running %t, %d waiting", e.ckptWriting, len(e.ckptWaiters))
			return
		}
		e.ckptScheduled = false
		if !e.ckptWriting && e.state != stateFailed {
			e.writeCheckpoint(0)
		}
	})
}

// writeCheckpoint runs one round: the key buckets, then _offsets.
func (e *Engine) writeCheckpoint(attempt int) {
	if e.state == stateFailed {
		return
	}
	if e.ckptWriting != (attempt > 0) { // INVARIANT: one round at a time; a retry continues its round
		e.broken("one checkpoint round at a time: attempt %d starts with a round running %t", attempt, e.ckptWriting)
		return
	}
	e.ckptWriting = true
	e.expireKeys()
	e.writeKeyBuckets(func(ok bool) {
		if !e.ckptWriting {
			e.broken("a round's key buckets land while the round runs: attempt %d, round running false", attempt)
			return
		}
		// ok: every key recent when the round began is durable — those of
		// an old-format _offsets, read at recovery, among them.
		if ok && e.committed.dirty() {
			e.writeSources(func(ok bool) { e.roundDone(attempt, ok) })
			return
		}
		e.roundDone(attempt, ok)
	})
}

func (e *Engine) roundDone(attempt int, ok bool) {
	if !e.ckptWriting || attempt < 0 {
		e.broken("a checkpoint round ends while it runs: attempt %d, round running %t", attempt, e.ckptWriting)
		return
	}
	if !ok {
		e.failing(troubleCheckpoint, fmt.Errorf("checkpoint round attempt %d did not land (the store's own troubles say why)", attempt+1))
		// A merge may be what the round lacks (a bucket's manifest full).
		e.mergeKeys(func() {
			e.p.Timers.AfterFunc(e.backoff(min(attempt, AttemptsMax)), func() { e.writeCheckpoint(attempt + 1) })
		})
		return
	}
	e.succeeded(troubleCheckpoint)
	waiting := e.ckptWaiters
	e.ckptWaiters = nil
	var again []checkpointWaiter
	for _, w := range waiting {
		if e.checkpointCovers(w.want) {
			w.done()
		} else {
			again = append(again, w) // changed during the round
		}
	}
	e.ckptWaiters = append(again, e.ckptWaiters...)
	e.mergeKeys(func() {
		if !e.ckptWriting {
			e.broken("a checkpoint round ends once: attempt %d ended with no round running, %d waiting", attempt, len(e.ckptWaiters))
			return
		}
		e.ckptWriting = false
		if len(e.ckptWaiters) > 0 && e.state != stateFailed {
			e.scheduleCheckpoint()
			e.checkCheckpointing()
		}
	})
}

// writeSources puts _offsets, conditional on the version last seen. A
// refused or unheard write re-reads the object into the view (so the
// next attempt holds both writers' keys) and reports false. done is not
// called once the engine has failed closed.
func (e *Engine) writeSources(done func(landed bool)) {
	v := e.committed
	key := e.layout.CheckpointKey()
	if !e.ckptWriting {
		e.broken("_offsets is written inside a checkpoint round: %s written with no round running", key)
		return
	}
	if len(v.flight) > 0 { // beginWrite REQUIRES it; fail closed rather than panic
		e.broken("one write of _offsets at a time: %s written while %d keys of another write are in flight", key, len(v.flight))
		return
	}
	body, err := segment.EncodeCheckpoint(e.epoch, v.beginWrite())
	if err != nil {
		v.endWrite(false)
		err = fmt.Errorf("offsets checkpoint %s: %w", key, err)
		e.failClosed(err) // raises the alert
		return
	}
	in := PutObjectInput{Key: key, Body: body, IfMatch: v.etag, IfNoneMatch: v.etag == ""}
	answered := false
	e.p.Store.PutObject(in, func(etag string, err error) {
		if answered {
			// The store answers a request once: a second answer would end
			// the view's write twice and the round's attempt twice.
			e.broken("a write of _offsets answers once: %s answered again with %v", key, err)
			return
		}
		answered = true
		if err == nil {
			v.etag = etag
			v.endWrite(true)
			done(true)
			return
		}
		e.mark(MarkCheckpointConflict)
		v.endWrite(false)
		e.readSources(v, e.keys, func(err error) {
			if errors.Is(err, ErrCorrupt) {
				// Merging is impossible, and overwriting would lose what
				// it holds. failClosed raises the alert.
				e.failClosed(err)
				return
			}
			if e.state != stateFailed {
				done(false)
			}
		})
	})
}

// readSources GETs _offsets and max-merges it into v (its idempotency
// keys, in the old format, into s), noting its version. A missing object
// is an empty one (version ""); if it existed before, whatever v thought
// durable in it is not.
func (e *Engine) readSources(v *offsetsView, s *keyStore, done func(error)) {
	key := e.layout.CheckpointKey()
	if len(v.flight) > 0 {
		// What is read merges into the view: keys of a write in flight
		// would be judged durable, or lost, against the wrong version.
		e.broken("_offsets is read into a view with no write in flight: %s read while %d keys are in flight", key, len(v.flight))
		done(e.err)
		return
	}
	var o segment.Offsets
	in := GetObjectInput{Key: key, Limit: segment.CheckpointBytesMax}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		_, o, err = segment.DecodeCheckpoint(key, raw)
		return err
	}, func(_ []byte, info ObjectInfo, err error) {
		switch {
		case errors.Is(err, ErrNotFound):
			if v.etag != "" {
				v.objectLost()
			}
			v.etag = ""
			done(nil)
		case err != nil:
			done(fmt.Errorf("read offsets checkpoint %s: %w", key, err))
		default:
			v.reserve(len(o))
			if idem := v.mergeObject(o); len(idem) > 0 {
				e.mark(MarkCheckpointOldFormat)
				addLegacyKeys(s, idem)
			}
			v.etag = info.ETag
			done(nil)
		}
	})
}

// readCheckpoint reads the checkpoint into a new view and key store, for
// recovery: _offsets, then the key buckets.
func (e *Engine) readCheckpoint(done func(*offsetsView, *keyStore, error)) {
	v, s := newOffsetsView(), newKeyStore(e.cfg.IdempotencyWindow)
	v.inv, s.inv = e.failClosed, e.failClosed
	e.readSources(v, s, func(err error) {
		if err != nil {
			done(v, s, err)
			return
		}
		e.readKeyStore(s, func(err error) { done(v, s, err) })
	})
}

// idemBucketsToRead is the range of buckets recovery reads: from one
// before the bucket of now − window to one after the bucket of now: at
// most ⌈window / width⌉ + 3 buckets.
func (e *Engine) idemBucketsToRead(s *keyStore) (lo, hi int64) {
	now := max(e.p.Clock.WallUnixMs(), 0)
	lo = max(s.bucketOf(uint64(max(e.idemCutoff(), 0)))-1, 0)
	return lo, s.bucketOf(uint64(now)) + 1
}

// idemCutoff is the wall time before which idempotency keys expire.
func (e *Engine) idemCutoff() int64 {
	return e.p.Clock.WallUnixMs() - e.cfg.IdempotencyWindow.Milliseconds()
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
			if !young && page.NextToken != "" && page.NextToken == token {
				e.broken("a LIST page moves on: %s gave next token %q for token %q", e.layout.IdemBucketsPrefix(), page.NextToken, token)
				return
			}
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
	first := e.keys.firstLive(wall - ageMs)
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
