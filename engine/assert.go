package engine

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// Assertions (STYLE.md, "Assertions and errors").
//
// The engine states its invariants as INVARIANT comments on the fields
// that carry them, and checks each one right after the mutation that
// could break it: a check names the invariant and carries the values
// involved, so that a failure says what broke and how, not only where.
//
// # Fail closed, or panic
//
// A check that fails means the engine's own state contradicts itself: a
// bug, found at runtime, possibly long after its cause. The engine fails
// closed (failClosed) with an error wrapping ErrInvariant: nothing more
// is acked or deleted, every unit it holds is answered ErrClosed, and the
// next start recovers from the store — the WAL is the truth, and recovery
// never reads the state that broke. Failing closed, rather than
// panicking, keeps those guarantees in production (the loop's other
// callbacks still run against a stopped engine instead of a half-updated
// one), and in the simulator it makes a broken invariant a violation of
// the seed that hit it — reported, reproduced and shrunk like any other
// (sim.World.checkEngine).
//
// A panic is right where the caller of an API breaks its contract and the
// state is not in question: Start called twice, a bitmap bit out of range
// in package segment (which has no engine to stop), a helper's REQUIRES
// broken by a direct caller. The stack then points at the culprit.
//
// # Cost
//
// A check is written
//
//	if got != want {
//		e.broken("held bytes = live + queued + active: held %d, …", got, …)
//	}
//
// so that a check that holds costs its comparison and nothing else: the
// message — and the boxing of its arguments into ...any, which escape to
// fmt — is built only on the failing branch. (A helper of the form
// assert(cond, format, args...) would allocate its arguments at every call,
// holding or not.) Checks that need a loop are methods below, bounded by a
// small limit (the queue, one segment's jobs or bits, the cache's entries)
// and run where that state changes, never per row or per byte.
// TestInvariantChecksDoNotAllocate holds them to zero allocations.
//
// # After failing
//
// failClosed keeps the first error. Checks that fail afterwards are not
// reported: a failed engine stops keeping some of its state (a job that
// ends after the failure is not counted out of running, for one). A check
// placed in the middle of a sequence that would go on acting — persist a
// snapshot, start a job, delete objects, open ingest — reports false and
// its caller returns, so that nothing is done on a state it could not
// trust; commit returns before its acks if the view, the cache or a
// count failed (failing closed answered those units). One exception: a
// check that fails in commit after the snapshot left the writer does not
// take back that snapshot's acks — its marker exists and the epoch was
// ours, so the units are committed, and failing closed no longer holds
// them.
//
// # The checks, and where they run
//
//   - held = live + queued + active (checkHeld): append, seal, commit,
//     persistFailed; and failing closed answers exactly what is held
//     (checkHeldAnswered, in failClosed).
//   - queue ≤ QueueCapacity, in id order after the active snapshot, the
//     replayed snapshots counted among those queued or active, no
//     negative count (writing.check, through checkQueue): seal, pump,
//     queueReplayed. Commits in id order, of the active snapshot
//     (checkCommit, lastCommit): commit.
//   - walSegments + live ≤ LiveSegmentsMax (checkWAL): append.
//   - one unanswered unit per offset key: append (ingest.go).
//   - 0 ≤ running ≤ CompactionConcurrency (checkRunning) after every
//     change; a job ends once per start (checkJobEnds): startJob, jobDone,
//     retryJob, refuseJob, bodyMissing.
//   - owned segments in id order (checkSegAppend), lanes in commit order
//     (checkLaneAppend): register. A lane applies its head (checkLaneHead):
//     popLane. One open job per lane (checkOpen, checkLaneOpen): register,
//     recoveredDone. A cut takes its whole open job (checkOpenFrom) and
//     holds what it counted or less (checkCut): endJob.
//   - open groups of a segment ≥ 0 (checkPending): jobDone. Reclaimed only
//     when every job is applied, no group open, every bit set, no pin
//     (checkReclaimable): reclaim.
//   - bitmap bits only get set: every write holds the previous one's bits
//     (checkBitmapWrite, writeBitmap); a merge keeps them (mergeBits).
//   - body cache: used = Σ sizes ≤ budget unless all pinned, nothing
//     negative (bodyCache.check): put, unpin, resize, drop.
//   - admission + cache ≤ pool (checkBudget): refreshBudget.
//   - writer record floor ≤ epoch, seals ascending below it
//     (writerRecord.check): before each write of the writer object.
//   - key store: bucket numbers one per bucket, ascending (bucket); a
//     committed key's bucket exists (durable). Offsets view: its order
//     sorted, every key it holds listed (sorted); one family per floor
//     (mergeFloor). One checkpoint round, and one write per key bucket,
//     at a time (writeCheckpoint; writeBucket, mergeKeys); a bucket held
//     by a lookup's read only while busy, with no keys in flight
//     (writeBucket, refreshBucket).
//   - a delivery only of a non-empty queue of answers: deliverAnswers.
//   - the accumulator: a part all CDC or all plain, its sidecar a row per
//     row (batchSet.accepts): every unit joining live or a replayed
//     generation; each part at its index, rows and bytes the sums of
//     what it holds (batchSet.check): prepend.
//   - the disk WAL: a log segment deleted only when nothing unflushed is
//     in it, not the append target, oldest first (wal.Partition's
//     checkDeleted, reported through logHooks.Broken): collect. A batch
//     fits its segment and continues the sequence (kick); one batch in
//     flight per partition (durable, failed). Recovery holds the units its
//     partition scan holds (scanSegment), finds segments in number order
//     (wal.Partition.Found) and resumes each partition from its own scan
//     (Resume). Units on their way into live ≥ 0 (joinLive).
//   - what is reported stays bounded: the alert queue ≤ AlertsMax
//     (alert), the namespaces counted one by one ≤ NamespacesTrackedMax
//     (namespace), the trouble events ≤ TroubleEventsMax (troubleEvent).
//   - staged procedures: a recovery round (recovery), a snapshot's commit
//     protocol (snapshot.stage), a log segment's creation (package wal's open) and a
//     multipart upload (multipart) each keep the stage they are in; every
//     step asserts on entry the stage it completes, so a callback that
//     arrives twice or out of order fails closed (checkStage).
//   - stage parts: admission (admission.check: a pending key is its
//     unit's, a pending offset key one of its offsets and no floor, a
//     lookup has a waiter, the rate is a rate) at seal and commit; the
//     writer (writing.check, above); the compactor (compaction.check:
//     running within the concurrency, one lane-order entry per lane, owned
//     segments in id order) where segments join and leave; the
//     checkpointer (checkpointing.check: no waiter without a round) where
//     waiters wait.
//   - pre- and postconditions of the long functions, each with its
//     values: a port's callback answers once (forEach, retryStop, the
//     header write), every retry loop within AttemptsMax, a batch fits its
//     segment, cuts only for the active snapshot, a body prepared once,
//     recovery opened once, a replay only of complete seals. shape_test.go
//     holds every function over 30 lines to at least one.
//   - each step's hand-over: a recovery round's claimed epoch above its
//     floor, its listing in id order, seals that keep the claim
//     (checkSealed), owned segments in id order with their indexes
//     (checkOwned); a persist only of the active snapshot, a marker after
//     its body, a multipart completed only with every part landed
//     (checkPartsLanded); a bitmap a bit per PART, its writes never
//     overlapping; a streamed pass reading each chunk once
//     (checkStreamed); a trouble on record failing since it started
//     (checkTrouble); alerts and trouble events numbered one by one; a
//     family's floor still held once merged (mergeFloor).
//   - the compaction planner (planner.go: cutPlanner.checkInput,
//     checkCuts): sizes ≥ 0, one open job per lane, open jobs older than
//     the segment cut; cuts in canonical order, one per group, each with
//     a reason — reported through its invariantHook.
//   - a port answers once: a sink's Apply (apply), the executor's decode
//     of a piece (gather) and encoding of a body (prepare), an _offsets
//     write (writeSources), a key bucket's write (writeBucket), a body
//     made ahead (bodyAhead.finish); and a timer fires once, while armed
//     (onFlushTimer, armInterval, scheduleBitmap, persistFailed's
//     backoff, Close's grace, the disk log's sync timer).
//   - every store request before it goes out (countingStore): its key or
//     prefix under the pipeline's root (checkKey), a GET bounded with its
//     range and its answer within the limit, a part numbered 1..10000
//     and not empty, a completion with 1..10000 parts, an abort with its
//     upload id; a refused request is answered with the failure, never
//     nil. A multipart upload is created once, its parts started and its
//     completion sent only in their stages (multipart).
//   - registering a segment: its pieces hold each of its PARTs once, one
//     piece per group (checkPiecesCover); a job joins a segment it holds
//     PARTs of or ends with (addJob); an open job dropped is its lane's,
//     once (dropOpen); the planner extends an open job by at most one of
//     its own group (pendingCut).
//   - the disk log's seam (wal_disk*.go): a unit made durable is a fresh
//     one its submitters wait for, it joins live once durable, a failed
//     batch's unit is answered once with its failure, a snapshot dated
//     once at its seal and its seal record carrying that date, a
//     committed snapshot's segment its own; recovery asks the log about
//     its generations only between reading it and replaying it, a seal
//     record names units of its partition, and a seal's ranges are
//     bounded by its partition's scan before they are walked (claim).
//     The log's core (package wal) checks its own steps: an entry
//     appended once, a batch of entries on an open segment, a segment
//     reported created open past its header, only the oldest segment
//     removed, by collect.
//   - the key store and the writer: bucket numbers ≥ 0, keys in flight
//     only while a write holds their bucket, a bucket write ending once
//     while it holds it, a manifest read only while held, a run's count
//     bounded before its read sizes anything, a merged run between its
//     largest input and their sum; a writer record within sealsMax seals
//     and writerObjectLimit bytes when encoded, a claim within
//     ClaimRoundsMax rounds, a log identity drawn non-zero within
//     walIDDrawsMax draws.
//   - the writer's steps: a flush delay positive (flushDelay), the flush
//     timer only for a live accumulator holding units (onFlushTimer), live
//     dated no later than its seal (seal), no queued snapshot persisting
//     (writing.check), nothing queued or active when a backoff ends
//     (persistFailed); a body made ahead only where its log allows,
//     holding its units' rows (prepare); no marker for a dropped body, and
//     a marker only for a body with a PART per part and its snapshot's
//     date (putMarkerOf); a persist time ≥ 0, and a unit acked at its
//     fsync with no submitter left at its commit (commit).
//   - admission's keys and live: a pending key's unit unanswered
//     (admission.check; joinDuplicate by offsets); a submitted unit holds
//     its keys until released at its answer (releaseKeys); a log refuses
//     only as backpressure or for a halted partition (room); a unit joins
//     live once (batchSet.add, O(1)), with the rows it is counted for, and
//     live fits a segment after it (joinLive); a set released once
//     (releaseOffLoop); an acked unit has submitters (countAcked). The S3
//     log persists only fresh snapshots of no generation (beforePersist).
//   - store requests' objects (countingStore): a PUT never both If-Match
//     and If-None-Match; the writer object and _offsets written only
//     conditionally and never deleted; a multipart upload of a segment
//     body only; no DELETE once the engine failed (not a check: the rule
//     that nothing is deleted after failing closed, held in one place).
//   - deletes: a segment reclaimed is owned (reclaim); each step of its
//     deletes runs while its reclaim does, a marker before its segment's
//     other objects (deleteInOrder, deleteOnce), and once they are gone it
//     is still reclaimable (deleteSegment); a bitmap recovery could not
//     read is never written over (writeBitmap), its segment kept once its
//     lost PARTs are settled (settleLost); the sweeper and the fence run
//     only once recovery opened ingest (sweep, stillOurs); an orphan swept
//     has a body or bitmap listed (sweepOrphan).
//   - jobs forming and running: a segment without spanning jobs is one
//     recovery found, with no cuts (register); an applied piece joins a
//     lane only during recovery (joinOpen); a cut ends a job only in a
//     segment of spanning jobs, the job ends at its cut, the open job's
//     bytes its pieces' (endJob); a job starts on live segments only
//     (startJob), holds one body per piece read in place and none when it
//     copies (gather), ends its reservation while it runs (unreserve), and
//     leaves its lane applied (popLane).
//   - the key store's holds: a bucket held by a write or by a lookup's
//     read, never both — a write ends, writes its manifest and hears its
//     answer, a merge reads its inputs, fails its run and replaces its
//     runs only while the hold is its own (writeBucket, putManifest,
//     mergeKeys, replaceRuns); a read takes and frees a bucket with no keys
//     in flight (refreshBucket); the store's bucket held until its
//     manifest and its runs' metas are answered (readBucketTry); a run's
//     encoding and a manifest write answered once (putRun, putManifest).
//   - the offsets view: a floor drops only the keys it covers
//     (dropCovered); a family's floor held while it is the family's
//     (mergeFloor); _offsets read, or found lost, with no write in flight
//     (mergeObject, objectLost).
//   - the disk log: a unit accepted by a partition that takes writes
//     (accept); a flushed generation never live's (recordFlushed); an
//     unknown answer a unit's (Unknown); the log's read answers once and
//     its retry fires once (recoverLog); segments read while recovery
//     holds its scan, none of a halted partition, each unit held once
//     (readSegment, scanSegment); an owned segment of a logged generation
//     still waits for the log at replay (replay). The log core
//     (engine/wal): a batch's write answered before its fsync (write); a
//     failed creation's and removal's retry timers fire once (rolled,
//     retryCollect); a file opened is open, its size not negative
//     (readSegment, readOpen).
//   - configuration derived after New: the valve within the WAL's bound
//     (Valve), a lane's limits the validated ones (LanesOf), a close's
//     grace not negative (stopGrace); a retry has its stop and done
//     (retryStop); pure helpers' REQUIRES: a spanning job's id names its
//     log (compactionID), a legacy job's ordinals ascend
//     (legacyCompactionID), a streamed body's chunks come in order without
//     gaps (keepWindows) — panics.

