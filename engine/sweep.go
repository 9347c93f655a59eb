package engine

import (
	"errors"
	"time"
)

// The sweeper removes what a previous incarnation left behind: bodies
// without markers and multipart uploads never completed. LIST lags, so a
// body listed without its marker is not yet known to be an orphan. A body
// is deleted only when all of these hold (DESIGN.md §6):
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

func (e *Engine) sweep(listing []*listedSegment, w writerRecord) {
	wall := e.p.Clock.WallUnixMs()
	var orphans, fenced []*listedSegment
	for _, ls := range listing {
		switch {
		case ls.marker != nil && !w.valid(ls.id):
			fenced = append(fenced, ls)
		case ls.body != nil && ls.marker == nil && ls.id.Epoch < e.epoch && e.aged(wall, ls.body.LastModifiedUnixMs):
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

// sweepFenced deletes a marker that does not count, then its body.
func (e *Engine) sweepFenced(ls *listedSegment, done func(error)) {
	e.p.Store.DeleteObject(e.layout.Key(ls.dir, ls.id, KindMarker), func(err error) {
		if err != nil {
			done(nil)
			return
		}
		e.p.Store.DeleteObject(e.layout.Key(ls.dir, ls.id, KindBody), func(err error) {
			if err == nil {
				e.stats.OrphansSwept++
			}
			done(nil)
		})
	})
}

func (e *Engine) aged(wall, stamp int64) bool {
	return time.Duration(wall-stamp)*time.Millisecond >= e.cfg.OrphanGrace
}

func (e *Engine) sweepOrphan(ls *listedSegment, done func(error)) {
	marker := e.layout.Key(ls.dir, ls.id, KindMarker)
	e.p.Store.HeadObject(marker, func(_ ObjectInfo, err error) {
		if !errors.Is(err, ErrNotFound) {
			done(nil) // committed after all, or unknown: leave it
			return
		}
		e.p.Store.DeleteObject(e.layout.Key(ls.dir, ls.id, KindBody), func(err error) {
			if err == nil {
				e.stats.OrphansSwept++
			}
			done(nil)
		})
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
					e.stats.UploadsAborted++
				}
				done(nil)
			})
		}, func(error) {
			if p.Truncated {
				e.sweepUploads(p.NextKeyMarker, p.NextUploadIDMarker)
			}
		})
	})
}
