package engine

import (
	"errors"
	"time"
)

// The sweeper removes what a previous incarnation left behind: bodies and
// bitmaps without markers (a crash before the marker, or in the middle of
// a reclaim) and multipart uploads never completed. LIST lags, so a body
// listed without its marker is not yet known to be an orphan. An orphan
// is deleted only when all of these hold (docs/DESIGN.md §6.6):
//
//   - its epoch is below ours (a previous incarnation wrote it);
//   - it is older than OrphanGrace;
//   - a HEAD of its marker key — read-after-write consistent — says the
//     marker does not exist.
//
// Deleting a body whose marker the listing had not yet shown would
// destroy acked data. The sweeper runs after ingest opens; its failures
// leave orphans for the next recovery, never a wrong deletion.
//
// A marker that does not count (an epoch sealed below it, see writer.go)
// is deleted with its body right away: no recovery will ever own it, and
// nobody was told it committed.

//
// The sweep runs after recovery and then every SweepInterval, so what a
// crash or a failed cleanup leaves is removed within a bounded time even
// if the process never restarts. A snapshot of this incarnation that is
// no longer being persisted (its content went back to the accumulator
// under a new id) is an orphan too.

func (e *Engine) sweep(listing []*listedSegment, w writerRecord) {
	if w.epoch != e.epoch || w.nonce != e.writerNonce {
		e.broken("the sweeper judges markers by our own claim: writer record epoch %d nonce %x, ours epoch %d nonce %x",
			w.epoch, w.nonce, e.epoch, e.writerNonce)
		return
	}
	if e.state == stateNew || e.state == stateRecovering || e.state == stateClosed {
		// What it deletes is judged by the sealed writer record (e.writer)
		// and the ids this incarnation persists: both are known only once
		// recovery opened ingest.
		e.broken("the sweeper runs once recovery opened ingest: state %d, epoch %d", e.state, e.epoch)
		return
	}
	e.stats.Sweeps++
	wall := e.p.Clock.WallUnixMs()
	var orphans, fenced []*listedSegment
	for _, ls := range listing {
		switch {
		case ls.marker != nil && !w.valid(ls.id):
			fenced = append(fenced, ls)
		case ls.marker == nil && e.abandoned(ls.id) && (ls.body != nil || ls.bitmap != nil) && e.aged(wall, newest(ls)):
			orphans = append(orphans, ls)
		}
	}
	e.forEach(len(fenced), e.cfg.RecoveryConcurrency, func(i int, done func(error)) {
		e.sweepFenced(fenced[i], done)
	}, func(error) {
		e.forEach(len(orphans), e.cfg.RecoveryConcurrency, func(i int, done func(error)) {
			e.sweepOrphan(orphans[i], done)
		}, func(error) { e.sweepUploads("", "") })
	})
}

// sweepFenced deletes a marker that does not count, then its body and
// bitmap.
func (e *Engine) sweepFenced(ls *listedSegment, done func(error)) {
	if ls.marker == nil || e.writer.valid(ls.id) {
		e.broken("the sweeper deletes only markers that do not count: %s, marker listed %t, floor %d, %d seals",
			ls.id, ls.marker != nil, e.writer.floor, len(e.writer.seals))
		done(nil)
		return
	}
	e.deleteOnce(ls, []ObjectKind{KindMarker, KindBody, KindBitmap}, func() {
		e.mark(MarkFencedMarkerSwept)
		e.stats.OrphansSwept++
		done(nil)
	}, func() { done(nil) })
}

// abandoned reports whether no writer will ever put id's marker: an older
// epoch's (it is sealed), or one of ours that is not being persisted.
// A generation the disk WAL replays under its older-epoch id is being
// persisted: not abandoned.
func (e *Engine) abandoned(id SnapshotID) bool {
	if e.active != nil && e.active.id == id {
		return false
	}
	for _, s := range e.queue {
		if s.id == id {
			return false
		}
	}
	if id.Epoch != e.epoch {
		return id.Epoch < e.epoch
	}
	return id.Seq < e.nextSeq
}

// sweepLater lists the segments again after SweepInterval and sweeps.
func (e *Engine) sweepLater() {
	e.p.Timers.AfterFunc(e.cfg.SweepInterval, func() {
		if e.state != stateReady && e.state != stateClosing {
			return
		}
		e.sweepIdemBuckets("") // checkpoint.go
		e.listSegments(func(listing []*listedSegment, err error) {
			if err == nil {
				e.sweep(listing, e.writer)
			}
			e.sweepLater()
		})
	})
}