// invariantError is the error of a broken invariant: ErrInvariant and the
// message.
func invariantError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}

// broken fails the engine closed on a broken invariant. The message names
// the invariant, then the values involved.
func (e *Engine) broken(format string, args ...any) {
	e.failClosed(invariantError(format, args...))
}

// invariantHook is how a helper without an engine (bodyCache,
// offsetsView) reports a broken invariant: the engine sets it to
// failClosed. A helper with no hook — one under a unit test of its own —
// panics instead.
type invariantHook func(error)

func (h invariantHook) broken(format string, args ...any) {
	err := invariantError(format, args...)
	if h == nil {
		panic(err)
	}
	h(err)
}

// checkHeld: held = live.bytes + Σ queue bytes + active bytes. It can
// break wherever units enter (append), move between the sets (seal,
// persistFailed) or leave (commit).
func (e *Engine) checkHeld() bool {
	if queued, active, ok := e.heldSum(); !ok {
		e.broken("held bytes = live + queued + active: held %d, live %d, queued %d (%d snapshots), active %d",
			e.held, e.live.bytes, queued, len(e.queue), active)
		return false
	}
	return true
}

// checkHeldAnswered: failing closed answers every unit of live, the queue
// and the active snapshot, so those must be all that is held. A mismatch
// is reported in place of err (and names it).
func (e *Engine) checkHeldAnswered(err error) error {
	if errors.Is(err, ErrInvariant) {
		return err
	}
	if queued, active, ok := e.heldSum(); !ok {
		return invariantError("held bytes = live + queued + active when failing closed: held %d, live %d, queued %d (%d snapshots), active %d; failing closed on: %v",
			e.held, e.live.bytes, queued, len(e.queue), active, err)
	}
	return err
}

