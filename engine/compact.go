package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// compaction is the compactor's state: the owned segments, the lanes and
// their jobs, the cuts' timer, the body cache and the memory split, and
// the fence check before deletes.
type compaction struct {
	segs      []*segState // INVARIANT: owned segments, in id order (checkSegAppend, check)
	lanes     map[laneKey]*lane
	laneOrder []*lane // lanes in creation order (deterministic scans); INVARIANT: each lane once (check)
	running   int     // jobs in flight; INVARIANT: 0 ≤ running ≤ CompactionConcurrency (checkRunning)
	// Cuts (cut.go): the timer of the earliest open job's flush interval,
	// and whether a snapshot must be sealed to carry cuts.
	cutTimer func()
	cutAt    time.Duration
	cutDue   bool
	// recovered: the segments registering are recovery's (their lanes'
	// waits are dated from the segments' creation).
	recovered bool
	cache     *bodyCache
	budget    budget     // the memory pool's split (memory.go)
	fence     fenceState // the coalesced fence check before deletes (fence.go)
}

// check is the compactor's whole-state check, run where segments join
// and leave (register, reclaim): jobs within the concurrency, the lane
// order one entry per lane, owned segments in id order. Its loop is
// bounded by the owned segments (LiveSegmentsMax, and what recovery
// found).
func (c *compaction) check(concurrency int) error {
	if c.running < 0 || c.running > concurrency {
		return invariantError("0 ≤ running ≤ CompactionConcurrency: running %d, limit %d", c.running, concurrency)
	}
	if len(c.laneOrder) != len(c.lanes) {
		return invariantError("every lane is in the lane order once: %d lanes, %d in order", len(c.lanes), len(c.laneOrder))
	}
	for i := 1; i < len(c.segs); i++ {
		if c.segs[i-1].ID.Compare(c.segs[i].ID) >= 0 {
			return invariantError("owned segments in id order: %s at %d after %s", c.segs[i].ID, i, c.segs[i-1].ID)
		}
	}
	return nil
}

// Compaction (docs/DESIGN.md §8) applies committed segments to their sinks,
// slice by slice, exactly once, then reclaims them.
//
// Jobs span segments. The PARTs of one group — a sink, a namespace, a
// schema and CDC-ness — wait in their lane's open job, segment after
// segment, until the writer cuts it (cut.go): a cut, recorded in the
// marker of the segment that ends the job, fixes its membership — every
// PART of the group in the segments from the cut's First through the
// cutting one — before anything applies it. A job replayed after a crash,
// on a new host or past a zombie is formed from the same committed cuts:
// the same PARTs, the same compaction_id (jobs.go). Segments committed
// before spanning jobs (version 1 and 2 markers) keep one job per group
// per segment, with the ids they had.
//
// Lanes: the jobs of one (sink, namespace) run one at a time, in the
// order of their first PART, so rows reach a table in commit order.
// Different lanes run in parallel, up to CompactionConcurrency jobs at
// once.
//
// Progress: an applied job's ordinals are set in the completion bitmap of
// every segment it holds PARTs of (kept in memory, written beside the
// segment after BitmapDelay while the segment is incomplete). A segment
// all of whose PARTs are applied, and which no unapplied job ends, is
// reclaimed (reclaim.go) — but a segment holding the cut of a job waits
// until the job's bits are durable in every other live segment of it:
// otherwise a crash could leave those PARTs unapplied with no cut to say
// which job they belong to, and they would join another.

