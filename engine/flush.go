package engine

import (
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// writing is the coalescing writer's state: the epoch it writes under,
// the live accumulator, the sealed snapshots queued and the one being
// persisted.
type writing struct {
	epoch       uint64 // this incarnation's writer epoch; 0 until claimed
	writerNonce uint64 // the nonce of our claim in the writer object
	// origin names the log this engine commits for: the WAL id of the
	// writer object and the pipeline. INVARIANT: non-zero once the epoch
	// is claimed (recovery.claimed); every marker it writes carries it
	// (putMarkerOf).
	origin  segment.Origin
	writer  writerRecord // the writer object as recovery left it (seals)
	nextSeq uint64       // next snapshot sequence within the epoch

	live        *batchSet
	liveSince   time.Duration // Monotonic time of the first append into live
	flushCancel func()        // pending flush-delay timer, nil if none
	flushDue    bool          // the delay fired (or live reached target)
	// INVARIANT: len(queue) + (1 if active) ≤ cfg.QueueCapacity + 1 — a
	// failed persist may seal its snapshot again into the queue
	// (regroup) — or the replayed ones, right after recovery; snapshots
	// in id order, after active's (checkQueue).
	queue   []*snapshot
	active  *snapshot // being persisted; at most one, so commits happen in id order
	cooling bool      // backing off after a persist failure
	// INVARIANT: held = live.bytes + Σ queue bytes + active bytes
	// (checkHeld).
	held     int64
	failures int // consecutive persist failures
	// INVARIANT: lastCommit < every snapshot id queued or active; each
	// commit is of a later id (checkCommit).
	lastCommit SnapshotID
	// replayed counts the disk WAL's replayed snapshots still queued or
	// active; they may exceed QueueCapacity right after recovery.
	replayed int

	persistEMA  time.Duration // 0 until the first commit
	ackDelayEMA time.Duration
}

// check is the writer's whole-state check: live within its bound
// (liveMax) unless it holds one unit; the sealed snapshots held,
// queued and active, at most capacity + 1 (or the replayed snapshots,
// which may exceed it right after recovery, + 1); the
// active snapshot and the queue in id order after the last commit (so
// that commits are), no queued snapshot persisting; the replayed
// snapshots counted are queued or active;
// the failure count and the moving averages are not negative. Its loop is
// bounded by the queue (QueueCapacity, or what recovery replayed).
func (w *writing) check(capacity int, liveMax int64) error {
	if len(w.live.units) > 1 && w.live.bytes > liveMax {
		// roomFor keeps live within its bound, and a failed persist's
		// sets join it only while they fit (regroup): past it, its seal
		// may not encode, or break the bound a world set.
		return invariantError("live holds at most its bound, or one unit: %d units of %d bytes, bound %d", len(w.live.units), w.live.bytes, liveMax)
	}
	held := len(w.queue)
	if w.active != nil {
		held++
	}
	if held > max(capacity, w.replayed)+1 {
		return invariantError("sealed snapshots held (queue and active) ≤ max(QueueCapacity, replayed) + 1: %d queued, active %t, capacity %d, replayed %d",
			len(w.queue), w.active != nil, capacity, w.replayed)
	}
	prev := w.lastCommit
	if w.active != nil {
		if w.active.id.Compare(prev) <= 0 {
			return invariantError("snapshots in id order: active %s, last committed %s", w.active.id, prev)
		}
		prev = w.active.id
	}
	for i, s := range w.queue {
		if s.id.Compare(prev) <= 0 {
			return invariantError("snapshots in id order: queue[%d] is %s, after %s", i, s.id, prev)
		}
		if s.stage != persistQueued {
			// Only the active snapshot persists: a queued one that started
			// would commit its units, and a failed persist would move them
			// back into live to be committed again.
			return invariantError("a queued snapshot has not started persisting: queue[%d] %s in stage %s", i, s.id, s.stage)
		}
		prev = s.id
	}
	if n := len(w.queue); w.replayed < 0 || w.active != nil && w.replayed > n+1 || w.active == nil && w.replayed > n {
		return invariantError("0 ≤ replayed snapshots ≤ those queued or active: %d replayed, %d queued, active %t", w.replayed, n, w.active != nil)
	}
	if w.failures < 0 || w.persistEMA < 0 || w.ackDelayEMA < 0 {
		return invariantError("the writer's counts are not negative: %d failures, persist EMA %v, ack delay EMA %v", w.failures, w.persistEMA, w.ackDelayEMA)
	}
	return nil
}

// The coalescing writer's flush policy (docs/DESIGN.md §6.2; the disk
// WAL's memtable waits DiskWAL.SealDelay instead): one live
// accumulator for the whole process; seal it into a snapshot when it
// reaches the target size, or when the delay budget that started with its
// first unit runs out:
//
//	delay = clamp(100ms, min(4 × persist EMA, estimated fill time), 500ms)
//
// 250 ms before the first commit gives an EMA; never above MaxDelay. A
// sealed snapshot waits in a queue of QueueCapacity for the writer, which
// persists one snapshot at a time so that commits happen in id order.

// afterAppend starts the delay budget or marks the flush due.
func (e *Engine) afterAppend() {
	if e.live.empty() && e.state != stateFailed {
		e.broken("a flush is armed only once a unit joined live: live empty, %d bytes, flush due %t", e.live.bytes, e.flushDue)
		return
	}
	if e.live.bytes >= e.cfg.TargetBytes {
		e.flushDue = true
	} else if e.flushCancel == nil && !e.flushDue {
		e.flushCancel = e.p.Timers.AfterFunc(e.flushDelay(), e.onFlushTimer)
	}
	e.maybeSeal()
}

// afterAppendDue is afterAppend with the flush due whatever live holds
// (the disk WAL's size valve).
func (e *Engine) afterAppendDue() {
	e.flushDue = true
	e.afterAppend()
}

// queueReplayed queues a generation the disk WAL's recovery rebuilt, in
// id order after those queued before it; replayed snapshots may exceed
// QueueCapacity right after recovery.
func (e *Engine) queueReplayed(s *snapshot) {
	if !s.replayed || s.stage != persistQueued {
		e.broken("only a rebuilt generation is queued by replay: snapshot %s, replayed %t, stage %s", s.id, s.replayed, s.stage)
		return
	}
	e.queue = append(e.queue, s)
	e.replayed++
	e.checkQueue()
}

func (e *Engine) onFlushTimer() {
	if e.flushCancel == nil {
		// Armed once per live accumulator (afterAppend), cancelled where
		// it is cleared (seal, failClosed): a cancelled timer never runs.
		e.broken("the flush timer fires once, while armed: fired with none armed, live %d bytes, flush due %t", e.live.bytes, e.flushDue)
		return
	}
	e.flushCancel = nil
	if e.live.empty() {
		// Armed for a live accumulator holding a unit, cancelled when it
		// is sealed: units leave live only by a seal. A timer left armed
		// past one would make the next live's first unit seal at once.
		e.broken("the flush timer runs for a live accumulator holding units: live empty, flush due %t", e.flushDue)
		return
	}
	e.sealSoon()
}

// sealSoon marks a flush due and seals the live accumulator as soon as
// the queue has room (maybeSeal): now, or when a snapshot commits.
func (e *Engine) sealSoon() {
	e.flushDue = true
	e.maybeSeal()
}

// flushDelay is the delay budget for the unit just appended to an empty
// accumulator: the log's fixed seal delay, or the adaptive one; clamped
// to MaxDelay, and positive either way.
func (e *Engine) flushDelay() time.Duration {
	d, fixed := e.dlog.sealDelay()
	if !fixed {
		d = flushDelayCold
		if e.persistEMA > 0 {
			d = persistEMAFactor * e.persistEMA
			if e.rateEMA > 0 {
				left := float64(e.cfg.TargetBytes - e.live.bytes)
				fill := time.Duration(left / e.rateEMA * float64(time.Second))
				d = min(d, fill)
			}
			d = min(max(d, flushDelayMin), flushDelayMax)
		}
	}
	d = min(d, e.cfg.MaxDelay)
	if d <= 0 {
		// A delay of nothing seals every unit alone: a segment, a PUT and
		// a marker per unit.
		e.broken("a flush delay is positive: %v, max delay %v, the log's fixed delay %t", d, e.cfg.MaxDelay, fixed)
	}
	return d
}

// maybeSeal seals the live accumulator when a flush is due and the queue
// has room, and starts the writer.
func (e *Engine) maybeSeal() {
	if e.live.empty() && !e.cutOnlyDue() || !e.flushDue && !e.cutDue || e.cooling || len(e.queue) >= e.cfg.QueueCapacity {
		return
	}
	if e.state != stateReady && e.state != stateClosing {
		return
	}
	e.seal()
	e.pump()
}

func (e *Engine) seal() {
	if e.epoch == 0 || e.nextSeq == 0 || e.origin.IsZero() || len(e.queue) >= e.cfg.QueueCapacity {
		e.broken("a snapshot is sealed under a claimed epoch, with the log's identity, into a queue with room: epoch %d, next seq %d, origin zero %t, %d queued, capacity %d",
			e.epoch, e.nextSeq, e.origin.IsZero(), len(e.queue), e.cfg.QueueCapacity)
		return
	}
	now := e.now()
	if now < e.liveSince {
		// Dated from its first unit by the monotonic clock: a date ahead
		// of the seal would drop the rate's sample without a word.
		e.broken("live is dated no later than its seal: live since %v, sealed at %v, %d units", e.liveSince, now, len(e.live.units))
		return
	}
	if elapsed := now - e.liveSince; elapsed > 0 {
		rate := float64(e.live.bytes) / elapsed.Seconds()
		e.rateEMA = ema(e.rateEMA, rate)
	}
	s := e.newSnapshot(e.live)
	e.queue = append(e.queue, s)
	e.live = newBatchSet()
	e.checkQueue()
	e.checkHeld()
	e.checkAdmission()
	if s.content.empty() {
		e.mark(MarkCutOnlySegment)
		e.checkCutOnlyRoom()
	}
	e.flushDue, e.cutDue = false, false
	if e.flushCancel != nil {
		e.flushCancel()
		e.flushCancel = nil
	}
	// Last: the disk WAL's backlog joins the new live here, which may
	// arm its flush delay or seal it again.
	e.dlog.sealed()
}

// newSnapshot seals content under the next id, dated by its log.
func (e *Engine) newSnapshot(content *batchSet) *snapshot {
	if e.epoch == 0 || e.nextSeq == 0 {
		// seal checks this too; a failed persist's sets sealed again and
		// replay's seals come here alone.
		e.broken("a snapshot is sealed under a claimed epoch: epoch %d, next seq %d, %d units", e.epoch, e.nextSeq, len(content.units))
	}
	id := SnapshotID{Epoch: e.epoch, Seq: e.nextSeq}
	e.nextSeq++
	s := &snapshot{id: id, dir: e.layout.SegmentDir(e.p.Clock.WallUnixMs()), content: content}
	e.dlog.stamp(s)
	return s
}

// cutOnlyDue reports whether a snapshot without PARTs should be sealed
// to carry cuts (cut.go): an open job's interval ran out, or the engine
// closes, while nothing is being written — and the WAL has room for one
// more segment beside the units on their way into live (the disk WAL's
// admission reserved a slot for each, slots): taken by a cut-only
// segment, a crash would leave those acked units to be replayed into a
// segment past LiveSegmentsMax. Such a unit joins live and is sealed
// with the cut; one answered unknown frees its slot (logHooks.Unknown).
func (e *Engine) cutOnlyDue() bool {
	due := e.state == stateClosing && e.hasOpen() || e.state == stateReady && e.nextIntervalDue()
	return e.cutDue && due && len(e.queue) == 0 && e.active == nil && e.walSegments()+e.dlog.onTheWay() < e.cfg.LiveSegmentsMax
}

// pump starts persisting the oldest sealed snapshot if the writer is idle.
// A busy writer still starts the next snapshot's body (prepareAhead).
func (e *Engine) pump() {
	if e.active != nil || len(e.queue) == 0 || e.cooling || e.state == stateFailed {
		e.prepareAhead()
		return
	}
	if s := e.queue[0]; s.stage != persistQueued {
		e.broken("a snapshot leaves the queue for the writer once, never persisted before: %s in stage %s", s.id, s.stage)
		return
	}
	e.active = e.queue[0]
	e.queue = e.queue[1:]
	if !e.checkQueue() {
		return // do not persist out of order
	}
	s := e.active
	if !e.checkPersisting(s) {
		return
	}
	e.dlog.beforePersist(s, func() { e.persist(s) })
	e.maybeSeal() // the queue has room again
	e.prepareAhead()
}

// ema moves a moving average toward sample. REQUIRES: sample ≥ 0 (not
// NaN): the averages are of durations and rates, and one bad sample
// would stay in the average for good.
func ema(old, sample float64) float64 {
	if !(sample >= 0) {
		panic(fmt.Sprintf("engine: a moving average of a duration or rate takes samples ≥ 0: %v into %v", sample, old))
	}
	if old == 0 {
		return sample
	}
	return old + persistEMAWeight*(sample-old)
}
