package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// cutPlanner decides where lanes' open jobs end (cut.go, docs/DESIGN.md
// §8.1). It is pure: decide reads a cutInput — the segment's PARTs by
// group, the lanes' open jobs, the clock, the valve, whether the engine
// closes — and returns the cuts in canonical order; intervalEnd says when
// an open job's flush interval runs out. It never sees an Engine: what
// the engine does with a decision (the marker, the coverage marks of the
// jobs the cuts end, the interval's timer) is the Engine's, in cut.go.
//
// Its checks (checkInput, checkCuts) report through inv: the engine's
// failClosed, or — with no hook, under a unit test — a panic.
type cutPlanner struct {
	limits func(sinkRef string) LaneLimits // a sink's lanes' limits (Config.LanesOf)
	inv    invariantHook
}

// cutInput is what one decision reads.
//
// REQUIRES (checkInput): groups each of at least one PART and no negative
// bytes; open at most one job per lane, in lane creation order, each
// holding at least one PART per segment of it, no negative bytes, and
// first before id; cacheBytes not negative.
type cutInput struct {
	id          SnapshotID    // the segment whose marker carries the cuts
	groups      []groupParts  // its PARTs by group, in index order
	open        []openSummary // the lanes' open jobs, in lane creation order
	cacheBytes  int64         // the body cache's budget (jobBytesMax)
	now         time.Duration // on the monotonic clock, as openSummary.since
	closing     bool          // the engine is closing gracefully
	valve       bool          // the WAL is at its pressure valve, and
	valveBefore SnapshotID    // then jobs whose first PART is older are cut
}

// groupParts is one group's PARTs in the segment being cut.
type groupParts struct {
	group segment.Group
	parts uint32
	bytes int64 // payload bytes
}

// openSummary is a lane's open job as the planner sees it.
type openSummary struct {
	group           segment.Group
	first           SnapshotID // the segment of its first PART
	segments, parts uint32
	bytes           int64         // payload bytes
	since           time.Duration // when its first PART committed
}

// decide returns the cuts of segment in.id: the lanes' open jobs it ends,
// in canonical order, at most segment.CutsMax (the rest are cut by a
// later segment). nil if an input check failed.
func (p cutPlanner) decide(in cutInput) []segment.Cut {
	if !p.checkInput(in) {
		return nil
	}
	var cuts []segment.Cut
	for _, k := range in.lanes() {
		open, mine := in.openOf(k), in.groupsOf(k)
		if len(mine) > 1 || len(mine) == 1 && open != nil && in.groups[mine[0]].group != open.group {
			sc, ok := p.shapeCuts(in.id, open, in.groups, mine)
			if !ok {
				return nil
			}
			cuts = append(cuts, sc...)
			continue
		}
		c, ok := pendingCut(in.id, open, in.groups, mine)
		if !ok {
			continue
		}
		if c.Reason = p.reason(in, k, c, open); c.Reason != 0 {
			cuts = append(cuts, c.Cut)
		}
	}
	segment.SortCuts(cuts)
	if len(cuts) > segment.CutsMax {
		cuts = cuts[:segment.CutsMax] // the rest are cut by a later segment
	}
	if !p.checkCuts(in.id, cuts) {
		return nil
	}
	return cuts
}

// reason is why lane k's pending cut c is made in this segment, the
// first that holds of every, size, interval, valve and close; 0 if none
// does (the job stays open).
func (p cutPlanner) reason(in cutInput, k laneKey, c sizedCut, open *openSummary) segment.CutReason {
	limits := p.limits(k.sinkRef)
	if limits.FileBytes < 0 || limits.FlushInterval < 0 {
		p.inv.broken("cut planner: a sink's lane limits ≥ 0: %s, file bytes %d, flush interval %v", k.sinkRef, limits.FileBytes, limits.FlushInterval)
		return 0
	}
	since := in.now
	if open != nil {
		since = open.since
	}
	switch {
	case limits.FileBytes == 0:
		return segment.CutEvery
	case c.bytes >= min(limits.FileBytes, jobBytesMax(in.cacheBytes)):
		return segment.CutSize
	case in.now-since >= limits.FlushInterval:
		return segment.CutInterval
	case in.valve && c.First.Compare(refOf(in.valveBefore)) < 0:
		return segment.CutValve
	case in.closing:
		return segment.CutClose
	}
	return 0
}

// intervalEnd is when an open job of sinkRef's lanes, opened at since,
// is due for its interval cut. A lane whose sink takes a job per segment
// has an open job only after a restart under other limits: it is due at
// once.
func (p cutPlanner) intervalEnd(sinkRef string, since time.Duration) time.Duration {
	l := p.limits(sinkRef)
	if l.FlushInterval < 0 {
		// A negative interval would date a job due before it opened.
		p.inv.broken("cut planner: a sink's flush interval ≥ 0: %s, flush interval %v", sinkRef, l.FlushInterval)
		return since
	}
	if l.FileBytes > 0 {
		return since + l.FlushInterval
	}
	return since
}

// jobBytesMax bounds a job's payload bytes by memory: a quarter of the
// body cache's share of the pool (cacheBytes), which a running job's
// slices are counted against (apply.go). On a small machine files come
// out smaller than file_bytes rather than overrunning memory.
func jobBytesMax(cacheBytes int64) int64 { return max(cacheBytes/4, 1) }

