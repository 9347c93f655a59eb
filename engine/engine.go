package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

type lifecycle uint8

const (
	stateNew lifecycle = iota
	stateRecovering
	stateReady
	stateClosing
	stateFailed
	stateClosed // closed before recovery finished
)

// Engine is the write-ahead log — on S3, or on local disk (Config.Disk)
// with segments flushed to the store — with ingest, the coalescing
// writer, compaction, reclaim, recovery and the orphan sweeper. It is a
// single-threaded state machine: every method, and every callback it
// hands to a port, runs on one loop.
type Engine struct {
	cfg    Config
	p      Ports
	layout Layout
	state  lifecycle
	err    error // why the engine failed closed

	// The engine's stages, each owning its fields, their invariants and a
	// check of them (same package, one loop; their methods are Engine's).
	admission     // ingest.go: what is pending, committed and being looked up
	writing       // flush.go, persist.go: the epoch, live, the queue, the active snapshot
	compaction    // compact.go: owned segments, lanes, jobs, the body cache
	checkpointing // checkpoint.go: the offsets checkpoint's rounds
	reporting     // stats.go: alerts, troubles, marks, counters

	// answers are the answers given and not delivered yet, in order:
	// units', and Close's, which comes after every unit's it follows.
	// INVARIANT: answers is not empty exactly while a delivery is
	// scheduled (deliverAnswers).
	answers        []dueAnswer
	closeDone      func(error)
	closeGraceOver bool // the close no longer waits for reclaims

	// dlog decides when a unit is durable (durable.go): the S3 WAL's
	// s3Log, or the local-disk WAL's diskLog.
	dlog durableLog
}

// Segment is an owned (committed) segment as the engine knows it.
type Segment struct {
	ID    SnapshotID
	Dir   string
	Index *segment.Index
}

// New returns an engine; call Start to recover and begin.
func New(cfg Config, p Ports) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p.Clock == nil || p.Rand == nil || p.Timers == nil || p.Exec == nil || p.Store == nil {
		return nil, fmt.Errorf("engine: clock, rand, timers, executor and store ports are required")
	}
	e := &Engine{
		cfg: cfg, p: p, layout: NewLayout(cfg.Prefix, cfg.Pipeline),
		admission: admission{idemPending: map[string]*unit{}, offsetPending: map[string]*unit{}, committed: newOffsetsView(),
			keys: newKeyStore(cfg.IdempotencyWindow), lookups: map[segment.KeyHash]*keyLookup{}},
		writing:    writing{live: newBatchSet()},
		compaction: compaction{lanes: map[laneKey]*lane{}},
		reporting:  reporting{namespaces: map[string]*NamespaceStats{}},
	}
	if cfg.Disk != nil {
		if p.Disk == nil {
			return nil, fmt.Errorf("engine: the disk WAL needs the disk port")
		}
		e.dlog = newDiskLog(e, *cfg.Disk)
	} else {
		e.dlog = s3Log{e}
	}
	e.cache = newBodyCache(0, &e.marks)
	e.cache.inv, e.committed.inv, e.keys.inv = e.failClosed, e.failClosed, e.failClosed
	e.p.Store = countingStore{ObjectStore: p.Store, e: e}
	e.refreshBudget()
	return e, nil
}

// Layout returns the engine's key layout.
func (e *Engine) Layout() Layout { return e.layout }

// Ready reports whether recovery has finished and ingest is open.
func (e *Engine) Ready() bool { return e.state == stateReady }

// Err returns why the engine failed closed, or nil.
func (e *Engine) Err() error { return e.err }

// Epoch returns this incarnation's writer epoch (0 before recovery).
func (e *Engine) Epoch() uint64 { return e.epoch }

// Origin names the log this engine commits for: its WAL id and pipeline
// (zero until recovery claimed the epoch).
func (e *Engine) Origin() segment.Origin { return e.origin }

// Offsets returns a copy of the offsets view: every source offset some
// owned segment committed. Replayable sources resume from here.
func (e *Engine) Offsets() segment.Offsets { return e.committed.sorted() }

