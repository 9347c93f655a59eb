package sim

import "fmt"

// RecordedRun runs one world of a determinism check with rec attached to
// its trace before the first record (Config.Recorder does that), and
// stops stepping once rec.Halted(). second is false for the first world
// and its rerun, true for the second world and its rerun: a correct
// caller builds the same world either way (tests use it to break that).
type RecordedRun func(second bool, rec *Recorder)

// Divergence is the verdict of CheckDeterminism.
type Divergence struct {
	// First and Second are the fingerprints of the first two runs.
	First, Second Fingerprints
	// Same: the two runs recorded the same records and hash. The rest is
	// set only when they did not.
	Same bool
	// Span holds the first differing record, as far as the fingerprints
	// tell (one checkpoint's stride).
	Span Span
	// Located: the reruns pinned it down; Record, Before, A and B are set.
	Located bool
	// Record is the index of the first record that differs.
	Record uint64
	// Before is up to `context` records just before it, the same in both
	// runs (their hashes agree).
	Before []WindowRecord
	// A and B are that record in the first and the second run; nil means
	// the run had ended before it.
	A, B *WindowRecord
	// Problem says why it was not located (a rerun did not reproduce its
	// own run, so printing its records would mislead).
	Problem string
}

// CheckDeterminism runs a world twice and, if the runs differ, finds the
// first record (event or step) at which they part and the text of both:
//
//  1. The first run keeps fingerprints (Recorder).
//  2. The second run compares with them as it goes and halts at the first
//     checkpoint that differs: that bounds the divergence to one stride.
//  3. Each run is rerun with text capture on for that stride and the
//     `context` records before it only, checked against its own earlier
//     fingerprints on the way (a rerun that does not reproduce its run is
//     reported as such, not printed). Comparing the two windows record by
//     record locates the first difference.
//
// So a deterministic world costs two runs, a divergent one at most four,
// and text is formatted for at most stride+context+1 records per rerun.
func CheckDeterminism(run RecordedRun, context int) Divergence {
	return checkDeterminism(run, context, fingerprintsMax)
}

// checkDeterminism is CheckDeterminism with the first run's fingerprints
// bounded by fpMax (tests lower it to exercise strides above 1).
func checkDeterminism(run RecordedRun, context, fpMax int) Divergence {
	first := NewRecorder(RecorderConfig{})
	first.fpMax = fpMax
	run(false, first)
	d := Divergence{First: first.Fingerprints()}
	second := NewRecorder(RecorderConfig{Expect: &d.First})
	run(true, second)
	d.Second = second.Fingerprints()
	a, b := d.First, d.Second
	if b.Ended && b.Records == a.Records && b.Hash == a.Hash {
		d.Same = true
		return d
	}
	d.Span = divergenceSpan(a, b)
	win := Span{Lo: d.Span.Lo - min(d.Span.Lo, uint64(max(context, 0))), Hi: d.Span.Hi}
	wa, err := rerun(run, false, a, win)
	if err != nil {
		d.Problem = "the first run's rerun " + err.Error()
		return d
	}
	wb, err := rerun(run, true, b, win)
	if err != nil {
		d.Problem = "the second run's rerun " + err.Error()
		return d
	}
	d.locate(win, wa, wb, context)
	return d
}

// divergenceSpan: the runs agree up to their last common checkpoint c-1;
// the first difference is after it and no later than the next checkpoint,
// the end of either run (a record one run lacks), or where b halted.
func divergenceSpan(a, b Fingerprints) Span {
	if a.Stride != b.Stride {
		panic(fmt.Sprintf("sim: fingerprints of strides %d and %d", a.Stride, b.Stride))
	}
	c := uint64(0)
	for c < uint64(min(len(a.Hashes), len(b.Hashes))) && a.Hashes[c] == b.Hashes[c] {
		c++
	}
	hi := min((c+1)*a.Stride-1, a.Records, b.Records)
	return Span{Lo: c * a.Stride, Hi: hi}
}

// rerun runs one world again with text capture on win, checked against
// orig, its own earlier fingerprints, and returns the captured records.
func rerun(run RecordedRun, second bool, orig Fingerprints, win Span) ([]WindowRecord, error) {
	r := NewRecorder(RecorderConfig{Expect: &orig, Window: &win})
	run(second, r)
	got := r.Fingerprints()
	if at, diverged := r.Diverged(); diverged {
		return nil, fmt.Errorf("differs from it by record %d (step %d, event %d)", at.Record, at.Step, at.Event)
	}
	if !got.Ended {
		return r.Window(), nil // halted at the window's end, checked there
	}
	if got.Records < orig.Records || (orig.Ended && got.Hash != orig.Hash) {
		return nil, fmt.Errorf("ended after %d records (hash %016x), where the run recorded %d (hash %016x, ended %v)",
			got.Records, got.Hash, orig.Records, orig.Hash, orig.Ended)
	}
	return r.Window(), nil
}

// locate walks the two windows from the span's start to the first record
// whose hash differs or that one run lacks.
func (d *Divergence) locate(win Span, wa, wb []WindowRecord, context int) {
	at := func(w []WindowRecord, i uint64) *WindowRecord {
		if k := i - win.Lo; k < uint64(len(w)) {
			return &w[k]
		}
		return nil
	}
	for i := d.Span.Lo; i <= d.Span.Hi; i++ {
		ra, rb := at(wa, i), at(wb, i)
		if ra != nil && rb != nil && ra.Hash == rb.Hash {
			continue
		}
		if ra == nil && rb == nil {
			break // both runs ended: nothing differs before
		}
		d.Located, d.Record, d.A, d.B = true, i, ra, rb
		k := i - win.Lo
		d.Before = wa[k-min(k, uint64(max(context, 0))) : k]
		return
	}
	d.Problem = fmt.Sprintf("the reruns agree on records %d..%d, where the runs differed (a hash collision, or a divergence that does not reproduce)",
		d.Span.Lo, d.Span.Hi)
}