// lanes lists the lanes a decision looks at: those with an open job (in
// creation order), then those new in this segment.
func (in *cutInput) lanes() []laneKey {
	var out []laneKey
	for _, o := range in.open {
		out = append(out, laneOf(o.group))
	}
	for _, g := range in.groups {
		if k := laneOf(g.group); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// openOf is lane k's open job, or nil.
func (in *cutInput) openOf(k laneKey) *openSummary {
	for i := range in.open {
		if laneOf(in.open[i].group) == k {
			return &in.open[i]
		}
	}
	return nil
}

// groupsOf lists the indexes of this segment's groups of lane k.
func (in *cutInput) groupsOf(k laneKey) []int {
	var mine []int
	for i, g := range in.groups {
		if laneOf(g.group) == k {
			mine = append(mine, i)
		}
	}
	return mine
}

// sizedCut is a cut and the payload bytes of the job it ends.
type sizedCut struct {
	segment.Cut
	bytes int64
}

// pendingCut returns what cutting the lane in segment id would record:
// the open job, extended by this segment's one group of the lane (mine,
// at most one index, of open's group). false: nothing to cut.
//
// REQUIRES: mine holds one index at most, of open's group if open is not
// nil (decide sends a lane of more groups, or of another, to shapeCuts):
// a second group's PARTs would be counted in a cut that is not theirs.
func pendingCut(id SnapshotID, open *openSummary, groups []groupParts, mine []int) (sizedCut, bool) {
	if len(mine) > 1 || len(mine) == 1 && open != nil && groups[mine[0]].group != open.group {
		panic(fmt.Sprintf("cut planner: a pending cut extends its open job by one group of it at most: %d groups of the lane in %s, open job %t",
			len(mine), id, open != nil))
	}
	var c sizedCut
	if open != nil {
		c.Group, c.First = open.group, refOf(open.first)
		c.Segments, c.Parts, c.bytes = open.segments, open.parts, open.bytes
	}
	if len(mine) == 1 {
		g := groups[mine[0]]
		if open == nil {
			c.Group, c.First = g.group, refOf(id)
		}
		c.Segments++
		c.Parts += g.parts
		c.bytes += g.bytes
	}
	return c, c.Segments > 0
}

// shapeCuts cuts a lane whose schema or CDC-ness changes in segment id:
// its open job, and each of this segment's groups of it (mine). false if
// a segment held a group twice (its check failed).
func (p cutPlanner) shapeCuts(id SnapshotID, open *openSummary, groups []groupParts, mine []int) ([]segment.Cut, bool) {
	var out []segment.Cut
	for _, i := range mine {
		if open != nil && groups[i].group == open.group {
			continue // joins the open job, cut below
		}
		out = append(out, segment.Cut{Group: groups[i].group, First: refOf(id), Segments: 1, Parts: groups[i].parts, Reason: segment.CutShape})
	}
	if open != nil {
		var own []int
		for _, i := range mine {
			if groups[i].group == open.group {
				own = append(own, i)
			}
		}
		if len(own) > 1 {
			p.inv.broken("cut planner: a segment holds each group once: %s %d times in %s", open.group, len(own), id)
			return nil, false
		}
		c, _ := pendingCut(id, open, groups, own)
		c.Reason = segment.CutShape
		out = append(out, c.Cut)
	}
	return out, true
}

func refOf(id SnapshotID) segment.SegmentRef { return segment.SegmentRef{Epoch: id.Epoch, Seq: id.Seq} }

// checkInput checks decide's REQUIRES. The lanes' creation order is the
// engine's and not checked here; one job per lane is, in time quadratic
// in the open lanes (as lanes is).
func (p cutPlanner) checkInput(in cutInput) bool {
	if in.cacheBytes < 0 {
		p.inv.broken("cut planner: cache budget ≥ 0: %d bytes", in.cacheBytes)
		return false
	}
	for _, g := range in.groups {
		if g.parts == 0 || g.bytes < 0 {
			p.inv.broken("cut planner: a segment's group holds ≥ 1 PART, bytes ≥ 0: %s, %d PARTs, %d bytes", g.group, g.parts, g.bytes)
			return false
		}
	}
	for i, o := range in.open {
		if o.segments == 0 || o.parts < o.segments || o.bytes < 0 || o.first.Compare(in.id) >= 0 {
			p.inv.broken("cut planner: an open job holds ≥ 1 PART per segment, bytes ≥ 0, from before the segment cut: %s, %d PARTs in %d segments, %d bytes, first %s, cutting %s",
				o.group, o.parts, o.segments, o.bytes, o.first, in.id)
			return false
		}
		if o.since > in.now {
			p.inv.broken("cut planner: an open job waits from no later than now: %s since %v, now %v", o.group, o.since, in.now)
			return false
		}
		for _, prev := range in.open[:i] {
			if laneOf(prev.group) == laneOf(o.group) {
				p.inv.broken("cut planner: one open job per lane: %s and %s", prev.group, o.group)
				return false
			}
		}
	}
	return true
}

// checkCuts checks decide's result: canonical (one cut per group,
// ascending by group), each of at least one PART per segment, from no
// later than the segment that cuts it, with a reason.
func (p cutPlanner) checkCuts(id SnapshotID, cuts []segment.Cut) bool {
	for i, c := range cuts {
		if c.Segments == 0 || c.Parts < c.Segments || c.Reason == 0 || c.First.Compare(refOf(id)) > 0 {
			p.inv.broken("cut planner: a cut holds ≥ 1 PART per segment, from no later than its segment, with a reason: %s, %d PARTs in %d segments, first %s, cutting %s, reason %s",
				c.Group, c.Parts, c.Segments, c.First, id, c.Reason)
			return false
		}
		if i > 0 && cuts[i-1].Group.Compare(c.Group) >= 0 {
			p.inv.broken("cut planner: cuts in canonical order, one per group: %s at %d after %s", c.Group, i, cuts[i-1].Group)
			return false
		}
	}
	return true
}