// ReplayPending is how many units recovery replayed from the disk WAL's
// log are not committed yet. The offsets view learns a replayed unit's
// offsets only at that commit (wal_disk_replay.go), so a source whose
// units are not the same when it reads its input again (a partitioned
// log: a unit is whatever was fetched) resumes from Offsets once this is
// 0; before, it would resume behind those units and deliver their rows
// twice.
func (e *Engine) ReplayPending() int {
	if l, ok := e.dlog.(*diskLog); ok {
		return l.replayPending
	}
	return 0
}

// Offset returns one source offset of the view: a replayable source's
// progress for key. A key under a floor (segment.FloorKey) reads as
// math.MaxUint64: every value of it is covered. O(1) plus a test per
// floor, unlike Offsets.
func (e *Engine) Offset(key string) (uint64, bool) {
	if v, ok := e.committed.get(key); ok {
		return v, true
	}
	if _, ok := e.committed.floorOf(key); ok && !segment.IsFloor(key) {
		return math.MaxUint64, true
	}
	return 0, false
}

// IdempotencyKeyKnown reports whether the engine may remember an
// idempotency key: it holds it exactly, or a run's filter admits it
// (about one key in a thousand that it does not hold is admitted too).
// For oracles: a remembered key is never reported unknown.
func (e *Engine) IdempotencyKeyKnown(key string) bool {
	return e.KeyHashKnown(segment.KeyHashOf(key))
}

// KeyHashKnown is IdempotencyKeyKnown for a key's hash
// (segment.KeyHashOf), for a caller that asks about the same key often.
func (e *Engine) KeyHashKnown(h segment.KeyHash) bool {
	return e.keys.held(h) || e.keys.mayHold(h)
}

// Segments returns the owned segments (not yet reclaimed) in id order.
func (e *Engine) Segments() []Segment {
	out := make([]Segment, len(e.segs))
	for i, st := range e.segs {
		out[i] = st.Segment
	}
	return out
}

// LastWALError returns the disk WAL's most recent write, fsync or
// segment-create failure, or nil. Each was handled (a poisoned segment
// rolled, its batch answered ErrUnknownOutcome); they are counted in
// Stats (WALSyncFailures) and repeated failures mean a failing disk.
func (e *Engine) LastWALError() error {
	if l, ok := e.dlog.(*diskLog); ok {
		return l.lastError
	}
	return nil
}

// Memory reports the pool's split and use, for oracles and progress:
// bytes held by ingest and its admission budget, bytes in the body cache
// and its budget.
func (e *Engine) Memory() (held, admission, cached, cache int64) {
	return e.held, e.budget.admission, e.cache.used, e.budget.cache
}

// later runs fn on the loop after the current callback returns.
//
// REQUIRES: fn is not nil (the timer would fire into nothing, far from
// the caller that lost its continuation).
func (e *Engine) later(fn func()) {
	if fn == nil {
		panic("engine: later without a function to run") // a caller's contract, as answer's
	}
	e.p.Timers.AfterFunc(0, fn)
}

// answer tells a submitter (or Close's caller) err, later on the loop:
// answers wait in a queue, in the order they were given, and one timer
// delivers all that came due in a callback (deliverAnswers) — not a
// timer each, whose order at one instant no one sets. So Close's done,
// given once nothing is held, comes after every unit's answer: its
// caller needs no count of answers still on their way.
func (e *Engine) answer(done func(error), err error) {
	if done == nil {
		panic(fmt.Sprintf("engine: an answer (%v) without its callback", err)) // a caller's contract: every answer goes to someone
	}
	e.answers = append(e.answers, dueAnswer{done, err})
	if len(e.answers) == 1 {
		e.p.Timers.AfterFunc(0, e.deliverAnswers)
	}
}

// dueAnswer is a submitter's answer waiting for delivery.
type dueAnswer struct {
	done func(error)
	err  error
}

// deliverAnswers delivers the queued answers in order; answers given
// while it runs (a submitter's done that submits again) wait for the
// next delivery, which their arrival scheduled.
func (e *Engine) deliverAnswers() {
	due := e.answers
	e.answers = nil
	if len(due) == 0 {
		e.broken("a delivery runs only for answers queued: a delivery of none")
		return
	}
	for _, a := range due {
		a.done(a.err)
	}
	e.checkClosed()
}

func (e *Engine) now() time.Duration { return e.p.Clock.Monotonic() }