func (e *Engine) aged(wall, stamp int64) bool {
	return time.Duration(wall-stamp)*time.Millisecond >= e.cfg.OrphanGrace
}

// newest is the latest modification time of what the listing shows.
func newest(ls *listedSegment) int64 {
	var t int64
	for _, o := range []*ObjectInfo{ls.body, ls.bitmap} {
		if o != nil {
			t = max(t, o.LastModifiedUnixMs)
		}
	}
	return t
}

func (e *Engine) sweepOrphan(ls *listedSegment, done func(error)) {
	if ls.body == nil && ls.bitmap == nil {
		// sweep picks orphans by what the listing shows: one with nothing
		// to delete would be counted swept.
		e.broken("an orphan swept has a body or a bitmap listed: %s, marker listed %t", ls.id, ls.marker != nil)
		done(nil)
		return
	}
	marker := e.layout.Key(ls.dir, ls.id, KindMarker)
	e.p.Store.HeadObject(marker, func(_ ObjectInfo, err error) {
		if !errors.Is(err, ErrNotFound) {
			if err == nil {
				e.mark(MarkOrphanHasMarker)
			}
			done(nil) // committed after all, or unknown: leave it
			return
		}
		if ls.marker != nil || !e.abandoned(ls.id) {
			e.broken("an orphan is abandoned and has no marker: %s, marker listed %t, epoch %d, next seq %d", ls.id, ls.marker != nil, e.epoch, e.nextSeq)
			done(nil)
			return
		}
		var kinds []ObjectKind
		if ls.body != nil {
			kinds = append(kinds, KindBody)
		}
		if ls.bitmap != nil {
			kinds = append(kinds, KindBitmap)
		}
		e.deleteOnce(ls, kinds, func() {
			e.mark(MarkOrphanSwept)
			e.stats.OrphansSwept++
			done(nil)
		}, func() { done(nil) })
	})
}

// deleteOnce deletes the objects in order with one attempt each; a
// failure leaves the rest for the next recovery.
//
// A marker, if among them, goes first: a marker whose body was deleted
// under it is a committed segment without its body (corruption to the
// next recovery), while a body without its marker is an orphan.
func (e *Engine) deleteOnce(ls *listedSegment, kinds []ObjectKind, ok, failed func()) {
	if len(kinds) == 0 {
		ok()
		return
	}
	for i := 1; i < len(kinds); i++ {
		if kinds[i] == KindMarker {
			e.broken("a segment's marker is deleted before its other objects: %s, marker at %d of %d kinds, after kind %d", ls.id, i, len(kinds), kinds[0])
			failed()
			return
		}
	}
	e.p.Store.DeleteObject(e.layout.Key(ls.dir, ls.id, kinds[0]), func(err error) {
		if err != nil {
			failed()
			return
		}
		e.deleteOnce(ls, kinds[1:], ok, failed)
	})
}

// sweepUploads aborts previous incarnations' stale multipart uploads,
// one listing page at a time.
func (e *Engine) sweepUploads(keyMarker, idMarker string) {
	e.p.Store.ListMultipartUploads(e.layout.SegmentsPrefix(), keyMarker, idMarker, func(p UploadsPage, err error) {
		if err != nil {
			return
		}
		wall := e.p.Clock.WallUnixMs()
		var stale []Upload
		for _, u := range p.Uploads {
			_, id, kind, ok := e.layout.ParseKey(u.Key)
			if ok && kind == KindBody && id.Epoch < e.epoch && e.aged(wall, u.InitiatedUnixMs) {
				stale = append(stale, u)
			}
		}
		e.forEach(len(stale), e.cfg.RecoveryConcurrency, func(i int, done func(error)) {
			e.p.Store.AbortMultipartUpload(stale[i].Key, stale[i].UploadID, func(err error) {
				if err == nil {
					e.mark(MarkDanglingUploadAbort)
					e.stats.UploadsAborted++
				}
				done(nil)
			})
		}, func(error) {
			if p.Truncated && p.NextKeyMarker == keyMarker && p.NextUploadIDMarker == idMarker {
				e.broken("a truncated uploads page moves on: next markers %q/%q repeat the request's", p.NextKeyMarker, p.NextUploadIDMarker)
				return
			}
			if p.Truncated {
				e.sweepUploads(p.NextKeyMarker, p.NextUploadIDMarker)
			}
		})
	})
}
