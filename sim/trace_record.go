package sim

import (
	"fmt"
	"strconv"
	"time"
)

// Recorder watches a Trace record by record; it is how simulate
// -check-determinism finds where two runs of one seed part (see
// CheckDeterminism). A record is one event (Begin … End) or one Mix (a
// scheduler step): both feed the hash, so a divergence in either shows.
// Records are numbered from 0 in the order they are hashed.
//
// A Recorder does up to three things:
//
//   - It keeps fingerprints: the running hash after every Stride-th
//     record. Stride starts at 1 (8 bytes per record); when the list
//     reaches fingerprintsMax entries, every other one is dropped and
//     Stride doubles, so memory stays bounded on any run length.
//   - With Expect, it compares its fingerprints with another run's (same
//     Stride) at every checkpoint and at the other run's last record, and
//     halts at the first difference, or at the first record the other
//     run did not have if that run ended.
//   - With Window, it captures the text of the records in [Lo, Hi] (the
//     Trace's text formatting is on inside the window only), and halts
//     after Hi once Hi has been checked against Expect (or at once,
//     without Expect). If Hi cannot be checked (it is neither a checkpoint
//     nor the expected run's last record), the run goes on, still being
//     checked, to its end.
//
// Halting only sets a flag: the loop driving the world stops stepping
// (World.Run does; see Halted). Records after the halt are ignored.
// Recording never changes the hash.
type Recorder struct {
	cfg RecorderConfig
	fp  Fingerprints
	// untilCheckpoint counts down the records left to the next checkpoint.
	// INVARIANT: 1 <= untilCheckpoint <= fp.Stride.
	untilCheckpoint uint64
	// fpMax bounds len(fp.Hashes); even (see thin). Tests lower it.
	fpMax int
	// halted: stop stepping; diverged: halted on a difference from Expect.
	halted, diverged bool
	// diverge is where it differed (meaningful if diverged).
	diverge WindowRecord
	// window holds the captured records, in order from cfg.Window.Lo.
	window []WindowRecord
	// line is the text line the Trace wrote for the event being recorded.
	line []byte
	// lines counts the text lines the Trace wrote (tests check that
	// formatting ran inside the window only).
	lines  uint64
	textOn bool
}

// RecorderConfig chooses what a Recorder does besides keeping fingerprints.
type RecorderConfig struct {
	// Expect, if set, is another run's fingerprints to compare with.
	Expect *Fingerprints
	// Window, if set, is the span of records whose text to capture.
	Window *Span
}

// Span is a range of record indices, both ends included.
type Span struct{ Lo, Hi uint64 }

// Fingerprints is what a Recorder kept of one run.
type Fingerprints struct {
	// Stride is the number of records per checkpoint.
	Stride uint64
	// Hashes[k] is the trace hash after record (k+1)*Stride-1.
	Hashes []uint64
	// Records, Steps and Events count what the run recorded until it
	// ended or halted; Hash is the trace hash after its last record.
	Records, Steps, Events, Hash uint64
	// Ended: the run ended on its own (it was not halted).
	Ended bool
}

// WindowRecord is one record as a window captured it.
type WindowRecord struct {
	// Record is its index among all records.
	Record uint64
	// Step is the scheduler step it belongs to: the number of Mix calls so
	// far, this one included. The scheduler mixes once per step, so this
	// is Scheduler.Steps() at the time; 0 means before the first step.
	Step uint64
	// Event is an event's index (its line, from 0, in a -trace dump); for
	// a step, the index of the next event.
	Event uint64
	// IsStep: a Mix, not an event.
	IsStep bool
	// At is its simulated time; Hash the trace hash after it.
	At   time.Duration
	Hash uint64
	// Text is the line a -trace dump prints for it, without the newline.
	// A step has no line in a dump; its text is "TIME step n=STEP seq=SEQ".
	Text string
}

// fingerprintsMax bounds the fingerprints of one run: 32 MiB. A run of
// fewer records keeps one per record.
const fingerprintsMax = 1 << 22

// windowMax bounds a window's length: a window is a few records around a
// divergence, never a whole trace.
const windowMax = 1 << 20

// NewRecorder returns a recorder to attach to a fresh Trace (SetRecorder,
// or Config.Recorder for a World).
func NewRecorder(cfg RecorderConfig) *Recorder {
	stride := uint64(1)
	if cfg.Expect != nil {
		stride = cfg.Expect.Stride
	}
	if w := cfg.Window; w != nil && (w.Hi < w.Lo || w.Hi-w.Lo >= windowMax) {
		panic(fmt.Sprintf("sim: Recorder window [%d, %d]: empty or longer than %d", w.Lo, w.Hi, windowMax))
	}
	if stride == 0 {
		panic("sim: Recorder: expected fingerprints with stride 0")
	}
	return &Recorder{cfg: cfg, fp: Fingerprints{Stride: stride}, untilCheckpoint: stride, fpMax: fingerprintsMax}
}

// SetRecorder attaches r: from now on it sees every record.
// REQUIRES: nothing recorded yet; if r has a window, text is off.
func (t *Trace) SetRecorder(r *Recorder) {
	if t.events != 0 || t.hash != fnvOffset || t.open || t.rec != nil {
		panic("sim: SetRecorder on a trace that has recorded or has a recorder")
	}
	if r.cfg.Window != nil && t.w != nil {
		panic("sim: a Recorder window needs the trace's text writer, which is set")
	}
	t.rec = r
	if r.cfg.Window != nil && r.cfg.Window.Lo == 0 {
		r.text(t, true)
	}
}

