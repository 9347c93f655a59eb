package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// Compaction (docs/DESIGN.md §8) applies committed segments to their sinks,
// slice by slice, exactly once, then reclaims them.
//
// Jobs: the PARTs of one segment that share a sink, a namespace, a schema
// and CDC-ness form one job, in ordinal order — a pure function of the segment
// index, so a job replayed after a crash has the same membership and the
// same compaction_id = hash(WAL id, pipeline, snapshot id, sink_ref,
// sorted ordinals) (compactionID).
//
// Lanes: the jobs of one (sink, namespace) run one at a time in segment
// id order, so rows reach a table in commit order. Different lanes run in
// parallel, up to CompactionConcurrency jobs at once.
//
// Progress: an applied job's ordinals are set in the segment's completion
// bitmap (kept in memory, written beside the segment after BitmapDelay if
// the segment is still incomplete). A fully applied segment is reclaimed
// (reclaim.go). A crash loses at most bits not yet written: those jobs are
// applied again, and the sink, replay-safe on the id, ignores them.

// segState is an owned segment and its compaction progress.
//
// INVARIANT: applied has one bit per PART; a bit is set iff the job
// holding that ordinal was applied (or a durable bitmap said so); bits
// only get set (checkBitmapWrite, mergeBits).
// INVARIANT: pending = the jobs not applied: 0 ≤ pending ≤ len(jobs)
// (checkPending), and 0 only once every job is applied and every bit set
// (checkReclaimable).
type segState struct {
	Segment
	jobs    []*job
	applied *segment.Bitmap
	pending int  // jobs not applied yet
	keep    bool // never reclaim: unreadable bitmap or a refused job

	// written: the bits of the last bitmap write started (nil before the
	// first); every later write holds them all.
	written *segment.Bitmap

	flushCancel func() // pending bitmap write
	writing     bool   // a bitmap PUT is in flight
	dirty       bool   // bits set since the write in flight started
	bitmapETag  string // version of the bitmap object last read or written; "" if none
	reclaiming  bool
	gone        bool // another writer reclaimed it (fence.go)
	// logPending (disk WAL): the log has not yet durably recorded that
	// this segment's generation is flushed. Until it has, the segment is
	// not reclaimed: a crash would replay the generation from the log,
	// and only the segment still being there (owned) stops that replay.
	logPending bool
	// reclaimAfter: an ambiguous marker PUT of ours may land until then;
	// deleting the marker earlier could let it come back without a body.
	reclaimAfter time.Duration
}

type jobState uint8

const (
	jobPending jobState = iota
	jobRunning
	jobApplied
	jobRefused // its slices cannot be read (corruption): alert, never applied
)

// job is one compaction job of a segment.
type job struct {
	seg       *segState
	id        string
	content   string // jobContent: what a sink compares under an existing id
	sinkRef   string
	namespace string
	schema    segment.SchemaFingerprint
	ordinals  []segment.SliceOrdinal
	bytes     int64 // payload bytes of its PARTs
	state     jobState
	notBefore time.Duration // retry backoff after a sink failure
	failures  int
	// failedClosing: it failed while the engine was closing, so the close
	// does not retry it (the next start will).
	failedClosing bool
}

// lane is the queue of one (sink, namespace).
//
// INVARIANT: jobs in segment order, and in ordinal order within a segment
// (checkLaneAppend); only the head runs, and it leaves when applied
// (checkLaneHead).
type lane struct {
	key  laneKey
	jobs []*job
}

type laneKey struct{ sinkRef, namespace string }

// newSegState groups a segment's PARTs into jobs.
func newSegState(s Segment, applied *segment.Bitmap) *segState {
	st := &segState{Segment: s, applied: applied}
	type groupKey struct {
		sink, ns string
		schema   segment.SchemaFingerprint
		cdc      bool
	}
	byKey := map[groupKey]*job{}
	for _, e := range s.Index.Entries {
		k := groupKey{e.Key.SinkRef, e.Key.Namespace, e.Key.Schema, e.HasSidecar()}
		j := byKey[k]
		if j == nil {
			j = &job{seg: st, sinkRef: k.sink, namespace: k.ns, schema: k.schema}
			byKey[k] = j
			st.jobs = append(st.jobs, j) // in order of first ordinal
		}
		j.ordinals = append(j.ordinals, e.Ordinal)
		j.bytes += e.End() - e.ArrowStart
	}
	for _, j := range st.jobs {
		j.id = compactionID(s.Index.Origin, s.ID, j.ordinals, j.sinkRef)
		j.content = jobContent(s.Index.BodySum, j.ordinals)
		if j.allSet(applied) {
			j.state = jobApplied
		} else {
			st.pending++
		}
	}
	return st
}

func (j *job) allSet(b *segment.Bitmap) bool {
	for _, o := range j.ordinals {
		if !b.IsSet(o) {
			return false
		}
	}
	return true
}

