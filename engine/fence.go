package engine

import (
	"errors"
	"fmt"
	"slices"
)

// Fencing before deletes (docs/DESIGN.md §11). A superseded writer that is
// still running (a zombie: it froze, a successor recovered, it woke up)
// believes it owns segments its successor now owns. Acking is fenced at
// every commit (fenceThenCommit); deleting is fenced here: before a
// reclaim deletes anything, a read of the writer object — started after
// the reclaim asked — must show this engine's claim still stands. One
// read serves every reclaim waiting when it starts.
//
// The check and the deletes are not atomic: a writer can freeze between
// them. So the successor also tolerates a segment vanishing under it
// (reclaimedElsewhere): a body gone with its marker gone was reclaimed by
// its previous owner, which deletes a marker only after every job of it
// was applied.

// stillOurs runs done once a fresh read of the writer object shows our
// claim. If a newer writer has claimed the pipeline, the engine fails
// closed instead and done never runs.
func (e *Engine) stillOurs(done func()) {
	if e.state == stateNew || e.state == stateRecovering || e.state == stateClosed {
		// The claim read back is the one recovery made and sealed under:
		// before recovery opened ingest there is no owned segment to delete.
		e.broken("deletes are fenced only once recovery opened ingest: state %d, epoch %d, %d waiting", e.state, e.epoch, len(e.fence.waiters))
		return
	}
	e.fence.waiters = append(e.fence.waiters, done)
	if !e.fence.reading {
		e.readFence()
	}
}

// fenceState is the coalesced writer-object read of stillOurs.
type fenceState struct {
	reading bool
	waiters []func() // waiting for a read that starts after they asked
}

func (e *Engine) readFence() {
	if e.fence.reading {
		e.broken("one fence read at a time: a read started while one is in flight (%d waiting)", len(e.fence.waiters))
		return
	}
	e.fence.reading = true
	e.stats.FenceChecks++
	waiting := e.fence.waiters
	e.fence.waiters = nil
	e.readWriter(func(cur writerRecord, _ ObjectInfo, err error) {
		if !e.fence.reading {
			e.broken("a fence read answers once: a read answered with none in flight (%d served, %d waiting)", len(waiting), len(e.fence.waiters))
			return
		}
		e.fence.reading = false
		if e.state == stateFailed {
			return
		}
		switch {
		case err == nil && cur.epoch == e.epoch && cur.nonce == e.writerNonce:
			for _, w := range waiting {
				w()
			}
		case errors.Is(err, ErrCorrupt):
			e.failClosed(fmt.Errorf("fence check before reclaim: %w", err))
			return
		case err == nil || errors.Is(err, ErrNotFound):
			e.mark(MarkFencedBeforeReclaim)
			e.failClosed(fmt.Errorf("%w: epoch %d was superseded (writer object: epoch %d); nothing more is deleted", ErrFenced, e.epoch, cur.epoch))
			return
		default: // unheard: ask again later
			e.fence.waiters = append(waiting, e.fence.waiters...)
			e.p.Timers.AfterFunc(e.backoff(AttemptsMax), func() {
				if !e.fence.reading && len(e.fence.waiters) > 0 {
					e.readFence()
				}
			})
			return
		}
		if len(e.fence.waiters) > 0 {
			e.readFence()
		}
	})
}

// bodyMissing handles a job one of whose bodies (segment st's) is not in
// the store: if the marker is gone too, another writer reclaimed the
// segment (every job of it applied) and the job is done elsewhere; a
// marker without its body is corruption.
func (e *Engine) bodyMissing(j *job, st *segState, cause error) {
	if !slices.ContainsFunc(j.pieces, func(p piece) bool { return p.seg == st }) || j.state != jobRunning {
		e.broken("a running job misses a body of its own: job %s (cut in segment %s, state %d) missing segment %s, %d pieces",
			j.id, j.cut.ID, j.state, st.ID, len(j.pieces))
		return
	}
	key := e.layout.Key(st.Dir, st.ID, KindMarker)
	e.retry(func(d func(error)) {
		e.p.Store.HeadObject(key, func(_ ObjectInfo, err error) { d(err) })
	}, func(err error, _ bool) {
		if e.state == stateFailed {
			return
		}
		switch {
		case errors.Is(err, ErrNotFound):
			e.checkJobEnds(j)
			e.running--
			e.checkRunning()
			e.reclaimedElsewhere(st)
		case err == nil:
			e.refuseJob(j, fmt.Errorf("%w: committed segment %s has no body: %v", ErrCorrupt, st.ID, cause))
		default:
			e.retryJob(j)
		}
	})
}

// reclaimedElsewhere forgets a segment another writer reclaimed: the jobs
// holding it were applied there, so they leave their lanes (a job of it
// still running ends quietly).
func (e *Engine) reclaimedElsewhere(st *segState) {
	if st.gone {
		return
	}
	e.mark(MarkReclaimedElsewhere)
	st.gone = true
	for _, ln := range e.laneOrder {
		kept := ln.jobs[:0]
		for _, j := range ln.jobs {
			if !j.gone() {
				kept = append(kept, j)
			}
		}
		clear(ln.jobs[len(kept):])
		ln.jobs = kept
	}
	if st.flushCancel != nil {
		st.flushCancel()
		st.flushCancel = nil
	}
	e.cache.drop(st.ID)
	e.forget(st)
	e.compact()
	e.checkClosed()
}
