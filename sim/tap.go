package sim

import "time"

// Tap watches a run from the side: every trace event with its fields,
// every scheduler step, and Notes the world makes of what the trace does
// not record (an ACK, a sink apply, why a process ended, a violation).
// simulate -timeline draws a run from it.
//
// A tap is told, never asked: nothing it sees is hashed and nothing it
// does can reach the world, so a run with a tap has the trace hash of the
// same run without one (the seeds in seeds/ keep their hashes; a test in
// cmd/simulate checks it). Calls come on the world's goroutine, in
// record order.
type Tap interface {
	// Step sees scheduler step n (counted from 1) begin at simulated
	// time at: the trace's Mix for that step.
	Step(n uint64, at time.Duration)
	// Event sees one trace event as End records it. fields is the
	// trace's buffer, valid only during the call.
	Event(at time.Duration, k Kind, fields []Field)
	// Note sees something the world noted.
	Note(n Note)
}

// Field is one field of a trace event as a Tap sees it: U holds the
// value of U and I fields (an I field's bits), S of S fields.
type Field struct {
	Name  string
	U     uint64
	S     string
	IsStr bool
}

// NoteKind says what a Note is about.
type NoteKind uint8

// Note kinds.
const (
	// NoteCrash: the world killed process Inc (Detail: "power loss" or
	// "kill only"). Result.Crashes counts these.
	NoteCrash NoteKind = iota + 1
	// NoteRestart: the world began a graceful stop of process Inc.
	NoteRestart
	// NoteZombie: process Inc froze (Detail: for how long) and a new
	// one takes over; Result.Zombies counts these.
	NoteZombie
	// NoteAck: process Inc acknowledged a unit (Detail: its id).
	NoteAck
	// NoteApply: sink Lane applied a job (Detail: its id).
	NoteApply
	// NoteViolation: an oracle failed (Detail: the violation, as in
	// Result.Violations).
	NoteViolation
)

// Note is one thing the world noted for a Tap.
type Note struct {
	Kind NoteKind
	At   time.Duration
	// Step is the scheduler step it happened in (0: before the first).
	Step   uint64
	Inc    uint64 // the process it concerns, or 0
	Lane   string // the sink it concerns, or ""
	Detail string
}

// note tells the tap, if there is one. Building the detail costs only
// when a tap listens: callers pass a func for anything not already a
// string.
func (w *World) note(k NoteKind, inc uint64, lane, detail string) {
	if w.cfg.Tap == nil || w.sched == nil {
		return
	}
	w.cfg.Tap.Note(Note{Kind: k, At: w.sched.Now(), Step: w.sched.Steps(), Inc: inc, Lane: lane, Detail: detail})
}

// tapping reports whether a tap listens (callers skip formatting if not).
func (w *World) tapping() bool { return w.cfg.Tap != nil }

// SetTap attaches a tap to the trace.
// REQUIRES: nothing recorded yet.
func (t *Trace) SetTap(tap Tap) {
	if t.events != 0 || t.hash != fnvOffset || t.open {
		panic("sim: SetTap on a trace that has recorded")
	}
	t.tap = tap
}