// segState is an owned segment and its compaction progress.
//
// INVARIANT: applied has one bit per PART; a bit is set iff the job
// holding that ordinal was applied (or a durable bitmap said so); bits
// only get set (checkBitmapWrite, mergeBits).
// INVARIANT: pending() = groups of it waiting in open lanes + jobs of it
// not applied, and 0 only once every bit is set (checkReclaimable).
type segState struct {
	Segment
	// jobs: every job holding PARTs of it or ending with its cut, in the
	// order they were formed; each once.
	jobs    []*job
	open    int // groups of its PARTs waiting in an open lane (no cut yet)
	applied *segment.Bitmap
	// durable: the bits known to be in the store — read at recovery, or
	// held by the last bitmap write that succeeded.
	durable *segment.Bitmap
	keep    bool // never reclaim: unreadable bitmap or a refused job
	// bitmapLost: recovery could not read its bitmap (keep is set): which
	// of its PARTs were applied is known only where a live cut says.
	bitmapLost bool

	// written: the bits of the last bitmap write started (nil before the
	// first); every later write holds them all.
	written *segment.Bitmap

	flushCancel func() // pending bitmap write
	writing     bool   // a bitmap PUT is in flight
	dirty       bool   // bits set since the write in flight started
	bitmapETag  string // version of the bitmap object last read or written; "" if none
	reclaiming  bool
	gone        bool // reclaimed (by us or, fence.go, another writer)
	// logPending (disk WAL): the log has not yet durably recorded that
	// this segment's generation is flushed. Until it has, the segment is
	// not reclaimed: a crash would replay the generation from the log,
	// and only the segment still being there (owned) stops that replay.
	logPending bool
	// reclaimAfter: an ambiguous marker PUT of ours may land until then;
	// deleting the marker earlier could let it come back without a body.
	reclaimAfter time.Duration
}

// pending counts what still holds the segment: open groups and unapplied
// jobs.
func (st *segState) pending() int {
	n := st.open
	for _, j := range st.jobs {
		if j.state != jobApplied {
			n++
		}
	}
	return n
}

// addJob records j among st's jobs, once.
//
// REQUIRES: j holds PARTs of st or ends with its cut (pending, wakeCuts
// and cutWaits read st.jobs as exactly those).
func (st *segState) addJob(j *job) {
	if j.cut != st && !slices.ContainsFunc(j.pieces, func(p piece) bool { return p.seg == st }) {
		panic(fmt.Sprintf("engine: a segment's jobs hold PARTs of it or end with its cut: job %s (cut in segment %s, %d pieces) joins segment %s",
			j.id, j.cut.ID, len(j.pieces), st.ID))
	}
	if !slices.Contains(st.jobs, j) {
		st.jobs = append(st.jobs, j)
	}
}

type jobState uint8

const (
	jobPending jobState = iota
	jobRunning
	jobApplied
	jobRefused // its slices cannot be read (corruption): alert, never applied
)

// piece is the PARTs of one group in one segment, in ordinal order.
type piece struct {
	seg      *segState
	ordinals []segment.SliceOrdinal
	bytes    int64 // payload bytes
	done     bool  // every bit set when registered (recovery)
}

// job is one compaction job: pieces of one group from one or more
// segments, ended by a cut.
type job struct {
	id      string
	content string // jobContent: what a sink compares under an existing id
	group   segment.Group
	cut     *segState // the segment whose marker ends the job
	reason  segment.CutReason
	pieces  []piece // ascending segment id
	bytes   int64
	state   jobState
	// notBefore: retry backoff after a sink failure
	notBefore time.Duration
	failures  int
	// failedClosing: it failed while the engine was closing, so the close
	// does not retry it (the next start will).
	failedClosing bool
	// unknown: a segment whose bitmap recovery could not read, of which
	// the job holds PARTs no live cut bounded at recovery: whether an
	// earlier job applied them is unknown, so the job is refused (its
	// lane stops) rather than risk delivering them twice.
	unknown *segState
}

func (j *job) sinkRef() string   { return j.group.SinkRef }
func (j *job) namespace() string { return j.group.Namespace }

// first is the segment of the job's first PART.
func (j *job) first() *segState { return j.pieces[0].seg }

// lane is the queue of one (sink, namespace): its cut jobs in order, and
// the open job its next PARTs join.
//
// INVARIANT: jobs in the order of their first PART (checkLaneAppend);
// only the head runs, and it leaves when applied (checkLaneHead). At most
// one group is open once a segment is registered (checkOpen).
type lane struct {
	key  laneKey
	jobs []*job
	open []*openJob // by group; one at most between registrations
}

type laneKey struct{ sinkRef, namespace string }

func laneOf(g segment.Group) laneKey { return laneKey{g.SinkRef, g.Namespace} }

// openJob is a lane's job not cut yet: the pieces its cut will hold.
type openJob struct {
	group  segment.Group
	pieces []piece // not applied, ascending segment id
	// done: pieces of the group registered with every bit set (recovery):
	// applied by a job whose cut may or may not still be live.
	done  []piece
	bytes int64
	since time.Duration // when its first piece committed (monotonic)
}

func (o *openJob) first() SnapshotID { return o.pieces[0].seg.ID }

