package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Troubles are the failures the engine is riding out: an operation that
// failed and is being retried — a store request kind, a sink lane, the
// offsets checkpoint, recovery, the writer — from its first failure until
// it succeeds again. The engine only records them; they decide nothing
// (but recovery's give-up, recovery.go). An operator's tools read them:
// the current set (Troubles), to say at a bounded rate what is still
// failing and for how long, and a bounded queue of events
// (TroubleEventsSince), to say when a trouble starts and when it clears
// even if both happen between two reads.
//
// A trouble's operation names are fixed strings or built from sink refs
// and namespaces, so their number is bounded by the pipeline's shape.

// TroubleEventsMax bounds the trouble event queue; beyond it the oldest
// are dropped and TroubleEventsSince counts them.
const TroubleEventsMax = 256

// Trouble is one operation that is failing now.
type Trouble struct {
	Op       string        // "store put", "sink lake/events", "checkpoint", "recovery", …
	Since    time.Duration // Clock.Monotonic of the first failure of this run
	Lasted   time.Duration // from Since to the Troubles call
	Attempts uint64        // failures since then
	Err      error         // the last failure; never nil
}

// TroubleEvent is a trouble starting, a recovery attempt failing (each
// one, so that a recovery that cannot progress says why every time), or
// a trouble clearing.
type TroubleEvent struct {
	Seq      uint64 // 1 for the first, then +1 each
	Op       string
	Cleared  bool          // false: a failure (the first of a run, or a recovery attempt)
	Err      error         // the failure, or the last one before it cleared
	Attempts uint64        // failures in the run so far (cleared: in all)
	Lasted   time.Duration // from the run's first failure to this event
	At       time.Duration // Clock.Monotonic
}

// troubles is the engine's record of them.
//
// INVARIANT: every entry of now has Attempts ≥ 1 and a non-nil Err
// (recordFailure: it counts the failure as it creates the entry, and
// panics on a nil error); events holds at most TroubleEventsMax, newest
// last, with seq the Seq of the newest (troubleEvent).
type troubles struct {
	now    map[string]*Trouble
	events []TroubleEvent
	seq    uint64
}

// failing records a failure of op. REQUIRES: err is not nil.
func (e *Engine) failing(op string, err error) { e.recordFailure(op, err, true) }

// recordFailure is failing; without event, the failure is counted but
// no event says it (recovery's last attempt: the give-up says it).
func (e *Engine) recordFailure(op string, err error, event bool) {
	if err == nil {
		panic(fmt.Sprintf("engine: trouble %q without an error", op))
	}
	t := &e.trouble
	if t.now == nil {
		t.now = map[string]*Trouble{}
	}
	cur, ok := t.now[op]
	if ok && !e.checkTrouble(cur) {
		return
	}
	if !ok {
		cur = &Trouble{Op: op, Since: e.now()}
		t.now[op] = cur
	}
	cur.Attempts++
	cur.Err = err
	if event && (!ok || op == troubleRecovery) {
		e.troubleEvent(TroubleEvent{Op: op, Err: err, Attempts: cur.Attempts, Lasted: e.now() - cur.Since, At: e.now()})
	}
}

// succeeded records that op worked: a trouble of op, if any, clears.
func (e *Engine) succeeded(op string) {
	t := &e.trouble
	cur, ok := t.now[op]
	if !ok {
		return
	}
	if !e.checkTrouble(cur) {
		return
	}
	delete(t.now, op)
	e.troubleEvent(TroubleEvent{Op: op, Cleared: true, Err: cur.Err, Attempts: cur.Attempts, Lasted: e.now() - cur.Since, At: e.now()})
}

// checkTrouble: a trouble on record has failed at least once, with its
// last error, since a time not in the future (troubles' INVARIANT).
func (e *Engine) checkTrouble(cur *Trouble) bool {
	if cur.Attempts == 0 || cur.Err == nil || cur.Since > e.now() {
		e.broken("a trouble has failed since it started: %s, %d attempts, error %t, since %v, now %v",
			cur.Op, cur.Attempts, cur.Err != nil, cur.Since, e.now())
		return false
	}
	return true
}

// troubleFor is how long op has been failing, if it is.
func (e *Engine) troubleFor(op string) (time.Duration, bool) {
	cur, ok := e.trouble.now[op]
	if !ok {
		return 0, false
	}
	if !e.checkTrouble(cur) { // a trouble from the future would never last: recovery would never give up
		return 0, false
	}
	return e.now() - cur.Since, true
}

// troubleEvent queues ev as the newest event, dropping the oldest
// beyond TroubleEventsMax.
func (e *Engine) troubleEvent(ev TroubleEvent) {
	t := &e.trouble
	t.seq++
	ev.Seq = t.seq
	if len(t.events) == TroubleEventsMax {
		t.events = slices.Delete(t.events, 0, 1)
	}
	t.events = append(t.events, ev)
	if len(t.events) > TroubleEventsMax {
		e.broken("trouble events ≤ TroubleEventsMax: %d queued after event %d (%s), limit %d", len(t.events), ev.Seq, ev.Op, TroubleEventsMax)
	}
	// TroubleEventsSince finds an event by its Seq's distance from the
	// newest: the queue holds the newest events, numbered one by one.
	if n := len(t.events); uint64(n) > t.seq || n > 1 && t.events[n-2].Seq != t.seq-1 {
		e.broken("trouble events numbered one by one, newest last: event %d (%s) queued after event %d, %d queued",
			t.seq, ev.Op, t.events[max(n-2, 0)].Seq, n)
	}
}

// Troubles returns what is failing now, by operation name. The slice is
// the caller's.
func (e *Engine) Troubles() []Trouble {
	out := make([]Trouble, 0, len(e.trouble.now))
	//engine:orderless — sorted right below
	for _, t := range e.trouble.now {
		c := *t
		c.Lasted = e.now() - t.Since
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Trouble) int { return strings.Compare(a.Op, b.Op) })
	return out
}

// TroubleEventsSince returns the queued events after seq, oldest first
// (pass 0 first, then the last Seq seen), and how many events after seq
// were dropped from the queue before this call could see them.
func (e *Engine) TroubleEventsSince(seq uint64) (events []TroubleEvent, dropped uint64) {
	t := &e.trouble
	if seq >= t.seq {
		return nil, 0
	}
	oldest := t.seq - uint64(len(t.events)) + 1 // Seq of events[0]
	if seq+1 < oldest {
		dropped = oldest - seq - 1
		seq = oldest - 1
	}
	return slices.Clone(t.events[seq+1-oldest:]), dropped
}

// Operation names of troubles that are not per request kind or lane.
const (
	troubleRecovery   = "recovery"
	troublePersist    = "persist"
	troubleCheckpoint = "checkpoint"
)

// troubleWAL is the trouble of a disk WAL partition that cannot open a
// new log segment (a full disk): its writes, and the answers of a failed
// batch, wait for one.
func troubleWAL(part uint32) string { return fmt.Sprintf("wal partition %d", part) }

// troubleStore is the trouble of one kind of store request.
func troubleStore(method string) string { return "store " + method }

// troubleSink is the trouble of a sink lane's applies; troubleRead of
// reading its jobs' bodies.
func troubleSink(ref, ns string) string { return "sink " + ref + "/" + ns }
func troubleRead(ref, ns string) string { return "compaction read " + ref + "/" + ns }