// compactionID names a job for its sink, which dedupes on it
// (docs/DESIGN.md §8.1). It is a pure function of the committed segment
// and the job's ordinals (sorted, in index order), so a job replayed after
// a crash, on a new host or past a zombie has the same id:
//
//	origin set:  {pipeline}-hex(SHA-256("skipprd-job 2" 0 wal_id pipeline 0
//	                 snapshot_id 0 sink_ref 0 ordinals as u32 LE))[:32]
//	legacy:      hex(SHA-256(snapshot_id 0 sink_ref 0 ordinals as u32 LE))[:32]
//
// The WAL id makes ids unique across logs: snapshot ids start at
// 000000000001-000000000001 in every log, and two pipelines writing one
// destination must never meet each other's ids. The pipeline name is
// there for people reading a file name or a row. A segment committed
// before logs had identities (a version 1 marker: zero origin) keeps the
// id it had, so a job applied under it before an upgrade is found
// applied after it.
func compactionID(o segment.Origin, id SnapshotID, ordinals []segment.SliceOrdinal, sinkRef string) string {
	h := sha256.New()
	if !o.IsZero() {
		h.Write([]byte("skipprd-job 2\x00"))
		h.Write(o.WAL[:])
		h.Write([]byte(o.Pipeline))
		h.Write([]byte{0})
	}
	h.Write([]byte(id.String()))
	h.Write([]byte{0})
	h.Write([]byte(sinkRef))
	h.Write([]byte{0})
	writeOrdinals(h, ordinals)
	sum := hex.EncodeToString(h.Sum(nil)[:16])
	if o.IsZero() {
		return sum
	}
	return o.Pipeline + "-" + sum
}

// jobContent fingerprints exactly the rows a job carries: its segment's
// body checksum and its ordinals. A sink records it beside the job's id
// and, finding the id already applied, compares: another content under
// the same id is another job (ErrIDCollision), never "applied".
func jobContent(bodySum [32]byte, ordinals []segment.SliceOrdinal) string {
	h := sha256.New()
	h.Write([]byte("skipprd-job-content 1\x00"))
	h.Write(bodySum[:])
	writeOrdinals(h, ordinals)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func writeOrdinals(h hash.Hash, ordinals []segment.SliceOrdinal) {
	var b [4]byte
	for _, o := range ordinals {
		binary.LittleEndian.PutUint32(b[:], uint32(o))
		h.Write(b[:])
	}
}

// register adds an owned segment: its pending jobs join their lanes.
func (e *Engine) register(st *segState) {
	e.checkSegAppend(st)
	if st.Index.Origin.IsZero() {
		e.mark(MarkLegacyOrigin) // committed by a build before WAL identities: legacy ids
	}
	e.segs = append(e.segs, st)
	for _, j := range st.jobs {
		if j.state != jobPending {
			continue
		}
		k := laneKey{j.sinkRef, j.namespace}
		ln := e.lanes[k]
		if ln == nil {
			ln = &lane{key: k}
			e.lanes[k] = ln
			e.laneOrder = append(e.laneOrder, ln)
		}
		e.checkLaneAppend(ln, j)
		ln.jobs = append(ln.jobs, j)
	}
	if st.pending == 0 {
		e.reclaim(st)
	}
}

// compact starts jobs while the concurrency limit allows: among the lane
// heads that may start now, the one of the oldest segment first (ties:
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
		e.startJob(j)
	}
}

// startableHeads returns the lane heads that may start now, oldest
// segment first.
func (e *Engine) startableHeads(now time.Duration) []*job {
	var heads []*job
	closing := e.state == stateClosing
	for _, ln := range e.laneOrder {
		if len(ln.jobs) > 0 && ln.jobs[0].startable(now, closing) {
			heads = append(heads, ln.jobs[0])
		}
	}
	slices.SortStableFunc(heads, func(a, b *job) int { return a.seg.ID.Compare(b.seg.ID) })
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
		if st.reclaiming {
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
	st := j.seg
	if st.gone {
		e.compact()
		e.checkClosed()
		return
	}
	if applied {
		j.state = jobApplied
		for _, o := range j.ordinals {
			st.applied.Set(o)
		}
		st.pending--
		e.checkPending(st)
		e.popLane(j)
		if st.pending == 0 {
			e.reclaim(st)
		} else {
			e.scheduleBitmap(st)
		}
	}
	e.compact()
	e.checkClosed()
}

func (e *Engine) popLane(j *job) {
	ln := e.lanes[laneKey{j.sinkRef, j.namespace}]
	if !e.checkLaneHead(ln, j) {
		return
	}
	if len(ln.jobs) > 0 && ln.jobs[0] == j {
		ln.jobs = ln.jobs[1:]
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
	e.stats.SinkFailures++
	e.p.Timers.AfterFunc(d, e.compact)
	e.compact()
	e.checkClosed()
}

// refuseJob: the job's slices cannot be read. Alert; its segment is kept
// and its lane stops (order within the lane forbids skipping it).
func (e *Engine) refuseJob(j *job, err error) {
	e.checkJobEnds(j)
	e.mark(MarkJobRefused)
	j.state = jobRefused
	j.seg.keep = true
	e.running--
	e.checkRunning()
	e.alert(alertKindOf(err, AlertCannotApply), err)
	e.compact()
	e.checkClosed()
}