// parts counts the PARTs of the open pieces.
func (o *openJob) parts() (n int) {
	for _, p := range o.pieces {
		n += len(p.ordinals)
	}
	return n
}

// newSegState is an owned segment with its bitmap (read at recovery, or
// empty), which is also what is known durable of it.
func newSegState(s Segment, applied *segment.Bitmap) *segState {
	return &segState{Segment: s, applied: applied, durable: applied.Clone()}
}

// pieces returns the segment's PARTs grouped, in order of first ordinal.
func (st *segState) pieces() ([]segment.Group, []piece) {
	var groups []segment.Group
	var out []piece
	at := map[segment.Group]int{}
	for _, en := range st.Index.Entries {
		g := segment.GroupOf(en)
		i, ok := at[g]
		if !ok {
			i = len(out)
			at[g] = i
			groups = append(groups, g)
			out = append(out, piece{seg: st})
		}
		out[i].ordinals = append(out[i].ordinals, en.Ordinal)
		out[i].bytes += en.End() - en.ArrowStart
	}
	for i := range out {
		out[i].done = out[i].allSet(st.applied)
	}
	return groups, out
}

func (p piece) allSet(b *segment.Bitmap) bool {
	for _, o := range p.ordinals {
		if !b.IsSet(o) {
			return false
		}
	}
	return true
}

// register adds an owned segment: its pieces join their lanes (or, for a
// segment committed before spanning jobs, form a job each), then its cuts
// end the jobs they name.
func (e *Engine) register(st *segState) {
	if st.applied.Len() != len(st.Index.Entries) || st.durable.Len() != st.applied.Len() ||
		len(st.jobs) != 0 || st.open != 0 || st.gone || st.reclaiming {
		e.broken("a segment registers once, fresh, with a bit per PART: segment %s, %d bits (%d durable), %d parts, %d jobs, %d groups open, gone %t, reclaiming %t",
			st.ID, st.applied.Len(), st.durable.Len(), len(st.Index.Entries), len(st.jobs), st.open, st.gone, st.reclaiming)
		return
	}
	e.checkSegAppend(st)
	if st.Index.Origin.IsZero() {
		e.mark(MarkLegacyOrigin) // committed by a build before WAL identities: legacy ids
	}
	e.segs = append(e.segs, st)
	groups, pieces := st.pieces()
	if !e.checkPiecesCover(st, groups, pieces) {
		return
	}
	if !st.Index.Spanning {
		if !e.recovered {
			// The writer commits segments of spanning jobs (persist.go):
			// one without would get legacy ids for new jobs.
			e.broken("a segment without spanning jobs is one recovery found: segment %s registered outside recovery", st.ID)
			return
		}
		if len(st.Index.Cuts) > 0 {
			// Its groups form their own jobs: cuts would end nothing, and
			// the open jobs they name would wait for another cut.
			e.broken("a segment without spanning jobs carries no cuts: segment %s, %d cuts", st.ID, len(st.Index.Cuts))
			return
		}
		for i, g := range groups {
			e.addJob(e.legacyJob(st, g, pieces[i]))
		}
	} else {
		for i, g := range groups {
			e.joinOpen(g, pieces[i])
		}
		var ended []*job
		for _, c := range st.Index.Cuts {
			j, ok := e.endJob(st, c)
			if !ok {
				return // failed closed
			}
			if j != nil {
				ended = append(ended, j)
			}
		}
		// Cuts are in group order; lanes take jobs in commit order.
		slices.SortStableFunc(ended, func(a, b *job) int {
			if c := a.first().ID.Compare(b.first().ID); c != 0 {
				return c
			}
			return int(a.pieces[0].ordinals[0]) - int(b.pieces[0].ordinals[0])
		})
		for _, j := range ended {
			e.addJob(j)
		}
		if e.recovered {
			e.settleShaped(st, groups)
		}
		e.checkOpen(groups)
	}
	if !e.checkCompaction() {
		return
	}
	e.armInterval()
	if st.pending() == 0 {
		e.reclaim(st)
	}
}