// failClosed stops the engine: nothing more is acked until a restart runs
// recovery. Units held now are answered ErrClosed: they were not acked,
// so the sources still own them (at most once, exactly once on retry).
func (e *Engine) failClosed(err error) {
	if err == nil {
		panic("engine: failing closed without a reason") // Err would report none for a stopped engine
	}
	if e.state == stateFailed {
		return
	}
	err = e.checkHeldAnswered(err)
	e.state, e.err = stateFailed, err
	e.alert(alertKindOf(err, AlertFailedClosed), err)
	if e.flushCancel != nil {
		e.flushCancel()
		e.flushCancel = nil
	}
	sets := []*batchSet{e.live}
	for _, s := range e.queue {
		sets = append(sets, s.content)
	}
	if e.active != nil {
		sets = append(sets, e.active.content)
	}
	for _, s := range sets {
		for _, u := range s.units {
			for _, d := range u.dones {
				e.answer(d, fmt.Errorf("%w: %v", ErrClosed, err))
			}
		}
	}
	e.dlog.failAll(err)
	if e.closeDone != nil {
		e.answer(e.closeDone, err)
		e.closeDone = nil
	}
}

// Close stops ingest, commits what is held, and drains compaction: every
// job that can start runs (one that fails while closing is left for the
// next start, so a sink outage cannot hold the close), and reclaims in
// flight get up to Config.StopGrace from the close to finish. done is
// called when all that is over (or with the error that made the engine
// fail closed). A clean stop with healthy sinks thus leaves every ACKed
// record applied and the WAL empty; anything left is recovered by the
// next start like after a crash.
func (e *Engine) Close(done func(error)) {
	if done == nil {
		panic("engine: Close without its answer") // a caller's contract, as Submit's
	}
	switch e.state {
	case stateFailed:
		e.answer(done, e.err)
		return
	case stateReady:
		if e.closeDone != nil || e.closeGraceOver {
			e.broken("a close waits, and its grace runs, only while closing: ready with a close waiting %t, grace over %t", e.closeDone != nil, e.closeGraceOver)
			e.answer(done, e.err)
			return
		}
	case stateNew, stateRecovering:
		e.state = stateClosed // recovery, if running, will not open ingest
		e.answer(done, nil)
		return
	default:
		e.answer(done, ErrClosed)
		return
	}
	e.state = stateClosing
	e.closeDone = done
	e.p.Timers.AfterFunc(e.cfg.stopGrace(), func() {
		if e.closeGraceOver {
			// One close per engine arms one grace timer: a second run
			// means a second close armed another.
			e.broken("a close's grace runs out once: it ran out again in state %d, close waiting %t", e.state, e.closeDone != nil)
			return
		}
		e.closeGraceOver = true
		e.checkClosed()
	})
	e.flushDue = true
	e.cutDue = e.hasOpen() // every open job is cut (cut.go)
	e.maybeSeal()
	e.checkClosed()
}

func (e *Engine) checkClosed() {
	if e.state == stateClosing && e.closeDone != nil && e.Idle() && len(e.lookups) == 0 && !e.drainPending() {
		if e.held != 0 || e.replayed != 0 {
			// failing closed answers the close with the error
			e.broken("a close is answered once nothing is held: idle, held %d bytes, %d replayed snapshots counted", e.held, e.replayed)
			return
		}
		done := e.closeDone
		e.closeDone = nil
		e.answer(done, nil)
	}
}

// Idle reports whether the engine holds no unit: nothing live, queued or
// being persisted.
func (e *Engine) Idle() bool {
	return e.live.empty() && len(e.queue) == 0 && e.active == nil && e.dlog.heldBytes() == 0
}

// Drained reports whether everything committed has been applied and
// reclaimed: the writer is idle, no job runs and no segment is owned —
// and the disk WAL holds one log segment per partition (its append
// target) at most: every other one was deleted.
func (e *Engine) Drained() bool {
	return e.Idle() && e.running == 0 && len(e.segs) == 0 && e.WALFiles() <= e.dlog.filesAtRest()
}

// WALFiles returns how many log segment files the disk WAL holds (0 for
// the S3 WAL).
func (e *Engine) WALFiles() int { return e.dlog.files() }