// heldSum sums the queued and active snapshots' bytes and reports whether
// held is what live, they and nothing else hold. O(QueueCapacity).
func (e *Engine) heldSum() (queued, active int64, ok bool) {
	for _, s := range e.queue {
		queued += s.content.bytes
	}
	if e.active != nil {
		active = e.active.content.bytes
	}
	queued += e.dlog.heldBytes() // units on their way into live (disk WAL)
	return queued, active, e.held == e.live.bytes+queued+active && e.held >= 0
}

// checkQueue runs the writer's whole-state check (writing.check). It
// can break where a snapshot is sealed into the queue or leaves it for
// the writer.
func (e *Engine) checkQueue() bool {
	return e.invariantHolds(e.writing.check(e.cfg.QueueCapacity, e.cfg.liveBytes()))
}

// invariantHolds fails the engine closed on err, a stage part's broken
// whole-state check, and reports whether the check held (err nil).
func (e *Engine) invariantHolds(err error) bool {
	if err != nil {
		e.failClosed(err)
		return false
	}
	return true
}

// checkCommit: the snapshot committing is the one being persisted, and
// it comes after the last commit (commits happen in snapshot-id order).
func (e *Engine) checkCommit(s *snapshot) bool {
	if s != e.active || s.id.Compare(e.lastCommit) <= 0 || s.id.Epoch != e.epoch && !s.replayed {
		active := SnapshotID{}
		if e.active != nil {
			active = e.active.id
		}
		e.broken("commits in snapshot-id order, of the active snapshot: commit %s, active %s, last committed %s, epoch %d",
			s.id, active, e.lastCommit, e.epoch)
		if s != e.active { // failing closed answered the others
			for _, u := range s.content.units {
				for _, d := range u.dones {
					e.answer(d, fmt.Errorf("%w: %v", ErrClosed, e.err))
				}
			}
		}
		return false
	}
	return true
}