// checkPiecesCover: a segment's pieces, one per group, hold each of its
// PARTs once — a PART in no piece would never be applied, and its
// segment never reclaimed; one in two would be applied twice. O(groups),
// once per segment registered (pieces distinct by construction: a count
// suffices).
func (e *Engine) checkPiecesCover(st *segState, groups []segment.Group, pieces []piece) bool {
	parts := 0
	for _, p := range pieces {
		parts += len(p.ordinals)
	}
	if len(groups) != len(pieces) || parts != len(st.Index.Entries) {
		e.broken("a segment's pieces hold each of its PARTs once, a piece per group: segment %s, %d PARTs, %d in pieces, %d pieces for %d groups",
			st.ID, len(st.Index.Entries), parts, len(pieces), len(groups))
		return false
	}
	return true
}

// checkCompaction runs the compactor's whole-state check.
func (e *Engine) checkCompaction() bool {
	return e.invariantHolds(e.compaction.check(e.cfg.CompactionConcurrency))
}

// legacyJob is the one job of group g in a segment committed before
// spanning jobs.
func (e *Engine) legacyJob(st *segState, g segment.Group, p piece) *job {
	if st.Index.Spanning || p.seg != st || len(p.ordinals) == 0 {
		e.broken("a legacy job is one piece of a segment committed before spanning jobs: segment %s (spanning %t), piece of %s with %d PARTs",
			st.ID, st.Index.Spanning, p.seg.ID, len(p.ordinals))
	}
	j := &job{group: g, cut: st, reason: segment.CutEvery, pieces: []piece{p}, bytes: p.bytes}
	j.id = legacyCompactionID(st.Index.Origin, st.ID, p.ordinals, g.SinkRef)
	j.content = legacyJobContent(st.Index.BodySum, p.ordinals)
	if p.done {
		j.state = jobApplied
	}
	return j
}

// settleLost takes out of an open job, as applied, its pieces before a
// cut's First that lie in segments whose bitmap recovery could not read.
// Jobs are cut in lane order, so such a piece belongs to an earlier job;
// that job's cut is gone, and reclaim lets a cut go only once its job's
// bits are durable in every other segment (cutWaits) — so its bits were
// in the bitmap that is unreadable now, and the job was applied. Their
// bits are set in memory; their segment stays kept.
func (e *Engine) settleLost(o *openJob, first SnapshotID) {
	kept := o.pieces[:0]
	var unkept *segState // a segment settled here that is not kept
	for _, p := range o.pieces {
		if !p.seg.bitmapLost || p.seg.ID.Compare(first) >= 0 {
			kept = append(kept, p)
			continue
		}
		if !p.seg.keep && unkept == nil {
			unkept = p.seg
		}
		e.mark(MarkLostBitsInferred)
		for _, ord := range p.ordinals {
			p.seg.applied.Set(ord)
		}
		p.seg.open--
		e.checkPending(p.seg)
		o.bytes -= p.bytes
	}
	if o.bytes < 0 || len(kept) == 0 && o.bytes != 0 {
		e.broken("an open job's bytes are its pieces': %d bytes left in %d pieces of %s after settling lost pieces before %s",
			o.bytes, len(kept), o.group, first)
		return
	}
	if unkept != nil {
		// Kept for good (doc.go): its bits are inferred now, and an
		// inference never deletes a segment.
		e.broken("a segment whose bitmap recovery could not read stays kept: segment %s, lost PARTs settled before %s", unkept.ID, first)
		return
	}
	if len(kept) == len(o.pieces) {
		return
	}
	clear(o.pieces[len(kept):])
	o.pieces = kept
	if len(kept) > 0 {
		o.since = e.openedAt(kept[0].seg)
	}
}

// settleShaped settles (settleLost), after recovery registered segment
// st with its cuts, the lost pieces of every open job of st's lanes whose
// group has no PART in st and no cut in it. Had that job been open when
// st committed, st's other group of the lane would have cut it (shape,
// planner.go); st names no such cut, so the job was cut in an earlier
// segment, now gone: applied, like a piece before a live cut of its lane.
// Without this, a rotted bitmap from before a schema change leaves the
// lane two open jobs, and recovery fails closed (seed 5591). Its pieces in
// readable segments stay: unset bits with their cut gone break checkOpen.
// O(groups + their lanes' open jobs); the maps are looked up, never ranged.
func (e *Engine) settleShaped(st *segState, groups []segment.Group) {
	inSeg := make(map[segment.Group]bool, len(groups))
	for _, g := range groups {
		inSeg[g] = true
	}
	seen := map[laneKey]bool{}
	for _, g := range groups {
		k := laneOf(g)
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, o := range e.lanes[k].open { // joinOpen made the lane
			if len(o.pieces) > 0 && !inSeg[o.group] {
				e.settleLost(o, st.ID)
			}
		}
	}
}

