package engine

import (
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// Cuts: where the writer ends lanes' open jobs (docs/DESIGN.md §8.1).
//
// The decision is made for the snapshot being persisted, once its body is
// encoded and before its marker is written — the writer persists one
// snapshot at a time, so every earlier one is committed and registered,
// and the lanes' open jobs are exactly what the committed segments say.
// The cuts go into the marker; the commit makes them the jobs. A lane's
// open job is cut in this segment when the first of these holds:
//
//   - every: its sink takes a job per segment (FileBytes 0);
//   - size: its payload bytes, with this segment's, reach FileBytes (or a
//     quarter of the body cache's memory, if less: jobBytesMax);
//   - interval: its oldest PART has waited FlushInterval;
//   - valve: the WAL is at its pressure valve (Config.ValveSegments or
//     ValveBytes) and the job pins a segment older than the newest half
//     of it;
//   - close: the engine is closing gracefully;
//   - shape: the lane's schema or CDC-ness changes in this segment — a
//     file holds one schema; every group of the lane in this segment is
//     cut then, so a lane never has two open jobs.
//
// A lane whose interval runs out while nothing is being written gets a
// segment of its own: a snapshot with no PARTs, only cuts (cutDue).
//
// The decision is the cut planner's (cutPlanner, planner.go): a pure
// function of the segment's PARTs by group, the lanes' open jobs, the
// sinks' limits, the clock, the valve and whether the engine closes, with
// tests of its own that need no Engine. This file is the Engine's side:
// it gathers those inputs (decideCuts, openSummaries, valveBoundary —
// which marks the valve open), arms the timer of the earliest interval
// (armInterval, cutDue), and counts each cut by its reason when
// registration forms its job (markCut, from endJob in compact.go).

// decideCuts returns the cuts of snapshot s, whose index is encoded: the
// lanes' open jobs it ends, in canonical order (the planner's decision on
// the engine's state).
func (e *Engine) decideCuts(s *snapshot) []segment.Cut {
	if s != e.active || e.lastCommit.Compare(s.id) >= 0 {
		e.broken("cuts are decided for the active snapshot, every earlier one committed: snapshot %s, last commit %s", s.id, e.lastCommit)
		return nil
	}
	if s.index == nil || len(s.index.Cuts) != 0 {
		n := 0
		if s.index != nil {
			n = len(s.index.Cuts)
		}
		e.broken("cuts are decided once, after the index is encoded: snapshot %s, index %t, %d cuts already", s.id, s.index != nil, n)
		return nil
	}
	in := cutInput{id: s.id, now: e.now(), groups: indexGroups(s.index), open: e.openSummaries(),
		cacheBytes: e.cache.budget, closing: e.state == stateClosing}
	in.valveBefore, in.valve = e.valveBoundary()
	return e.planner().decide(in)
}

// planner is the engine's cut planner: its sinks' limits, and its checks
// failing the engine closed.
func (e *Engine) planner() cutPlanner { return cutPlanner{limits: e.cfg.LanesOf, inv: e.failClosed} }

// openSummaries lists the lanes' open jobs, in lane creation order.
func (e *Engine) openSummaries() []openSummary {
	var out []openSummary
	for _, ln := range e.laneOrder {
		if o := ln.openNow(); o != nil {
			out = append(out, o.summary())
		}
	}
	return out
}

// summary is what the planner (and OpenJobs) sees of an open job.
// REQUIRES: o holds a piece (openNow's): its first PART dates it.
func (o *openJob) summary() openSummary {
	if len(o.pieces) == 0 {
		panic(fmt.Sprintf("engine: an open job summarized holds a piece: %s, %d done pieces, %d bytes", o.group, len(o.done), o.bytes))
	}
	return openSummary{group: o.group, first: o.first(), segments: uint32(len(segmentsOf(o.pieces))),
		parts: uint32(o.parts()), bytes: o.bytes, since: o.since}
}

// openNow is the lane's open job (between registrations there is one at
// most), or nil.
func (ln *lane) openNow() *openJob {
	for _, o := range ln.open {
		if len(o.pieces) > 0 {
			return o
		}
	}
	return nil
}

// indexGroups sums an encoded index's PARTs by group, in index order.
func indexGroups(ix *segment.Index) []groupParts {
	st := &segState{Segment: Segment{Index: ix}, applied: segment.NewBitmap(len(ix.Entries))}
	groups, pieces := st.pieces()
	out := make([]groupParts, len(groups))
	for i, g := range groups {
		out[i] = groupParts{group: g, parts: uint32(len(pieces[i].ordinals)), bytes: pieces[i].bytes}
	}
	return out
}

// valveBoundary reports whether the WAL is at its pressure valve and, if
// so, the oldest of the newest segments an open job may keep pinning:
// jobs whose first PART is older are cut.
func (e *Engine) valveBoundary() (SnapshotID, bool) {
	segs, bytes := e.cfg.Valve()
	var total int64
	for _, st := range e.segs {
		total += st.Index.BodyBytes
	}
	if len(e.segs)+len(e.queue)+1 >= e.cfg.LiveSegmentsMax {
		// This segment fills the WAL: no open job may pin it, or the
		// log could stay full with nothing to apply.
		e.mark(MarkValveOpen)
		return SnapshotID{Epoch: ^uint64(0), Seq: ^uint64(0)}, true
	}
	if len(e.segs) < segs && total < bytes {
		return SnapshotID{}, false
	}
	e.mark(MarkValveOpen)
	keep, kept := segs/2, int64(0)
	i := len(e.segs)
	for i > 0 && len(e.segs)-i < keep && kept+e.segs[i-1].Index.BodyBytes <= bytes/2 {
		i--
		kept += e.segs[i].Index.BodyBytes
	}
	if i == len(e.segs) {
		return SnapshotID{Epoch: ^uint64(0), Seq: ^uint64(0)}, true // keep none: cut every open job
	}
	return e.segs[i].ID, true
}

// armInterval arranges for the earliest open job's flush interval to cut
// it even if nothing else is written.
//
// A job whose interval ran out is cut by the next snapshot persisted: the
// timer asks for one (cutDue) and is armed again only after a commit.
func (e *Engine) armInterval() {
	at, ok := e.nextInterval()
	if !ok || at <= e.now() && e.cutDue || e.cutTimer != nil && e.cutAt <= at {
		return
	}
	if e.cutTimer != nil {
		e.cutTimer()
	}
	e.cutAt = at
	e.cutTimer = e.p.Timers.AfterFunc(max(at-e.now(), 0), func() {
		if now := e.now(); e.cutTimer == nil || now < e.cutAt {
			// A timer replaced was cancelled (it never runs after its
			// cancel), and one runs only once its delay elapsed.
			e.broken("the cut timer fires once, while armed, at its time: armed %t, due %v, now %v", e.cutTimer != nil, e.cutAt, now)
			return
		}
		e.cutTimer = nil
		if e.nextIntervalDue() {
			e.cutDue = true
			e.maybeSeal()
			return
		}
		e.armInterval()
	})
}

// nextInterval is when the earliest open job's flush interval runs out
// (the planner's intervalEnd; now, for a job of a sink without limits).
func (e *Engine) nextInterval() (time.Duration, bool) {
	var at time.Duration
	found := false
	now := e.now()
	for _, ln := range e.laneOrder {
		if o := ln.openNow(); o != nil {
			if o.since > now {
				e.broken("an open job waits from no later than now: lane %s/%s, %s since %v, now %v", ln.key.sinkRef, ln.key.namespace, o.group, o.since, now)
			}
			if d := e.planner().intervalEnd(ln.key.sinkRef, o.since); !found || d < at {
				at, found = d, true
			}
		}
	}
	return at, found
}

func (e *Engine) nextIntervalDue() bool {
	at, ok := e.nextInterval()
	return ok && at <= e.now()
}

// hasOpen reports whether any lane has an open job.
func (e *Engine) hasOpen() bool {
	for _, ln := range e.laneOrder {
		if ln.openNow() != nil {
			return true
		}
	}
	return false
}

// markCut counts a cut by its reason.
func (e *Engine) markCut(r segment.CutReason) {
	switch r {
	case segment.CutSize:
		e.mark(MarkCutSize)
	case segment.CutInterval:
		e.mark(MarkCutInterval)
	case segment.CutValve:
		e.mark(MarkCutValve)
	case segment.CutClose:
		e.mark(MarkCutClose)
	case segment.CutShape:
		e.mark(MarkCutShape)
	case segment.CutEvery: // the sink's own pace: not counted
	default:
		e.broken("a cut has a known reason: %s", r)
	}
}

// OpenJob is a lane's job waiting for its cut, as an oracle or an
// operator sees it.
type OpenJob struct {
	SinkRef, Namespace string
	First              SnapshotID    // the segment of its first PART
	Segments, Parts    int           // what it holds so far
	Bytes              int64         // payload bytes so far
	Waited             time.Duration // since its first PART committed
}

// OpenJobs lists the lanes' open jobs, in lane creation order.
func (e *Engine) OpenJobs() []OpenJob {
	var out []OpenJob
	for _, o := range e.openSummaries() {
		out = append(out, OpenJob{SinkRef: o.group.SinkRef, Namespace: o.group.Namespace, First: o.first,
			Segments: int(o.segments), Parts: int(o.parts), Bytes: o.bytes, Waited: e.now() - o.since})
	}
	return out
}
