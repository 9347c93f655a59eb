package engine

import (
	"slices"
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

// decideCuts returns the cuts of snapshot s, whose index is encoded: the
// lanes' open jobs it ends, in canonical order.
func (e *Engine) decideCuts(s *snapshot) []segment.Cut {
	if s != e.active || e.lastCommit.Compare(s.id) >= 0 {
		e.broken("cuts are decided for the active snapshot, every earlier one committed: snapshot %s, last commit %s", s.id, e.lastCommit)
		return nil
	}
	now := e.now()
	groups, pieces := indexPieces(s.index)
	valveBefore, valve := e.valveBoundary()
	var cuts []segment.Cut
	for _, k := range e.cutLanes(groups) {
		limits := e.cfg.LanesOf(k.sinkRef)
		var open *openJob
		if ln := e.lanes[k]; ln != nil {
			open = ln.openNow()
		}
		var mine []int // this segment's groups of the lane
		for i, g := range groups {
			if laneOf(g) == k {
				mine = append(mine, i)
			}
		}
		if len(mine) > 1 || len(mine) == 1 && open != nil && groups[mine[0]] != open.group {
			cuts = append(cuts, shapeCuts(s.id, open, groups, pieces, mine)...)
			continue
		}
		c, ok := pendingCut(s.id, open, groups, pieces, mine)
		if !ok {
			continue
		}
		since := now
		if open != nil {
			since = open.since
		}
		switch {
		case limits.FileBytes == 0:
			c.Reason = segment.CutEvery
		case c.bytes >= min(limits.FileBytes, e.jobBytesMax()):
			c.Reason = segment.CutSize
		case now-since >= limits.FlushInterval:
			c.Reason = segment.CutInterval
		case valve && c.First.Compare(refOf(valveBefore)) < 0:
			c.Reason = segment.CutValve
		case e.state == stateClosing:
			c.Reason = segment.CutClose
		default:
			continue
		}
		cuts = append(cuts, c.Cut)
	}
	segment.SortCuts(cuts)
	if len(cuts) > segment.CutsMax {
		cuts = cuts[:segment.CutsMax] // the rest are cut by a later segment
	}
	return cuts
}

// jobBytesMax bounds a job's payload bytes by memory: a quarter of the
// body cache's share of the pool, which a running job's slices are
// counted against (apply.go). On a small machine files come out smaller
// than file_bytes rather than overrunning memory.
func (e *Engine) jobBytesMax() int64 { return max(e.cache.budget/4, 1) }

// sizedCut is a cut and the payload bytes of the job it ends.
type sizedCut struct {
	segment.Cut
	bytes int64
}

// pendingCut returns what cutting the lane in segment id would record:
// the open job, extended by this segment's one group of the lane (mine,
// at most one index, of open's group). false: nothing to cut.
func pendingCut(id SnapshotID, open *openJob, groups []segment.Group, pieces []piece, mine []int) (sizedCut, bool) {
	var c sizedCut
	if open != nil {
		c.Group, c.First = open.group, refOf(open.first())
		c.Segments, c.Parts, c.bytes = uint32(len(segmentsOf(open.pieces))), uint32(open.parts()), open.bytes
	}
	if len(mine) == 1 {
		p := pieces[mine[0]]
		if open == nil {
			c.Group, c.First = groups[mine[0]], refOf(id)
		}
		c.Segments++
		c.Parts += uint32(len(p.ordinals))
		c.bytes += p.bytes
	}
	return c, c.Segments > 0
}

// shapeCuts cuts a lane whose schema or CDC-ness changes in segment id:
// its open job, and each of this segment's groups of it (mine).
func shapeCuts(id SnapshotID, open *openJob, groups []segment.Group, pieces []piece, mine []int) []segment.Cut {
	var out []segment.Cut
	for _, i := range mine {
		if open != nil && groups[i] == open.group {
			continue // joins the open job, cut below
		}
		out = append(out, segment.Cut{Group: groups[i], First: refOf(id), Segments: 1, Parts: uint32(len(pieces[i].ordinals)), Reason: segment.CutShape})
	}
	if open != nil {
		var own []int
		for _, i := range mine {
			if groups[i] == open.group {
				own = append(own, i)
			}
		}
		c, _ := pendingCut(id, open, groups, pieces, own)
		c.Reason = segment.CutShape
		out = append(out, c.Cut)
	}
	return out
}

func refOf(id SnapshotID) segment.SegmentRef { return segment.SegmentRef{Epoch: id.Epoch, Seq: id.Seq} }

// cutLanes lists the lanes a cut decision looks at: those with an open
// job (in creation order), then those new in this segment.
func (e *Engine) cutLanes(groups []segment.Group) []laneKey {
	var out []laneKey
	for _, ln := range e.laneOrder {
		if ln.openNow() != nil {
			out = append(out, ln.key)
		}
	}
	for _, g := range groups {
		if k := laneOf(g); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
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

// indexPieces groups an encoded index's PARTs (segment-less pieces).
func indexPieces(ix *segment.Index) ([]segment.Group, []piece) {
	st := &segState{Segment: Segment{Index: ix}, applied: segment.NewBitmap(len(ix.Entries))}
	return st.pieces()
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
// (now, for a job of a sink without limits).
func (e *Engine) nextInterval() (time.Duration, bool) {
	var at time.Duration
	found := false
	for _, ln := range e.laneOrder {
		o := ln.openNow()
		if o == nil {
			continue
		}
		// A lane whose sink takes a job per segment has an open job only
		// after a restart under other limits: it is due now.
		d := o.since
		if l := e.cfg.LanesOf(ln.key.sinkRef); l.FileBytes > 0 {
			d += l.FlushInterval
		}
		if !found || d < at {
			at, found = d, true
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
	for _, ln := range e.laneOrder {
		o := ln.openNow()
		if o == nil {
			continue
		}
		out = append(out, OpenJob{SinkRef: ln.key.sinkRef, Namespace: ln.key.namespace, First: o.first(),
			Segments: len(segmentsOf(o.pieces)), Parts: o.parts(), Bytes: o.bytes, Waited: e.now() - o.since})
	}
	return out
}