// unboundedLost returns a segment whose bitmap recovery could not read,
// of which j holds PARTs, if j is cut after recovery: a cut recovery
// found bounded its job as it was first applied (same id, same PARTs: a
// sink answers a repeat as applied), but a later one may take PARTs of an
// earlier job that was applied and whose cut is gone.
func (e *Engine) unboundedLost(j *job) *segState {
	if e.recovered {
		return nil
	}
	for _, p := range j.pieces {
		if p.seg.bitmapLost {
			return p.seg
		}
	}
	return nil
}

// joinOpen adds a piece to its lane's open job of its group.
func (e *Engine) joinOpen(g segment.Group, p piece) {
	ln := e.lane(laneOf(g))
	o := ln.openOf(g)
	if o == nil {
		o = &openJob{group: g}
		ln.open = append(ln.open, o)
	}
	if p.done {
		if !e.recovered {
			// Only a bitmap recovery read sets bits of a segment before its
			// pieces join; recoveredDone clears what they left.
			e.broken("a piece joins its lane already applied only during recovery: piece of %s (%d PARTs) joins %s",
				p.seg.ID, len(p.ordinals), g)
			return
		}
		o.done = append(o.done, p)
		return
	}
	if n := len(o.pieces); len(p.ordinals) == 0 || p.bytes < 0 || n > 0 && o.pieces[n-1].seg.ID.Compare(p.seg.ID) >= 0 {
		last := SnapshotID{}
		if n > 0 {
			last = o.pieces[n-1].seg.ID
		}
		e.broken("an open job's pieces ascend by segment, each of ≥ 1 PART: piece of %s (%d PARTs, %d bytes) joins %s after %s (%d pieces)",
			p.seg.ID, len(p.ordinals), p.bytes, g, last, n)
		return
	}
	if len(o.pieces) == 0 {
		o.since = e.openedAt(p.seg)
	}
	o.pieces = append(o.pieces, p)
	o.bytes += p.bytes
	p.seg.open++
	e.checkPending(p.seg)
}

// openedAt is when a piece of st opened its lane's job, on the monotonic
// clock: now for a segment this engine committed, its age by the wall
// clock for one recovery found (a restart does not reset a lane's wait).
func (e *Engine) openedAt(st *segState) time.Duration {
	now := e.now()
	if !e.recovered {
		return now
	}
	age := time.Duration(e.p.Clock.WallUnixMs()-st.Index.CreatedAtUnixMs) * time.Millisecond
	return now - min(max(age, 0), now)
}

func (ln *lane) openOf(g segment.Group) *openJob {
	for _, o := range ln.open {
		if o.group == g {
			return o
		}
	}
	return nil
}

func (e *Engine) lane(k laneKey) *lane {
	ln := e.lanes[k]
	if ln == nil {
		ln = &lane{key: k}
		e.lanes[k] = ln
		e.laneOrder = append(e.laneOrder, ln)
		if len(e.laneOrder) != len(e.lanes) {
			e.broken("every lane is in the lane order once: %d lanes, %d in order, after lane %s/%s", len(e.lanes), len(e.laneOrder), k.sinkRef, k.namespace)
		}
	}
	return ln
}

