package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// Completion bitmaps and reclaim (DESIGN.md §8).
//
// The bitmap of a segment that is still incomplete is written beside it
// ({id}.seg.scbl) BitmapDelay after a job finished, so that a restart —
// on this host or an empty one — continues from it. Writes of one segment
// never overlap and always carry every bit known (bits only get set), so
// a later write never clears what an earlier one recorded.
//
// Bitmap writes are conditional on the version last read or written
// (If-Match, If-None-Match for the first), so a delayed write of an older
// bitmap can never land over a newer one: a refused or unheard write
// re-reads the object, ORs its bits in, and writes again. Bits only ever
// get set, durably too.
//
// A fully applied segment is reclaimed: first its offsets are made durable
// in the offsets checkpoint (below) — they must outlive the segment — then
// the marker is deleted (the segment stops being owned), then the body,
// then the bitmap. A crash in between leaves a body or bitmap without a
// marker, which the sweeper (sweep.go) removes. A segment
// whose bitmap could not be read, or with a refused job, is never deleted.

// scheduleBitmap arranges a bitmap write for an incomplete segment.
func (e *Engine) scheduleBitmap(st *segState) {
	if st.flushCancel != nil || st.keep {
		return
	}
	st.flushCancel = e.p.Timers.AfterFunc(e.cfg.BitmapDelay, func() {
		st.flushCancel = nil
		e.writeBitmap(st)
	})
}

func (e *Engine) writeBitmap(st *segState) {
	if st.reclaiming || st.gone || e.state == stateFailed {
		return
	}
	if st.writing {
		st.dirty = true
		return
	}
	st.writing, st.dirty = true, false
	key := e.layout.Key(st.Dir, st.ID, KindBitmap)
	in := PutObjectInput{Key: key, Body: st.applied.Encode(), IfMatch: st.bitmapETag, IfNoneMatch: st.bitmapETag == ""}
	e.p.Store.PutObject(in, func(etag string, err error) {
		if err == nil {
			st.bitmapETag = etag
			st.writing = false
			if st.dirty {
				e.scheduleBitmap(st)
			}
			return
		}
		// Refused (the object is not the version we wrote last) or
		// unheard: read it, OR its bits into ours, write again later.
		e.mark(MarkBitmapConflict)
		e.readBitmap(st.Segment, func(b *segment.Bitmap, etag string, rerr error) {
			st.writing = false
			if rerr == nil && b != nil {
				_ = st.applied.Merge(b) // same segment: same length
				st.bitmapETag = etag
			}
			e.scheduleBitmap(st)
		})
	})
}

// reclaim deletes a fully applied segment.
func (e *Engine) reclaim(st *segState) {
	if st.keep || st.reclaiming || st.gone || e.state == stateFailed {
		return
	}
	if wait := st.reclaimAfter - e.now(); wait > 0 {
		e.mark(MarkReclaimWaitsSettle)
		e.p.Timers.AfterFunc(wait, func() { e.reclaim(st) })
		return
	}
	st.reclaiming = true
	if st.flushCancel != nil {
		st.flushCancel()
		st.flushCancel = nil
	}
	e.ensureCheckpoint(st.Index.Offsets, func() {
		e.stillOurs(func() { e.deleteSegment(st) })
	})
}

// deleteSegment deletes a reclaimed segment's objects, marker first.
func (e *Engine) deleteSegment(st *segState) {
	if st.gone {
		return
	}
	e.deleteInOrder(st, []ObjectKind{KindMarker, KindBody, KindBitmap}, func() {
		e.cache.drop(st.ID)
		e.forget(st)
		e.stats.SegmentsReclaimed++
		e.checkClosed()
	})
}

// deleteInOrder deletes the segment's objects one after the other,
// retrying each until it is gone (a missing key counts as deleted).
func (e *Engine) deleteInOrder(st *segState, kinds []ObjectKind, done func()) {
	if len(kinds) == 0 {
		done()
		return
	}
	key := e.layout.Key(st.Dir, st.ID, kinds[0])
	e.retry(func(d func(error)) { e.p.Store.DeleteObject(key, d) }, func(err error, _ bool) {
		if e.state == stateFailed {
			return
		}
		if err != nil {
			e.p.Timers.AfterFunc(e.backoff(AttemptsMax), func() { e.deleteInOrder(st, kinds, done) })
			return
		}
		e.deleteInOrder(st, kinds[1:], done)
	})
}

