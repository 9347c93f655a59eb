package engine

import (
	"slices"

	"github.com/skipprd/skipprd/engine/segment"
)

// Completion bitmaps and reclaim (docs/DESIGN.md §8.5, §8.6).
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
// in the offsets checkpoint (checkpoint.go) — they must outlive the
// segment — then the marker is deleted (the segment stops being owned),
// then the body, then the bitmap. A crash in between leaves a body or
// bitmap without a marker, which the sweeper (sweep.go) removes. A segment
// whose bitmap could not be read, or with a refused job, is never deleted.

// scheduleBitmap arranges a bitmap write for an incomplete segment.
func (e *Engine) scheduleBitmap(st *segState) {
	if st.flushCancel != nil || st.keep {
		return
	}
	st.flushCancel = e.p.Timers.AfterFunc(e.cfg.BitmapDelay, func() {
		if st.flushCancel == nil {
			// Armed once (above), cancelled where it is cleared (reclaim,
			// reclaimedElsewhere): a cancelled timer never runs.
			e.broken("a segment's bitmap timer fires once, while armed: segment %s fired with none armed", st.ID)
			return
		}
		st.flushCancel = nil
		e.writeBitmap(st)
	})
}

func (e *Engine) writeBitmap(st *segState) {
	if st.reclaiming || st.gone || e.state == stateFailed {
		return
	}
	if st.bitmapLost {
		// Its bits are known only where a live cut says (settleLost): a
		// write would put them over the unreadable bitmap, which holds
		// what the next recovery needs to judge its PARTs.
		e.broken("a segment whose bitmap recovery could not read is never written over: segment %s, keep %t, %d of %d bits set",
			st.ID, st.keep, st.applied.Count(), st.applied.Len())
		return
	}
	if st.writing {
		st.dirty = true
		return
	}
	if n := len(st.Index.Entries); st.applied.Len() != n {
		e.broken("a bitmap written has one bit per PART: segment %s, %d bits, %d parts", st.ID, st.applied.Len(), n)
		return
	}
	if !e.checkBitmapWrite(st) {
		return
	}
	st.writing, st.dirty = true, false
	written := st.written
	key := e.layout.Key(st.Dir, st.ID, KindBitmap)
	in := PutObjectInput{Key: key, Body: st.applied.Encode(), IfMatch: st.bitmapETag, IfNoneMatch: st.bitmapETag == ""}
	e.p.Store.PutObject(in, func(etag string, err error) {
		if !st.writing {
			e.broken("a segment's bitmap writes never overlap: a write of segment %s answered with none in flight (%v)", st.ID, err)
			return
		}
		if err == nil {
			st.bitmapETag = etag
			st.writing = false
			st.durable = written
			if st.dirty {
				e.scheduleBitmap(st)
			}
			e.wakeCuts(st)
			return
		}
		// Refused (the object is not the version we wrote last) or
		// unheard: read it, OR its bits into ours, write again later.
		e.mark(MarkBitmapConflict)
		e.readBitmap(st.Segment, func(b *segment.Bitmap, etag string, rerr error) {
			if !st.writing {
				e.broken("a segment's bitmap writes never overlap: the re-read of segment %s answered with no write in flight", st.ID)
				return
			}
			st.writing = false
			if rerr == nil && b != nil {
				e.mergeBits(st, b) // same segment: same length
				st.bitmapETag = etag
				st.durable = b
			}
			e.scheduleBitmap(st)
		})
	})
}

// reclaim deletes a fully applied segment.
func (e *Engine) reclaim(st *segState) {
	if st.keep || st.reclaiming || st.gone || st.logPending || e.state == stateFailed {
		return
	}
	if wait := st.reclaimAfter - e.now(); wait > 0 {
		e.mark(MarkReclaimWaitsSettle)
		e.p.Timers.AfterFunc(wait, func() { e.reclaim(st) })
		return
	}
	if e.cutWaits(st) {
		return
	}
	if !e.checkReclaimable(st) {
		return // never delete what is not applied
	}
	if !slices.Contains(e.segs, st) {
		// forget would say so only once the objects were deleted.
		e.broken("a segment reclaimed is owned: segment %s, %d owned", st.ID, len(e.segs))
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

// cutWaits reports whether st, which ends applied jobs with its cuts,
// must wait before it is reclaimed: a job's bits are not yet durable in
// another of its live segments. Deleting the cut first would leave that
// segment's PARTs unapplied after a crash with nothing to say which job
// they belong to — they would join another, under another id. It asks
// for the bitmap writes it waits for; wakeCuts calls reclaim again.
func (e *Engine) cutWaits(st *segState) bool {
	waits := false
	for _, j := range st.jobs {
		if j.cut != st {
			continue
		}
		for _, p := range j.pieces {
			if p.seg == st || p.seg.gone || p.allSet(p.seg.durable) {
				continue
			}
			if !waits {
				e.mark(MarkReclaimWaitsCut)
			}
			waits = true
			e.scheduleBitmap(p.seg)
		}
	}
	return waits
}

// wakeCuts retries the reclaim of segments whose cuts waited for st's
// bits to be durable (or for st to be gone).
func (e *Engine) wakeCuts(st *segState) {
	for _, j := range st.jobs {
		if c := j.cut; c != st && !c.gone && c.pending() == 0 {
			e.reclaim(c)
		}
	}
}

// deleteSegment deletes a reclaimed segment's objects, marker first.
func (e *Engine) deleteSegment(st *segState) {
	if st.gone {
		return
	}
	if !st.reclaiming {
		e.broken("a segment's objects are deleted only once its reclaim began: segment %s, %d pending, %d of %d bits set",
			st.ID, st.pending(), st.applied.Count(), st.applied.Len())
		return
	}
	e.deleteInOrder(st, []ObjectKind{KindMarker, KindBody, KindBitmap}, func() {
		// Nothing took it back while its objects went: no job of it
		// started or reopened, no body pinned.
		if !e.checkReclaimable(st) {
			return
		}
		e.cache.drop(st.ID)
		e.forget(st)
		st.gone = true
		e.wakeCuts(st)
		e.dlog.roomFreed()
		e.stats.SegmentsReclaimed++
		e.checkClosed()
	})
}

// deleteInOrder deletes the segment's objects one after the other,
// retrying each until it is gone (a missing key counts as deleted).
//
// Each step, a retry's too, runs while the segment's reclaim does: it began
// (reclaiming) and nothing forgot the segment meanwhile (gone). The marker,
// if among kinds, goes first: the segment stops being owned before any
// object it needs is gone.
func (e *Engine) deleteInOrder(st *segState, kinds []ObjectKind, done func()) {
	if !st.reclaiming || st.gone {
		e.broken("a segment's objects are deleted while its reclaim runs: segment %s, reclaiming %t, gone %t, %d kinds left",
			st.ID, st.reclaiming, st.gone, len(kinds))
		return
	}
	if len(kinds) == 0 {
		done()
		return
	}
	for i := 1; i < len(kinds); i++ {
		if kinds[i] == KindMarker {
			e.broken("a segment's marker is deleted before its other objects: segment %s, marker at %d of %d kinds, after kind %d", st.ID, i, len(kinds), kinds[0])
			return
		}
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
			e.checkCompaction()
			return
		}
	}
	e.broken("a reclaimed segment was owned: segment %s, %d owned", st.ID, len(e.segs))
}