// endJob forms the job cut c of segment st ends: the open pieces of its
// group from c.First on. A job some of whose pieces are already applied,
// or with fewer live segments than the cut counted, was applied before
// (bits are set, and segments reclaimed, only after their jobs apply): it
// is applied, never offered to the sink again. It returns the job to
// queue (nil if none), and false if it failed closed.
func (e *Engine) endJob(st *segState, c segment.Cut) (*job, bool) {
	if !st.Index.Spanning {
		e.broken("a cut ends a job only in a segment of spanning jobs: segment %s, cut of %s", st.ID, c.Group)
		return nil, false
	}
	ln := e.lane(laneOf(c.Group))
	o := ln.openOf(c.Group)
	first := SnapshotID{Epoch: c.First.Epoch, Seq: c.First.Seq}
	j := &job{group: c.Group, cut: st, reason: c.Reason}
	var openBytes int64 // what the open job counted of the pieces it hands over
	if o != nil {
		e.settleLost(o, first)
		if !e.checkOpenFrom(st, c, o, first) {
			return nil, false
		}
		j.pieces, o.pieces = o.pieces, nil
		openBytes, o.bytes = o.bytes, 0
		for _, p := range o.done {
			if p.seg.ID.Compare(first) >= 0 {
				j.pieces = append(j.pieces, p)
			}
		}
		o.done = nil
		ln.dropOpen(o)
		slices.SortStableFunc(j.pieces, func(a, b piece) int { return a.seg.ID.Compare(b.seg.ID) })
		j.unknown = e.unboundedLost(j)
	}
	st.addJob(j)
	if len(j.pieces) == 0 {
		e.mark(MarkCutJobGone)
		j.state = jobApplied // every segment of it was reclaimed: applied
		return nil, true
	}
	if !e.checkCut(st, c, j) || !e.checkPieces(j) {
		return nil, false
	}
	if last := j.pieces[len(j.pieces)-1].seg; last.ID.Compare(st.ID) > 0 {
		// Segments register in id order and an open job's pieces ascend:
		// a PART of a later segment is one the cut did not count.
		e.broken("a job ends at its cut: job of %s cut in segment %s holds PARTs of the later segment %s", c.Group, st.ID, last.ID)
		return nil, false
	}
	e.markCut(c.Reason)
	j.id = compactionID(st.Index.Origin, st.ID, c)
	j.content = e.jobContent(j)
	applied := len(segmentsOf(j.pieces)) < int(c.Segments)
	var opened int64 // the bytes of the pieces that were open
	for i := range j.pieces {
		p := &j.pieces[i]
		j.bytes += p.bytes
		applied = applied || p.done
		if !p.done {
			opened += p.bytes
			p.seg.open--
			e.checkPending(p.seg)
		}
		p.seg.addJob(j)
	}
	if opened != openBytes {
		// The planner sized this cut, and the ones before it, by the open
		// job's count (cut.go).
		e.broken("an open job's bytes are its pieces': job of %s cut in segment %s: the open job counted %d bytes, its pieces hold %d",
			c.Group, st.ID, openBytes, opened)
		return nil, false
	}
	if applied {
		e.mark(MarkCutFoundApplied)
		e.setApplied(j)
		for _, seg := range segmentsOf(j.pieces) {
			if seg != st && seg.pending() == 0 {
				e.reclaim(seg)
			}
		}
		return nil, true
	}
	if e.recovered {
		e.mark(MarkCutReplayed)
	}
	return j, true
}

// dropOpen removes o from the lane's open jobs. REQUIRES: o is one of
// them, once.
func (ln *lane) dropOpen(o *openJob) {
	n := len(ln.open)
	ln.open = slices.DeleteFunc(ln.open, func(x *openJob) bool { return x == o })
	if len(ln.open) != n-1 {
		panic(fmt.Sprintf("engine: an open job dropped is one of its lane's, once: lane %s/%s, %s, %d open before, %d after",
			ln.key.sinkRef, ln.key.namespace, o.group, n, len(ln.open)))
	}
}

// segmentsOf lists the distinct segments of pieces (ascending).
func segmentsOf(ps []piece) []*segState {
	var out []*segState
	for _, p := range ps {
		if len(out) == 0 || out[len(out)-1] != p.seg {
			out = append(out, p.seg)
		}
	}
	return out
}

// checkPieces: a job's pieces are one per segment, in ascending segment
// id, each of at least one PART and no negative bytes — the order its
// content is fingerprinted in (jobContent), its sink sees its segments
// in, and segmentsOf relies on. O(pieces) ≤ the owned segments.
func (e *Engine) checkPieces(j *job) bool {
	for i, p := range j.pieces {
		if len(p.ordinals) == 0 || p.bytes < 0 || i > 0 && j.pieces[i-1].seg.ID.Compare(p.seg.ID) >= 0 {
			prev := SnapshotID{}
			if i > 0 {
				prev = j.pieces[i-1].seg.ID
			}
			e.broken("a job's pieces are one per segment, ascending, each of ≥ 1 PART: job %s (cut in segment %s, %s) piece %d of %d in %s after %s, %d PARTs, %d bytes",
				j.id, j.cut.ID, j.group, i, len(j.pieces), p.seg.ID, prev, len(p.ordinals), p.bytes)
			return false
		}
	}
	return true
}

