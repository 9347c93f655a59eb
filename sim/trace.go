package sim

import (
	"io"
	"strconv"
	"time"
)

// Trace is the world's running fingerprint: a 64-bit hash chained over the
// binary encoding (64-bit words) of every event each subsystem records (issue, apply,
// completion, crash …). Two runs of one seed must end with the same hash;
// a difference means something non-deterministic (map order, wall clock,
// a goroutine) leaked into the world or the engine. The hash is the
// determinism oracle; the optional text dump is how a human diffs two runs
// to find where they diverged (simulate -trace FILE), and a Recorder
// (trace_record.go) finds the first difference itself (simulate
// -check-determinism).
//
// Recording is a chain that allocates nothing:
//
//	tr.Begin(now, KindStoreIssue).U("inc", id).S("key", key).End()
//
// Field names are written to the text dump only; they are not hashed, so
// renaming a field never changes a seed's hash.
type Trace struct {
	// hash chains every recorded word so far (see word).
	hash uint64
	// events counts End calls.
	events uint64
	// w receives one text line per event; nil turns text off entirely.
	w io.Writer
	// line is the text of the event being recorded (reused buffer).
	// INVARIANT: empty unless w != nil and open.
	line []byte
	// err is the first error w returned; later writes are skipped.
	err error
	// open is true between Begin and End.
	// INVARIANT: Begin requires !open, fields and End require open.
	open bool
	// at is the time of the event being recorded; set only while text is
	// on (a Recorder's window reads it).
	at time.Duration
	// rec, if set, sees every record (each End and each Mix) after it is
	// hashed: simulate -check-determinism (trace_record.go).
	rec *Recorder
	// tap, if set, sees every event with its fields and every step
	// (tap.go); tapKind, tapAt and tapFields hold the open event for it.
	// INVARIANT: tapFields is empty unless tap != nil.
	tap       Tap
	tapKind   Kind
	tapAt     time.Duration
	tapFields []Field
	// steps counts Mix calls, for the tap.
	steps uint64
}

// Kind names the type of a trace event. Each kind is one byte of the
// hashed encoding; its name appears only in the text dump.
type Kind uint8

// Event kinds. Append new kinds at the end: the value of an existing kind
// is part of every recorded hash.
const (
	KindIncarnationStart Kind = iota + 1
	KindIncarnationKill
	KindTimerSet
	KindTimerFire
	KindTimerCancel
	KindExecStart
	KindExecDone
	KindStoreIssue
	KindStoreApply
	KindStoreDone
	KindStoreDrop
	KindDiskIssue
	KindDiskDone
	KindDiskCrash
	KindDiskCrashFile
	KindIncarnationPause
	KindIncarnationResume
	KindCorruptAtRest
	KindBlockingQueue
	KindBlockingStart
	KindBlockingRun
	KindBlockingDrop
	KindBlockingDone
	KindBlockingTimeout
	kindCount
)

var kindNames = [kindCount]string{
	KindIncarnationStart:  "inc.start",
	KindIncarnationKill:   "inc.kill",
	KindTimerSet:          "timer.set",
	KindTimerFire:         "timer.fire",
	KindTimerCancel:       "timer.cancel",
	KindExecStart:         "exec.start",
	KindExecDone:          "exec.done",
	KindStoreIssue:        "store.issue",
	KindStoreApply:        "store.apply",
	KindStoreDone:         "store.done",
	KindStoreDrop:         "store.drop",
	KindDiskIssue:         "disk.issue",
	KindDiskDone:          "disk.done",
	KindDiskCrash:         "disk.crash",
	KindDiskCrashFile:     "disk.crash.file",
	KindIncarnationPause:  "inc.pause",
	KindIncarnationResume: "inc.resume",
	KindCorruptAtRest:     "store.corrupt-at-rest",
	KindBlockingQueue:     "blocking.queue",
	KindBlockingStart:     "blocking.start",
	KindBlockingRun:       "blocking.run",
	KindBlockingDrop:      "blocking.drop",
	KindBlockingDone:      "blocking.done",
	KindBlockingTimeout:   "blocking.timeout",
}

// String returns the kind's name in the text dump.
func (k Kind) String() string {
	if k < kindCount && kindNames[k] != "" {
		return kindNames[k]
	}
	return "kind" + strconv.Itoa(int(k))
}

// NewTrace returns an empty trace with text output off.
func NewTrace() *Trace {
	return &Trace{hash: fnvOffset}
}

// SetWriter turns the text dump on (w != nil) or off (nil). Wrap w in a
// bufio.Writer: the trace writes one small line per event.
func (t *Trace) SetWriter(w io.Writer) {
	t.w = w
	t.line = t.line[:0]
}

// Hash returns the fingerprint of everything recorded so far.
func (t *Trace) Hash() uint64 { return t.hash }