// checkWAL: after admission a unit joins the live accumulator, so
// walSegments() + 1 ≤ LiveSegmentsMax (ingest.go). Called from append,
// where a unit has just made live non-empty.
func (e *Engine) checkWAL() {
	if n := e.walSegments(); n+1 > e.cfg.LiveSegmentsMax {
		e.broken("walSegments + live ≤ LiveSegmentsMax: %d segments owned, %d queued, active %t, and live, limit %d",
			len(e.segs), len(e.queue), e.active != nil, e.cfg.LiveSegmentsMax)
	}
}

// checkCutOnlyRoom: a cut-only segment takes a WAL slot no unit
// reserved, so it is sealed only with room left for the units on their
// way into live (cutOnlyDue): walSegments() + onTheWay ≤
// LiveSegmentsMax, the new snapshot counted. Called from seal.
func (e *Engine) checkCutOnlyRoom() {
	if n, w := e.walSegments(), e.dlog.onTheWay(); n+w > e.cfg.LiveSegmentsMax {
		e.broken("a cut-only segment leaves a WAL slot to each unit on its way into live: %d segments owned, %d queued, active %t, %d units on their way, limit %d",
			len(e.segs), len(e.queue), e.active != nil, w, e.cfg.LiveSegmentsMax)
	}
}