// addJob queues a pending job on its lane (an applied one only joins its
// segments).
func (e *Engine) addJob(j *job) {
	if j.state != jobPending && j.state != jobApplied || j.state == jobPending && len(j.pieces) == 0 {
		e.broken("a job joins its lane pending with ≥ 1 piece, or its segments applied: job %s (cut in segment %s, %s) in state %d, %d pieces",
			j.id, j.cut.ID, j.group, j.state, len(j.pieces))
		return
	}
	for _, p := range j.pieces {
		p.seg.addJob(j)
	}
	j.cut.addJob(j)
	if j.state != jobPending {
		return
	}
	ln := e.lane(laneOf(j.group))
	e.checkLaneAppend(ln, j)
	ln.jobs = append(ln.jobs, j)
}

// setApplied records j applied: its bits set in every segment it holds.
func (e *Engine) setApplied(j *job) {
	if j.state != jobPending && j.state != jobRunning {
		e.broken("a job is applied once, from pending (found applied at its cut) or running: job %s (cut in segment %s, %s) in state %d",
			j.id, j.cut.ID, j.group, j.state)
		return
	}
	j.state = jobApplied
	for _, p := range j.pieces {
		for _, o := range p.ordinals {
			p.seg.applied.Set(o)
		}
	}
}

// compact starts jobs while the concurrency limit allows: among the lane
// heads that may start now, the one of the oldest first PART first (ties:
// lane creation order). Oldest-first is what keeps the WAL bounded: a
// segment is reclaimed only when every lane has applied its job, so a
// scheduler that let one busy lane take every slot would leave the other
// lanes' jobs — and with them every segment — waiting (seed 74).
func (e *Engine) compact() {
	if e.p.Sinks == nil || (e.state != stateReady && e.state != stateClosing) {
		return
	}
	if e.running >= e.cfg.CompactionConcurrency {
		return
	}
	now := e.now()
	heads := e.startableHeads(now)
	for _, j := range heads {
		if e.running >= e.cfg.CompactionConcurrency {
			return
		}
		if j.state != jobPending {
			// A head refused at its start (refuseJob) runs compact again,
			// which may have started the later heads of this list.
			continue
		}
		if ln := e.lanes[laneOf(j.group)]; ln == nil || len(ln.jobs) == 0 || ln.jobs[0] != j {
			e.broken("a job starts as its lane's head: job %s (cut in segment %s, %s), lane known %t",
				j.id, j.cut.ID, j.group, ln != nil)
			return
		}
		e.startJob(j)
	}
}

// startableHeads returns the lane heads that may start now, oldest
// first PART first.
func (e *Engine) startableHeads(now time.Duration) []*job {
	var heads []*job
	closing := e.state == stateClosing
	for _, ln := range e.laneOrder {
		if len(ln.jobs) > 0 && ln.jobs[0].startable(now, closing) {
			heads = append(heads, ln.jobs[0])
		}
	}
	slices.SortStableFunc(heads, func(a, b *job) int { return a.first().ID.Compare(b.first().ID) })
	return heads
}

// startable reports whether j may start now. While closing, a job that
// failed since the close began is left for the next start.
func (j *job) startable(now time.Duration, closing bool) bool {
	return j.state == jobPending && j.notBefore <= now && !(closing && j.failedClosing)
}

// drainPending reports whether a close must still wait for compaction:
// a job runs, a lane head may start, or a reclaim is deleting.
func (e *Engine) drainPending() bool {
	if e.running > 0 {
		return true
	}
	if e.p.Sinks != nil { // without sinks no job ever starts
		now := e.now()
		for _, ln := range e.laneOrder {
			if len(ln.jobs) > 0 && ln.jobs[0].startable(now, true) {
				return true
			}
		}
	}
	if e.closeGraceOver {
		return false
	}
	for _, st := range e.segs {
		// A reclaim in flight, or one that only waits — for the disk
		// log's flushed record, an in-doubt marker's lifetime, a cut's
		// bits elsewhere — ends within the grace: a clean stop leaves the
		// WAL empty (seen: a loaded box closed before a flushed record's
		// fsync, its segment left live).
		if st.reclaiming || !st.keep && !st.gone && st.pending() == 0 {
			return true
		}
	}
	return false
}