// Halted reports whether the run should stop stepping.
func (r *Recorder) Halted() bool { return r.halted }

// Fingerprints returns what the recorder kept. Call it after the run.
func (r *Recorder) Fingerprints() Fingerprints {
	fp := r.fp
	fp.Ended = !r.halted
	return fp
}

// Window returns the captured records, in order.
func (r *Recorder) Window() []WindowRecord { return r.window }

// Diverged reports whether the run differed from Expect, and where: the
// record it halted at (its index, step and event; no text).
func (r *Recorder) Diverged() (WindowRecord, bool) { return r.diverge, r.diverged }

// observe sees record number fp.Records, just hashed. a and b are a
// step's Mix arguments.
func (r *Recorder) observe(t *Trace, step bool, a, b uint64) {
	if r.halted {
		return
	}
	i := r.fp.Records
	r.fp.Records++
	if step {
		r.fp.Steps++
	}
	r.fp.Events, r.fp.Hash = t.events, t.hash
	if w := r.cfg.Window; w != nil && i >= w.Lo && i <= w.Hi {
		r.capture(t, i, step, a, b)
	}
	checked, same := r.check(i)
	switch {
	case !same:
		r.diverged, r.diverge = true, r.describe(t, i, step, a)
		r.halt(t)
	case r.cfg.Window == nil:
		// Fingerprints (and comparison) only.
	case i == r.cfg.Window.Hi && (checked || r.cfg.Expect == nil):
		r.halt(t)
	case i == r.cfg.Window.Hi:
		r.text(t, false) // go on unseen to a point that can be checked
	case i+1 == r.cfg.Window.Lo:
		r.text(t, true)
	}
}

// check keeps a checkpoint if record i ends a stride, and compares with
// Expect where it can: at checkpoints, at the expected run's last
// record, and past the end of an expected run that ended.
func (r *Recorder) check(i uint64) (checked, same bool) {
	e := r.cfg.Expect
	if e != nil && e.Ended && i >= e.Records {
		return true, false
	}
	if e != nil && i+1 == e.Records {
		checked, same = true, e.Hash == r.fp.Hash
	} else {
		same = true
	}
	r.untilCheckpoint--
	if r.untilCheckpoint > 0 {
		return checked, same
	}
	r.untilCheckpoint = r.fp.Stride
	k := len(r.fp.Hashes)
	r.fp.Hashes = append(r.fp.Hashes, r.fp.Hash)
	if e != nil && k < len(e.Hashes) {
		checked, same = true, same && e.Hashes[k] == r.fp.Hash
	}
	if len(r.fp.Hashes) == r.fpMax {
		r.thin()
	}
	return checked, same
}

// thin halves the fingerprints: checkpoint k of stride 2S is the old
// checkpoint 2k+1 of stride S.
// REQUIRES: a full list (fpMax entries, even), no Expect (comparing needs
// the expected run's stride, and a compared run has at most as many
// checkpoints as the expected one).
func (r *Recorder) thin() {
	if r.cfg.Expect != nil || r.fpMax%2 != 0 {
		panic(fmt.Sprintf("sim: Recorder.thin with Expect set or odd fpMax %d", r.fpMax))
	}
	h := r.fp.Hashes
	for k := range len(h) / 2 {
		h[k] = h[2*k+1]
	}
	r.fp.Hashes = h[:len(h)/2]
	r.fp.Stride *= 2
	r.untilCheckpoint = r.fp.Stride
}

func (r *Recorder) halt(t *Trace) {
	r.halted = true
	r.text(t, false)
}

// text turns the trace's text formatting on (into the recorder) or off.
// REQUIRES: between events, so no line is cut in two.
func (r *Recorder) text(t *Trace, on bool) {
	if t.open {
		panic("sim: Recorder switches text inside an event")
	}
	if on {
		t.SetWriter(recorderText{r})
	} else if r.textOn {
		t.SetWriter(nil)
	}
	r.textOn = on
}

// recorderText receives the Trace's text lines inside a window.
type recorderText struct{ r *Recorder }

func (w recorderText) Write(p []byte) (int, error) {
	w.r.line = append(w.r.line[:0], p...)
	w.r.lines++
	return len(p), nil
}

func (r *Recorder) capture(t *Trace, i uint64, step bool, a, b uint64) {
	rec := r.describe(t, i, step, a)
	if step {
		line := appendTime(nil, rec.At)
		line = append(line, " step n="...)
		line = strconv.AppendUint(line, rec.Step, 10)
		line = append(line, " seq="...)
		rec.Text = string(strconv.AppendUint(line, b, 10))
	} else {
		line := r.line
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		rec.Text = string(line)
	}
	r.window = append(r.window, rec)
}

// describe returns record i without its text, and with its time only if
// it is a step or text was on.
func (r *Recorder) describe(t *Trace, i uint64, step bool, a uint64) WindowRecord {
	rec := WindowRecord{Record: i, Step: r.fp.Steps, Event: t.events, IsStep: step, Hash: t.hash}
	switch {
	case step:
		rec.At = time.Duration(a)
	case r.textOn:
		rec.At, rec.Event = t.at, t.events-1
	default:
		rec.Event = t.events - 1
	}
	return rec
}