// checkRunning: 0 ≤ running ≤ CompactionConcurrency, after every change
// of running. compact starts a job only while running is below the limit,
// one increment per start, so even a burst of starts stays within it.
func (e *Engine) checkRunning() bool {
	if e.running < 0 || e.running > e.cfg.CompactionConcurrency {
		e.broken("0 ≤ running ≤ CompactionConcurrency: running %d, limit %d", e.running, e.cfg.CompactionConcurrency)
		return false
	}
	return true
}

// checkJobEnds: a job ends (applied, retried, refused) only while it
// runs, once per start; a second end would count it out of running twice.
func (e *Engine) checkJobEnds(j *job) {
	if j.state != jobRunning {
		e.broken("a job ends once per start: job %s (cut in segment %s) ends in state %d", j.id, j.cut.ID, j.state)
	}
}

// checkLaneAppend: a lane's jobs are in the order of their first PART
// (segment, then ordinal), so rows reach a table in commit order. Called
// before j joins the end of ln.
func (e *Engine) checkLaneAppend(ln *lane, j *job) {
	if len(ln.jobs) == 0 {
		return
	}
	last := ln.jobs[len(ln.jobs)-1]
	c := last.first().ID.Compare(j.first().ID)
	if c > 0 || c == 0 && last.pieces[0].ordinals[0] >= j.pieces[0].ordinals[0] {
		e.broken("lane %s/%s in commit order: job starting in segment %s (ordinal %d) queued after one starting in %s (ordinal %d)",
			ln.key.sinkRef, ln.key.namespace, j.first().ID, j.pieces[0].ordinals[0], last.first().ID, last.pieces[0].ordinals[0])
	}
}