// gone reports whether a segment of j was reclaimed by another writer
// (fence.go): the job was applied there.
func (j *job) gone() bool {
	if j.cut.gone {
		return true
	}
	for _, p := range j.pieces {
		if p.seg.gone {
			return true
		}
	}
	return false
}

// jobDone records the outcome of a running job and moves its lane on.
func (e *Engine) jobDone(j *job, applied bool) {
	e.checkJobEnds(j)
	e.running--
	e.checkRunning()
	if j.gone() {
		e.compact()
		e.checkClosed()
		return
	}
	if applied {
		if j.unknown != nil {
			e.broken("a job of PARTs no live cut bounded is never applied: job %s (cut in segment %s) holds PARTs of %s, whose bitmap was lost",
				j.id, j.cut.ID, j.unknown.ID)
			return
		}
		e.setApplied(j)
		e.popLane(j)
		for _, st := range j.segments() {
			e.checkPending(st)
			if st.pending() == 0 {
				e.reclaim(st)
			} else {
				e.scheduleBitmap(st)
			}
		}
	}
	e.compact()
	e.checkClosed()
}

// segments lists every segment j holds PARTs of, then its cut segment
// if that holds none.
func (j *job) segments() []*segState {
	out := segmentsOf(j.pieces)
	if !slices.Contains(out, j.cut) {
		out = append(out, j.cut)
	}
	return out
}

func (e *Engine) popLane(j *job) {
	ln := e.lanes[laneOf(j.group)]
	if !e.checkLaneHead(ln, j) {
		return
	}
	if len(ln.jobs) > 0 && ln.jobs[0] == j {
		ln.jobs = ln.jobs[1:]
	}
	if len(ln.jobs) > 0 && ln.jobs[0].state != jobPending {
		h := ln.jobs[0]
		e.broken("only a lane's head runs: after job %s, lane %s/%s's next head %s (cut in segment %s) is in state %d",
			j.id, ln.key.sinkRef, ln.key.namespace, h.id, h.cut.ID, h.state)
	}
	if j.state != jobApplied {
		// Only an applied job leaves its lane: a failed one stays its head
		// (checkStillHead).
		e.broken("a job leaves its lane once applied: job %s (cut in segment %s, %s) left in state %d", j.id, j.cut.ID, j.group, j.state)
	}
}

// retryJob puts a failed job back at the head of its lane after a backoff.
func (e *Engine) retryJob(j *job) {
	e.checkJobEnds(j)
	e.mark(MarkSinkRetry)
	if e.state == stateClosing {
		e.mark(MarkCloseSinkFailing)
	}
	j.state = jobPending
	j.failures++
	d := e.backoff(j.failures)
	j.notBefore = e.now() + d
	j.failedClosing = e.state == stateClosing
	e.running--
	e.checkRunning()
	if !e.checkStillHead(j, "retried") {
		return
	}
	e.stats.SinkFailures++
	e.p.Timers.AfterFunc(d, e.compact)
	e.compact()
	e.checkClosed()
}

// refuseJob: the job's slices cannot be read. Alert; its segments are
// kept and its lane stops (order within the lane forbids skipping it).
func (e *Engine) refuseJob(j *job, err error) {
	e.checkJobEnds(j)
	e.mark(MarkJobRefused)
	j.state = jobRefused
	for _, st := range j.segments() {
		st.keep = true
	}
	e.running--
	e.checkRunning()
	e.checkStillHead(j, "refused")
	e.alert(alertKindOf(err, AlertCannotApply), err)
	e.compact()
	e.checkClosed()
}

// checkStillHead: a job that failed (retried, or refused: its lane stops)
// is still its lane's head — only the head runs, and only an applied job
// leaves — unless a segment of it was reclaimed by another writer, which
// took it out of its lane (reclaimedElsewhere).
func (e *Engine) checkStillHead(j *job, how string) bool {
	if j.gone() {
		return true
	}
	if ln := e.lanes[laneOf(j.group)]; ln == nil || len(ln.jobs) == 0 || ln.jobs[0] != j {
		n := 0
		if ln != nil {
			n = len(ln.jobs)
		}
		e.broken("a failed job stays its lane's head: job %s (cut in segment %s, %s) %s, lane of %d jobs", j.id, j.cut.ID, j.group, how, n)
		return false
	}
	return true
}
