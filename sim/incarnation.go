package sim

import (
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Incarnation is one lifetime of an engine process. Every port handed to
// that engine instance (timers, executor, store client, disk client) is
// bound to it, and every callback for it is queued as an event it owns.
// Kill is SIGKILL: from then on its events are dropped unrun, and requests
// it still issues (from the rest of the callback that was running when it
// died) are discarded. The world's own events — including object-store
// requests already in flight, which land regardless — keep running.
type Incarnation struct {
	sched *Scheduler
	// id is 1-based and dense, in start order.
	// INVARIANT: id >= 1 and never reused.
	id uint64
	// alive is true until Kill.
	// INVARIANT: once false, stays false.
	alive bool
	// paused: the process is frozen (a GC pause, a stopped VM, a network
	// partition). Its events come due but wait in held until Resume.
	paused bool
	held   []event
}

// NewIncarnation starts a new engine process lifetime.
func (s *Scheduler) NewIncarnation() *Incarnation {
	inc := &Incarnation{sched: s, id: uint64(len(s.incarnations) + 1), alive: true}
	s.incarnations = append(s.incarnations, inc)
	s.trace.Begin(s.now, KindIncarnationStart).U("inc", inc.id).End()
	return inc
}

// Incarnations returns every incarnation started so far, oldest first.
// The slice is the scheduler's; do not modify it.
func (s *Scheduler) Incarnations() []*Incarnation { return s.incarnations }

// ID returns the incarnation's 1-based number.
func (inc *Incarnation) ID() uint64 { return inc.id }

// Alive reports whether the incarnation has not been killed.
func (inc *Incarnation) Alive() bool { return inc.alive }

// Kill ends the incarnation. Killing twice is a no-op. A world that kills
// an engine must also crash its disk (Disk.Crash) to model power loss.
func (inc *Incarnation) Kill() {
	if !inc.alive {
		return
	}
	inc.alive = false
	inc.held = nil
	inc.sched.trace.Begin(inc.sched.now, KindIncarnationKill).U("inc", inc.id).End()
}

// Pause freezes the incarnation: none of its events runs, and no store
// answer reaches it, until Resume. Requests it issued before keep going
// (and land) as world events. A paused process is exactly what a zombie
// writer is: superseded while it cannot notice.
func (inc *Incarnation) Pause() {
	if !inc.alive || inc.paused {
		return
	}
	inc.paused = true
	inc.sched.trace.Begin(inc.sched.now, KindIncarnationPause).U("inc", inc.id).End()
}

// Resume unfreezes a paused incarnation: every event that came due while
// it was paused runs now, in the order it would have run, one nanosecond
// apart (so one File's calls still complete in issue order).
func (inc *Incarnation) Resume() {
	if !inc.alive || !inc.paused {
		return
	}
	inc.paused = false
	held := inc.held
	inc.held = nil
	slices.SortFunc(held, func(a, b event) int {
		if a.before(&b) {
			return -1
		}
		return 1
	})
	s := inc.sched
	s.trace.Begin(s.now, KindIncarnationResume).U("inc", inc.id).U("held", uint64(len(held))).End()
	for i, ev := range held {
		s.push(s.now+time.Duration(i+1), ev.inc, ev.timer, ev.fn)
	}
}

// Paused reports whether the incarnation is paused.
func (inc *Incarnation) Paused() bool { return inc.paused }

// At schedules fn at time t as an event this incarnation owns: it is
// dropped if the incarnation is dead when it comes due.
// REQUIRES: t >= Now().
func (inc *Incarnation) At(t time.Duration, fn func()) { inc.sched.push(t, inc, nil, fn) }

// After is At(Now()+d, fn).
func (inc *Incarnation) After(d time.Duration, fn func()) { inc.At(inc.sched.now+d, fn) }

// Timers returns the incarnation's Timers port.
func (inc *Incarnation) Timers() engine.Timers { return incTimers{inc} }

// Executor returns the incarnation's Executor port.
func (inc *Incarnation) Executor() engine.Executor { return incExecutor{inc} }

// timerState lets cancel void a queued timer event.
type timerState struct {
	// cancelled is set by cancel before the timer fired.
	// INVARIANT: cancelled && fired is impossible.
	cancelled bool
	fired     bool
}

type incTimers struct{ inc *Incarnation }

// AfterFunc implements engine.Timers. cancel sets a flag the scheduler
// checks when the event comes due, so once cancel has returned fn cannot
// run; a cancelled timer is discarded without advancing the clock, so a
// long cancelled timeout never drags simulated time forward.
func (t incTimers) AfterFunc(d time.Duration, fn func()) (cancel func()) {
	inc, s := t.inc, t.inc.sched
	if d < 0 {
		d = 0
	}
	if !inc.alive {
		return func() {} // a dead process arms nothing
	}
	tm := &timerState{}
	at := s.now + d
	s.trace.Begin(s.now, KindTimerSet).U("inc", inc.id).I("at", int64(at)).End()
	s.push(at, inc, tm, func() {
		tm.fired = true
		s.trace.Begin(s.now, KindTimerFire).U("inc", inc.id).End()
		fn()
	})
	return func() {
		if tm.fired || tm.cancelled {
			return
		}
		tm.cancelled = true
		s.trace.Begin(s.now, KindTimerCancel).U("inc", inc.id).I("at", int64(at)).End()
	}
}

type incExecutor struct{ inc *Incarnation }

// Go implements engine.Executor. work runs inline on the loop, but only
// when the delay has elapsed, immediately before done: an engine that
// reads work's results before done, or touches work's inputs after Go,
// sees the wrong data here (deterministically) instead of racing
// (rarely) in production.
func (e incExecutor) Go(work func(), done func()) {
	inc, s := e.inc, e.inc.sched
	if !inc.alive {
		return
	}
	d := s.cfg.ExecDelay.Sample(s.rand, 0)
	s.trace.Begin(s.now, KindExecStart).U("inc", inc.id).I("delay", int64(d)).End()
	inc.After(d, func() {
		work()
		s.trace.Begin(s.now, KindExecDone).U("inc", inc.id).End()
		done()
	})
}