// checkLaneHead: the job applied is its lane's head — a lane runs one job
// at a time, in order. Called before popping it.
func (e *Engine) checkLaneHead(ln *lane, j *job) bool {
	if ln == nil || len(ln.jobs) == 0 || ln.jobs[0] != j {
		head, n := "none", 0
		if ln != nil && len(ln.jobs) > 0 {
			h := ln.jobs[0]
			head, n = fmt.Sprintf("%s (cut in segment %s)", h.id, h.cut.ID), len(ln.jobs)
		}
		e.broken("a lane applies its head first: job %s (cut in segment %s, %s) applied, lane head %s, %d jobs",
			j.id, j.cut.ID, j.group, head, n)
		return false
	}
	return true
}

// checkSegAppend: owned segments are in id order. Called before st joins.
func (e *Engine) checkSegAppend(st *segState) {
	if n := len(e.segs); n > 0 && e.segs[n-1].ID.Compare(st.ID) >= 0 {
		e.broken("owned segments in id order: %s registered after %s", st.ID, e.segs[n-1].ID)
	}
}

// checkPending: a segment's open groups are never negative, after a job
// of it is applied.
func (e *Engine) checkPending(st *segState) {
	if st.open < 0 || st.open > len(st.Index.Entries) {
		e.broken("0 ≤ open groups ≤ parts of a segment: segment %s, %d open, %d parts", st.ID, st.open, len(st.Index.Entries))
	}
}

// checkOpen: once a segment is registered, each lane it touched (its
// groups') has one open job at most — a lane never waits on two files at once.
func (e *Engine) checkOpen(groups []segment.Group) {
	for _, g := range groups {
		if ln := e.lanes[laneOf(g)]; ln != nil {
			e.checkLaneOpen(ln)
		}
	}
}

func (e *Engine) checkLaneOpen(ln *lane) {
	var held []*openJob // the open jobs holding pieces
	for _, o := range ln.open {
		if len(o.pieces) > 0 {
			held = append(held, o)
		}
	}
	if len(held) > 1 {
		e.broken("a lane has one open job at most: lane %s/%s has %d (groups %s from %s and %s from %s)", ln.key.sinkRef, ln.key.namespace,
			len(held), held[0].group, held[0].first(), held[1].group, held[1].first())
	}
}

// checkOpenFrom: a cut takes its group's whole open job — no open PART
// lies before the cut's First. One that did would belong to an earlier
// job whose cut was reclaimed before that job's bits were durable here,
// which reclaim forbids (cutWaits).
func (e *Engine) checkOpenFrom(st *segState, c segment.Cut, o *openJob, first SnapshotID) bool {
	if len(o.pieces) > 0 && o.first().Compare(first) < 0 {
		e.broken("a cut takes its whole open job: cut of %s in segment %s starts at %s, an unapplied PART of the group waits in %s",
			c.Group, st.ID, first, o.first())
		return false
	}
	return true
}

// checkCut: the job formed holds what its cut counted, or less of it
// (segments reclaimed), never more — more, or other PARTs in the same
// segments, is a log that does not say what was committed.
func (e *Engine) checkCut(st *segState, c segment.Cut, j *job) bool {
	segs, parts := len(segmentsOf(j.pieces)), 0
	for _, p := range j.pieces {
		parts += len(p.ordinals)
	}
	if segs > int(c.Segments) || segs == int(c.Segments) && parts != int(c.Parts) {
		e.failClosed(fmt.Errorf("%w: cut of %s in segment %s counts %d parts in %d segments from %s; the live segments hold %d parts in %d",
			ErrCorrupt, c.Group, st.ID, c.Parts, c.Segments, c.First, parts, segs))
		return false
	}
	return true
}