// Events returns how many events have been recorded.
func (t *Trace) Events() uint64 { return t.events }

// Err returns the first error the text writer returned, if any.
func (t *Trace) Err() error { return t.err }

// Begin starts an event of kind k at simulated time now.
// REQUIRES: the previous event was ended.
func (t *Trace) Begin(now time.Duration, k Kind) *Trace {
	if t.open {
		panic("sim: Trace.Begin inside an open event (missing End)")
	}
	t.open = true
	t.byte(byte(k))
	t.word(uint64(now))
	if t.tap != nil {
		t.tapKind, t.tapAt, t.tapFields = k, now, t.tapFields[:0]
	}
	if t.w != nil {
		t.at = now
		t.line = appendTime(t.line[:0], now)
		t.line = append(t.line, ' ')
		t.line = append(t.line, k.String()...)
	}
	return t
}

// U records an unsigned field.
func (t *Trace) U(name string, v uint64) *Trace {
	t.mustBeOpen()
	t.word(v)
	if t.tap != nil {
		t.tapFields = append(t.tapFields, Field{Name: name, U: v})
	}
	if t.w != nil {
		t.line = t.appendName(name)
		t.line = strconv.AppendUint(t.line, v, 10)
	}
	return t
}

// I records a signed field.
func (t *Trace) I(name string, v int64) *Trace {
	t.mustBeOpen()
	t.word(uint64(v))
	if t.tap != nil {
		t.tapFields = append(t.tapFields, Field{Name: name, U: uint64(v)})
	}
	if t.w != nil {
		t.line = t.appendName(name)
		t.line = strconv.AppendInt(t.line, v, 10)
	}
	return t
}

// S records a string field. Its length is hashed before its bytes so that
// ("ab","c") and ("a","bc") differ.
func (t *Trace) S(name, v string) *Trace {
	t.mustBeOpen()
	t.word(uint64(len(v)))
	t.str(v)
	if t.tap != nil {
		t.tapFields = append(t.tapFields, Field{Name: name, S: v, IsStr: true})
	}
	if t.w != nil {
		t.line = t.appendName(name)
		t.line = strconv.AppendQuote(t.line, v)
	}
	return t
}

// End finishes the event and writes its text line if text is on.
func (t *Trace) End() {
	t.mustBeOpen()
	t.open = false
	t.events++
	t.byte(0xff) // event terminator: fields of adjacent events never alias
	if t.w != nil && t.err == nil {
		t.line = append(t.line, '\n')
		_, t.err = t.w.Write(t.line)
	}
	if t.rec != nil {
		t.rec.observe(t, false, 0, 0)
	}
	if t.tap != nil {
		t.tap.Event(t.tapAt, t.tapKind, t.tapFields)
	}
}

// Mix folds values into the hash without a text line. The scheduler uses
// it for every step, where a line per event would drown the dump.
// A Recorder counts each Mix as one step and reads a and b as the
// scheduler's (time, sequence number).
func (t *Trace) Mix(a, b uint64) {
	t.word(a)
	t.word(b)
	if t.rec != nil {
		t.rec.observe(t, true, a, b)
	}
	if t.tap != nil {
		t.steps++
		t.tap.Step(t.steps, time.Duration(a))
	}
}

func (t *Trace) mustBeOpen() {
	if !t.open {
		panic("sim: Trace field or End outside Begin/End")
	}
}

func (t *Trace) appendName(name string) []byte {
	t.line = append(t.line, ' ')
	t.line = append(t.line, name...)
	return append(t.line, '=')
}

func (t *Trace) byte(b byte) { t.word(uint64(b)) }

// word folds v into the hash: one SplitMix64 avalanche per word, which
// mixes as well as byte-wise FNV-1a at a quarter of the multiplications
// (the hash is on the path of every event).
func (t *Trace) word(v uint64) { t.hash = mix64(t.hash ^ v + golden) }

// str folds s in eight bytes at a time (little-endian, the tail padded
// with zeros; the length, hashed first, disambiguates the padding).
func (t *Trace) str(s string) {
	for len(s) >= 8 {
		t.word(uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56)
		s = s[8:]
	}
	var v uint64
	for i := len(s) - 1; i >= 0; i-- {
		v = v<<8 | uint64(s[i])
	}
	t.word(v)
}

// appendTime formats d as seconds with nanosecond digits ("12.000250000"),
// fixed width after the point so a dump sorts and aligns by eye.
func appendTime(b []byte, d time.Duration) []byte {
	sec := int64(d / time.Second)
	ns := int64(d % time.Second)
	b = strconv.AppendInt(b, sec, 10)
	b = append(b, '.')
	for div := int64(100_000_000); div > 0; div /= 10 {
		b = append(b, byte('0'+ns/div%10))
	}
	return b
}
