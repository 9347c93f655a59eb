package sim

import (
	"math"
	"time"
)

// Scheduler is the world's loop: a priority queue of events in simulated
// time, run one at a time on the caller's goroutine. Events are ordered by
// (time, tie, sequence number). The tie is drawn from the scheduler's own
// stream when the event is scheduled, so events due at the same instant
// run in an order the seed chooses — not FIFO, which production never
// promises (two timers or completions due together race there) — and a
// seed still replays exactly. The sequence number (scheduling order)
// breaks the astronomically rare equal ties.
//
// Every event belongs either to the world (models of the store, the disk,
// sources: they keep running across crashes) or to an Incarnation (one
// engine process lifetime: its timers, completions and executor work).
// Events of a killed incarnation are dropped when they come due, which is
// how a SIGKILL makes every pending callback vanish.
type Scheduler struct {
	// now is the simulated time of the event running or last run.
	// INVARIANT: never decreases.
	now time.Duration
	// seq numbers events in scheduling order.
	// INVARIANT: strictly greater than the seq of every queued event.
	seq uint64
	// queue is a binary min-heap on (at, seq).
	// INVARIANT: every event in it has at >= now.
	queue []event
	// steps counts events run; dropped counts events discarded because
	// their incarnation died or their timer was cancelled.
	steps, dropped uint64
	trace          *Trace
	// rand draws executor delays; ties draws same-instant order.
	rand, ties *Rand
	cfg        SchedulerConfig
	// incarnations is every incarnation ever started, by id-1.
	// INVARIANT: incarnations[i].id == i+1.
	incarnations []*Incarnation
}

// SchedulerConfig tunes the loop's own models. The zero value is usable.
type SchedulerConfig struct {
	// EpochUnixMs is the wall-clock time (Unix ms) at simulated time zero.
	// 0 means DefaultEpochUnixMs.
	EpochUnixMs int64
	// ExecDelay is how long Executor work "takes" before done runs.
	// Zero means DefaultExecDelay.
	ExecDelay Latency
}

// DefaultEpochUnixMs is 2026-08-01T00:00:00Z: a fixed wall clock so that
// p_year=/p_month= keys and created_at fields are the same in every run.
var DefaultEpochUnixMs = time.Date(2026, time.August, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// DefaultExecDelay models encoding a segment body off the loop.
var DefaultExecDelay = Latency{Base: 200 * time.Microsecond, Tail: 300 * time.Microsecond}

// event is one queued callback.
type event struct {
	at  time.Duration
	tie uint64 // same-instant order, drawn from the seed
	seq uint64
	// inc owns the event; nil for world events, which always run.
	inc *Incarnation
	// timer is set for Timers.AfterFunc events, which cancel can void.
	timer *timerState
	fn    func()
}

// NewScheduler returns an idle scheduler at time zero. r is the
// scheduler's own stream (split it from the root seed); tr receives every
// event of every model built on this scheduler.
func NewScheduler(r *Rand, tr *Trace, cfg SchedulerConfig) *Scheduler {
	if cfg.EpochUnixMs == 0 {
		cfg.EpochUnixMs = DefaultEpochUnixMs
	}
	if cfg.ExecDelay == (Latency{}) {
		cfg.ExecDelay = DefaultExecDelay
	}
	return &Scheduler{trace: tr, rand: r, ties: r.Split("ties"), cfg: cfg}
}

// Now returns the current simulated time.
func (s *Scheduler) Now() time.Duration { return s.now }

// Trace returns the trace every model on this scheduler records into.
func (s *Scheduler) Trace() *Trace { return s.trace }

// Steps returns how many events have run.
func (s *Scheduler) Steps() uint64 { return s.steps }

// Dropped returns how many events were discarded unrun (dead incarnation
// or cancelled timer).
func (s *Scheduler) Dropped() uint64 { return s.dropped }

// Pending returns how many events are queued (including ones that will
// be dropped).
func (s *Scheduler) Pending() int { return len(s.queue) }

// At schedules a world event at simulated time t.
// REQUIRES: t >= Now().
func (s *Scheduler) At(t time.Duration, fn func()) { s.push(t, nil, nil, fn) }

// After schedules a world event d from now.
// REQUIRES: d >= 0.
func (s *Scheduler) After(d time.Duration, fn func()) { s.push(s.now+d, nil, nil, fn) }

// Step runs the next live event and reports whether there was one; false
// means the world is idle (nothing left but possibly nothing at all).
func (s *Scheduler) Step() bool { return s.step(math.MaxInt64) }

// Run steps until idle or until limit events have run, and returns how
// many ran.
func (s *Scheduler) Run(limit uint64) uint64 {
	n := uint64(0)
	for n < limit && s.Step() {
		n++
	}
	return n
}

// RunUntil runs every live event due at or before t, then advances the
// clock to t (if it is not already past it).
func (s *Scheduler) RunUntil(t time.Duration) {
	for s.step(t) {
	}
	if t > s.now {
		s.now = t
	}
}

// step runs the first live event due at or before limit.
func (s *Scheduler) step(limit time.Duration) bool {
	for len(s.queue) > 0 && s.queue[0].at <= limit {
		ev := s.pop()
		if !ev.live() {
			s.dropped++
			continue
		}
		if ev.inc != nil && ev.inc.paused {
			ev.inc.held = append(ev.inc.held, ev) // runs when it resumes
			continue
		}
		if ev.at < s.now {
			panic("sim: scheduler time went backwards")
		}
		s.now = ev.at
		s.steps++
		s.trace.Mix(uint64(ev.at), ev.seq)
		ev.fn()
		return true
	}
	return false
}

// live reports whether the event should still run when it comes due.
func (ev *event) live() bool {
	if ev.inc != nil && !ev.inc.alive {
		return false
	}
	return ev.timer == nil || !ev.timer.cancelled
}

func (s *Scheduler) push(t time.Duration, inc *Incarnation, tm *timerState, fn func()) {
	if t < s.now {
		panic("sim: event scheduled in the past: at " + t.String() + " now " + s.now.String())
	}
	if fn == nil {
		panic("sim: nil event function")
	}
	s.queue = append(s.queue, event{at: t, tie: s.ties.Uint64(), seq: s.seq, inc: inc, timer: tm, fn: fn})
	s.seq++
	s.siftUp(len(s.queue) - 1)
}

func (s *Scheduler) pop() event {
	q := s.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = event{} // release the closure
	s.queue = q[:last]
	if last > 0 {
		s.siftDown(0)
	}
	return top
}

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return a.seq < b.seq
}

func (s *Scheduler) siftUp(i int) {
	q := s.queue
	for i > 0 {
		parent := (i - 1) / 2
		if !q[i].before(&q[parent]) {
			return
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (s *Scheduler) siftDown(i int) {
	q := s.queue
	n := len(q)
	for {
		least := i
		if l := 2*i + 1; l < n && q[l].before(&q[least]) {
			least = l
		}
		if r := 2*i + 2; r < n && q[r].before(&q[least]) {
			least = r
		}
		if least == i {
			return
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
}
