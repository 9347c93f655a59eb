package engine

import (
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// Hooks for assert_test.go: each breaks one invariant on purpose, so that
// a test can prove its check fires where the state is next changed.

// BreakHeld adds delta to the held bytes.
func (e *Engine) BreakHeld(delta int64) { e.held += delta }

// BreakSeq makes the next snapshot reuse the first id of the epoch.
func (e *Engine) BreakSeq() { e.nextSeq = 1 }

// BreakLastCommit moves the last committed id to sequence seq of this
// epoch.
func (e *Engine) BreakLastCommit(seq uint64) { e.lastCommit = SnapshotID{Epoch: e.epoch, Seq: seq} }

// BreakRunning adds delta to the jobs counted in flight.
func (e *Engine) BreakRunning(delta int) { e.running += delta }

// BreakAnswers schedules a delivery of answers with none queued.
func (e *Engine) BreakAnswers() { e.p.Timers.AfterFunc(0, e.deliverAnswers) }

// BreakPending takes the first owned segment's first waiting job for
// applied, without setting its bits, and reclaims the segment.
func (e *Engine) BreakPending() {
	st := e.segs[0]
	for _, j := range st.jobs {
		if j.state == jobPending {
			j.state = jobApplied
			break
		}
	}
	e.reclaim(st)
}

// BreakCacheUsed adds delta to the body cache's used bytes.
func (e *Engine) BreakCacheUsed(delta int64) { e.cache.used += delta }

// fakeJob is a refused job (never started) of a segment that is not owned.
func fakeJob(sinkRef, ns string, id SnapshotID) *job {
	st := &segState{Segment: Segment{ID: id}}
	g := segment.Group{SinkRef: sinkRef, Namespace: ns}
	return &job{cut: st, id: "fake", group: g, pieces: []piece{{seg: st, ordinals: []segment.SliceOrdinal{0}}}, state: jobRefused}
}

// BreakLaneTail appends a job of segment id to the end of a lane.
func (e *Engine) BreakLaneTail(sinkRef, ns string, id SnapshotID) {
	ln := e.lanes[laneKey{sinkRef, ns}]
	ln.jobs = append(ln.jobs, fakeJob(sinkRef, ns, id))
}

// BreakLaneHead puts a job of segment id at the head of a lane.
func (e *Engine) BreakLaneHead(sinkRef, ns string, id SnapshotID) {
	ln := e.lanes[laneKey{sinkRef, ns}]
	ln.jobs = append([]*job{fakeJob(sinkRef, ns, id)}, ln.jobs...)
}

// BreakBitmap clears the first owned segment's in-memory bitmap and
// writes it.
func (e *Engine) BreakBitmap() {
	st := e.segs[0]
	st.applied = segment.NewBitmap(st.applied.Len())
	e.writeBitmap(st)
}

// MergeForeignBitmap merges a bitmap of another length (another
// segment's) into the first owned segment's.
func (e *Engine) MergeForeignBitmap() {
	st := e.segs[0]
	e.mergeBits(st, segment.NewBitmap(st.applied.Len()+1))
}

// AppendUnchecked appends a unit to the live accumulator without
// admission.
func (e *Engine) AppendUnchecked(in Unit, done func(error)) { e.append(in, done) }

// CheckInvariants runs the checks that hold between any two events
// (those tied to one mutation — a reclaim, a bitmap write, an append at
// the WAL bound — are left out) and reports whether all held.
func (e *Engine) CheckInvariants() bool {
	ok := e.checkHeld() && e.checkQueue()
	e.checkRunning()
	e.checkBudget()
	ok = e.checkAdmission() && ok
	for _, st := range e.segs {
		e.checkPending(st)
	}
	for _, ln := range e.laneOrder {
		for i := 1; i < len(ln.jobs); i++ {
			e.checkLaneAppendAt(ln, i)
		}
	}
	e.cache.check(true)
	return ok && e.err == nil
}

// checkLaneAppendAt checks job i of a lane against the jobs before it.
func (e *Engine) checkLaneAppendAt(ln *lane, i int) {
	before := &lane{key: ln.key, jobs: ln.jobs[:i]}
	e.checkLaneAppend(before, ln.jobs[i])
}

// UnitPayloadForTest encodes u's disk WAL record, with sequence number
// seq, as the engine would.
func UnitPayloadForTest(u Unit, seq uint64) ([]byte, error) {
	c, err := canonicalUnit(u)
	if err != nil {
		return nil, err
	}
	p, err := unitPayload(c)
	if err == nil {
		wal.PutUnitSeq(p, seq)
	}
	return p, err
}

// EncodeWriterObjectWAL returns a version 3 writer object for a log with
// identity wal: epoch, nonce, floor = epoch, no seals.
func EncodeWriterObjectWAL(epoch, nonce uint64, wal segment.WALID) []byte {
	return writerRecord{epoch: epoch, nonce: nonce, wal: wal, floor: epoch}.encode()
}