// forget removes a reclaimed segment from the owned set.
func (e *Engine) forget(st *segState) {
	for i, s := range e.segs {
		if s == st {
			e.segs = append(e.segs[:i], e.segs[i+1:]...)
			return
		}
	}
}

// alert records a condition an operator must look at.
func (e *Engine) alert(err error) {
	e.stats.Alerts++
	e.lastAlert = err
}

// LastAlert returns the most recent alert, or nil.
func (e *Engine) LastAlert() error { return e.lastAlert }

// The offsets checkpoint ({root}/_offsets, segment.EncodeCheckpoint)
// keeps the offsets view durable once the segments that committed it are
// gone. Every write is read-merge-write with If-Match on the version last
// read or written, so two writers (a superseded one still running) can
// only ever add to it: a refused write re-reads, max-merges, retries.
// Idempotency keys older than IdempotencyWindow are dropped from the view
// when it is written; retries later than that are new units.

// ensureCheckpoint calls done once the checkpoint covers want. Writes
// are coalesced: the first waiter schedules one CheckpointDelay later,
// and that write covers every segment reclaimed meanwhile — one PUT for
// many reclaims, however large the view.
func (e *Engine) ensureCheckpoint(want segment.Offsets, done func()) {
	if e.ckptView.Covers(want) {
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

type checkpointWaiter struct {
	want segment.Offsets
	done func()
}

func (e *Engine) writeCheckpoint(round int) {
	e.ckptWriting = true
	e.expireIdempotencyKeys()
	view := e.committed.sorted()
	body, err := segment.EncodeCheckpoint(e.epoch, view)
	if err != nil {
		e.ckptWriting = false
		e.alert(fmt.Errorf("offsets checkpoint: %w", err))
		e.failClosed(fmt.Errorf("offsets checkpoint: %w", err))
		return
	}
	in := PutObjectInput{Key: e.layout.CheckpointKey(), Body: body, IfMatch: e.ckptETag, IfNoneMatch: e.ckptETag == ""}
	e.p.Store.PutObject(in, func(etag string, err error) {
		if e.state == stateFailed {
			return
		}
		if err == nil {
			e.checkpointWritten(etag, view)
			return
		}
		// Refused (someone wrote since), or unheard: read, merge, retry.
		e.mark(MarkCheckpointConflict)
		e.readCheckpoint(func(etag string, _ segment.Offsets, err error) {
			if err == nil {
				e.ckptETag = etag
			}
			e.p.Timers.AfterFunc(e.backoff(min(round, AttemptsMax)), func() { e.writeCheckpoint(round + 1) })
		})
	})
}

func (e *Engine) checkpointWritten(etag string, view segment.Offsets) {
	e.ckptETag, e.ckptWriting = etag, false
	e.ckptView = view
	waiting := e.ckptWaiters
	e.ckptWaiters = nil
	var again []checkpointWaiter
	for _, w := range waiting {
		if e.ckptView.Covers(w.want) {
			w.done()
		} else {
			again = append(again, w)
		}
	}
	if len(again) > 0 {
		e.ckptWaiters = append(again, e.ckptWaiters...)
		e.scheduleCheckpoint()
	}
}

// readCheckpoint GETs the checkpoint and max-merges it into the view. A
// missing checkpoint is an empty one (etag "").
func (e *Engine) readCheckpoint(done func(etag string, o segment.Offsets, err error)) {
	var o segment.Offsets
	key := e.layout.CheckpointKey()
	in := GetObjectInput{Key: key, Limit: segment.CheckpointBytesMax}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		_, o, err = segment.DecodeCheckpoint(key, raw)
		return err
	}, func(_ []byte, info ObjectInfo, err error) {
		switch {
		case errors.Is(err, ErrNotFound):
			done("", nil, nil)
			return
		case err != nil:
			done("", nil, fmt.Errorf("read offsets checkpoint: %w", err))
			return
		}
		e.committed.merge(o)
		done(info.ETag, o, nil)
	})
}

// expireIdempotencyKeys drops idempotency keys recorded longer ago than
// the window (their value is the wall time they were submitted).
func (e *Engine) expireIdempotencyKeys() {
	cutoff := e.p.Clock.WallUnixMs() - e.cfg.IdempotencyWindow.Milliseconds()
	e.committed.dropIf(func(k string, v uint64) bool {
		drop := strings.HasPrefix(k, idemPrefix) && int64(v) < cutoff
		if drop {
			e.mark(MarkIdempotencyExpired)
		}
		return drop
	})
}