// checkReclaimable: a segment is reclaimed only when every job of it is
// applied, no group of it waits in an open lane, every bit of its bitmap
// is set, and no job still reads its body. Deleting it otherwise would
// lose committed rows. O(jobs + parts/8) once per reclaim.
func (e *Engine) checkReclaimable(st *segState) bool {
	unapplied := 0
	for _, j := range st.jobs {
		if j.state != jobApplied {
			unapplied++
		}
	}
	pins := 0
	if ce := e.cache.entries[st.ID]; ce != nil {
		pins = ce.pins
	}
	if st.open != 0 || unapplied != 0 || !st.applied.AllSet() || pins != 0 {
		e.broken("a reclaimed segment is fully applied: segment %s, %d groups open, %d of %d jobs not applied, %d of %d bits set, body pinned %d times",
			st.ID, st.open, unapplied, len(st.jobs), st.applied.Count(), st.applied.Len(), pins)
		return false
	}
	return true
}

// checkBitmapWrite: bits only get set, so every bitmap written for a
// segment holds every bit of the one written before. It remembers what
// this write holds for the next. O(parts) per write, and writes are
// coalesced (BitmapDelay).
func (e *Engine) checkBitmapWrite(st *segState) bool {
	if prev := st.written; prev != nil {
		for i := range prev.Len() {
			if o := segment.SliceOrdinal(i); prev.IsSet(o) && !st.applied.IsSet(o) {
				e.broken("bitmap bits only get set: segment %s, bit %d written before is clear now (%d bits set, %d before)",
					st.ID, i, st.applied.Count(), prev.Count())
				return false
			}
		}
	}
	st.written = st.applied.Clone()
	return true
}

// mergeBits ORs a bitmap read back from the store into st's: the same
// segment's (same length), and a merge never loses a bit.
func (e *Engine) mergeBits(st *segState, b *segment.Bitmap) {
	before := st.applied.Count()
	if err := st.applied.Merge(b); err != nil || st.applied.Count() < before {
		e.broken("bitmap bits only get set: merge into segment %s: %d bits set before, %d after (%v)",
			st.ID, before, st.applied.Count(), err)
	}
}

// checkBudget: admission + cache ≤ pool, none negative.
func (e *Engine) checkBudget() {
	if b := e.budget; b.admission+b.cache > b.pool || b.admission < 0 || b.cache < 0 {
		e.broken("admission + cache ≤ pool: admission %d, cache %d, pool %d", b.admission, b.cache, b.pool)
	}
}

// check verifies the cache's accounting after a change: used and reserved
// are not negative, used = Σ entry sizes (sum: only where an entry was
// added), and used ≤ budget unless every entry is pinned (a budget that
// shrank under pinned bodies; they stay, and go once unpinned).
func (c *bodyCache) check(sum bool) {
	if c.used < 0 || c.reserved < 0 {
		c.inv.broken("body cache bytes not negative: used %d, reserved %d", c.used, c.reserved)
		return
	}
	if sum {
		total := int64(0)
		//engine:orderless — a sum.
		for _, ce := range c.entries {
			total += ce.size
		}
		if total != c.used {
			c.inv.broken("body cache used = Σ entry sizes: used %d, entries %d hold %d", c.used, len(c.entries), total)
			return
		}
	}
	if c.used > c.budget {
		if pinned := c.pinnedBytes(); pinned != c.used {
			c.inv.broken("body cache used ≤ budget unless all pinned: used %d, budget %d, pinned %d, %d entries",
				c.used, c.budget, pinned, len(c.entries))
		}
	}
}

// check verifies what a writer record promises (writer.go) before it is
// written: floor ≤ epoch, seals in ascending epoch and all below the floor.
func (w writerRecord) check() error {
	if w.floor > w.epoch {
		return invariantError("writer record floor ≤ epoch: floor %d, epoch %d", w.floor, w.epoch)
	}
	for i, s := range w.seals {
		if s.epoch >= w.floor || i > 0 && s.epoch <= w.seals[i-1].epoch {
			return invariantError("writer record seals ascending, below the floor: seal %d of epoch %d, floor %d", i, s.epoch, w.floor)
		}
	}
	return nil
}
