package sim

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stepWriter keeps a text dump line by line with the scheduler step each
// line was written in: an account of steps and events independent of the
// Recorder's.
type stepWriter struct {
	s     *Scheduler // nil until the caller sets it: step 0
	lines []string
	steps []uint64
}

func (w *stepWriter) Write(p []byte) (int, error) {
	var step uint64
	if w.s != nil {
		step = w.s.Steps()
	}
	w.lines = append(w.lines, strings.TrimSuffix(string(p), "\n"))
	w.steps = append(w.steps, step)
	return len(p), nil
}

// find returns the index of the only line containing sub.
func (w *stepWriter) find(t *testing.T, sub string) int {
	t.Helper()
	at := -1
	for i, l := range w.lines {
		if strings.Contains(l, sub) {
			if at >= 0 {
				t.Fatalf("two lines contain %q: %d and %d", sub, at, i)
			}
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("no line contains %q", sub)
	}
	return at
}

var delayField = regexp.MustCompile(` delay=(\d+)`)

// bumpDelay returns line with its delay field one nanosecond longer.
func bumpDelay(t *testing.T, line string) string {
	t.Helper()
	m := delayField.FindStringSubmatchIndex(line)
	if m == nil {
		t.Fatalf("no delay field in %q", line)
	}
	d, _ := strconv.ParseUint(line[m[2]:m[3]], 10, 64)
	return line[:m[2]] + strconv.FormatUint(d+1, 10) + line[m[3]:]
}

// workloadRun is the toy workload as a RecordedRun: the second world (and
// its rerun) makes store request skew 1ns slower; skew 0 changes nothing.
func workloadRun(seed, steps, skew uint64) RecordedRun {
	return func(second bool, rec *Recorder) {
		s, st := newWorkload(seed, nil, rec)
		if second {
			st.skew = skew
		}
		for s.Steps() < steps && !rec.Halted() && s.Step() {
		}
	}
}

// A recorder never changes the hash, whatever it does; a window's text is
// the dump's text, and text is formatted for the window's events only.
func TestRecorderLeavesHash(t *testing.T) {
	const seed, steps = 3, 20000
	var dump bytes.Buffer
	plain, _ := runWorkload(seed, steps, &dump)
	lines := strings.Split(strings.TrimSuffix(dump.String(), "\n"), "\n")

	keep := NewRecorder(RecorderConfig{})
	workloadRun(seed, steps, 0)(false, keep)
	fp := keep.Fingerprints()
	if fp.Hash != plain || !fp.Ended || fp.Steps != steps || fp.Events != uint64(len(lines)) {
		t.Fatalf("with a recorder: %+v; without: hash %016x, %d events", fp, plain, len(lines))
	}
	if fp.Stride != 1 || uint64(len(fp.Hashes)) != fp.Records || fp.Records != fp.Steps+fp.Events {
		t.Fatalf("stride %d, %d fingerprints, %d records", fp.Stride, len(fp.Hashes), fp.Records)
	}

	win := Span{Lo: 30000, Hi: 30040}
	w := NewRecorder(RecorderConfig{Expect: &fp, Window: &win})
	workloadRun(seed, steps, 0)(false, w)
	got := w.Window()
	if _, diverged := w.Diverged(); diverged || !w.Halted() || len(got) != 41 || got[40].Hash != fp.Hashes[win.Hi] {
		t.Fatalf("window run: diverged, halted %v, %d records", w.Halted(), len(got))
	}
	events := uint64(0)
	for i, r := range got {
		if r.Record != win.Lo+uint64(i) || r.Hash != fp.Hashes[r.Record] {
			t.Fatalf("window record %d: %+v", i, r)
		}
		if r.IsStep {
			continue
		}
		events++
		if r.Text != lines[r.Event] || r.At <= 0 {
			t.Fatalf("window text %q at %v, dump line %d %q", r.Text, r.At, r.Event, lines[r.Event])
		}
	}
	if w.lines != events || events == 0 {
		t.Fatalf("text formatted for %d events, %d in the window", w.lines, events)
	}
}

// Past fpMax fingerprints, every other one goes and the stride doubles;
// what is left is still the hash after every stride-th record.
func TestRecorderStride(t *testing.T) {
	all := NewRecorder(RecorderConfig{Window: &Span{Lo: 0, Hi: windowMax - 1}})
	workloadRun(4, 5000, 0)(false, all)
	few := NewRecorder(RecorderConfig{})
	few.fpMax = 8
	workloadRun(4, 5000, 0)(false, few)
	fp, every := few.Fingerprints(), all.Window()
	if fp.Records != uint64(len(every)) || fp.Hash != every[len(every)-1].Hash || fp.Stride < 1024 || len(fp.Hashes) >= 8 {
		t.Fatalf("%d records, stride %d, %d fingerprints; %d records in the full window", fp.Records, fp.Stride, len(fp.Hashes), len(every))
	}
	if uint64(len(fp.Hashes)) != fp.Records/fp.Stride {
		t.Fatalf("%d fingerprints for %d records at stride %d", len(fp.Hashes), fp.Records, fp.Stride)
	}
	for k, h := range fp.Hashes {
		if want := every[(uint64(k)+1)*fp.Stride-1].Hash; h != want {
			t.Fatalf("fingerprint %d: %016x, want %016x", k, h, want)
		}
	}
}

// A deterministic world: two runs, no reruns.
func TestCheckDeterminismSame(t *testing.T) {
	runs := 0
	run := workloadRun(5, 5000, 0)
	d := CheckDeterminism(func(second bool, rec *Recorder) { runs++; run(second, rec) }, 8)
	if !d.Same || runs != 2 || d.First.Hash != d.Second.Hash || d.First.Events == 0 {
		t.Fatalf("same: %v after %d runs: %+v", d.Same, runs, d)
	}
}

// The toy workload with one store request 1ns slower in the second run:
// the report names that request's store.issue event, its step and index
// as an independent text dump has them, and both lines differ only in
// the delay. With a small fingerprint budget the stride is large and the
// window must still find the same record.
func TestCheckDeterminismWorkload(t *testing.T) {
	const seed, steps, skew = 6, 20000, 2000
	dump := &stepWriter{}
	s, _ := newWorkload(seed, dump, nil)
	dump.s = s
	s.Run(steps)
	k := dump.find(t, fmt.Sprintf("store.issue req=%d ", skew))
	for _, fpMax := range []int{fingerprintsMax, 16} {
		t.Run(strconv.Itoa(fpMax), func(t *testing.T) {
			d := checkDeterminism(workloadRun(seed, steps, skew), 8, fpMax)
			checkSkewReport(t, d, dump, k)
			if (fpMax == 16) != (d.First.Stride > 1) {
				t.Fatalf("fpMax %d: stride %d", fpMax, d.First.Stride)
			}
		})
	}
}

// The real World (no faults, no destination): same check.
func TestCheckDeterminismWorld(t *testing.T) {
	const skew = 300
	cfg := Config{Seed: 9, Iters: 5000}
	dump := &stepWriter{}
	cfg.Trace = dump
	w := NewWorld(cfg)
	dump.s = w.sched
	plain := w.Run(nil)
	k := dump.find(t, fmt.Sprintf("store.issue req=%d ", skew))
	d := CheckDeterminism(func(second bool, rec *Recorder) {
		cfg := Config{Seed: 9, Iters: 5000, Recorder: rec}
		w := NewWorld(cfg)
		if second {
			w.SkewStoreRequest(skew)
		}
		w.Run(nil)
	}, 8)
	checkSkewReport(t, d, dump, k)
	if d.First.Hash != plain.Hash || d.First.Steps != plain.Steps {
		t.Fatalf("recorded run: hash %016x steps %d; plain run: %016x, %d", d.First.Hash, d.First.Steps, plain.Hash, plain.Steps)
	}
}

func checkSkewReport(t *testing.T, d Divergence, dump *stepWriter, k int) {
	t.Helper()
	if d.Same || !d.Located || d.A == nil || d.B == nil {
		t.Fatalf("not located: %+v", d)
	}
	a, b := d.A, d.B
	if a.IsStep || a.Event != uint64(k) || b.Event != uint64(k) || a.Step != dump.steps[k] || b.Step != dump.steps[k] {
		t.Fatalf("diverged at event %d step %d / event %d step %d; want event %d step %d",
			a.Event, a.Step, b.Event, b.Step, k, dump.steps[k])
	}
	if a.Text != dump.lines[k] || b.Text != bumpDelay(t, a.Text) || a.Record != d.Record {
		t.Fatalf("diverging lines:\n%s\n%s\nwant\n%s", a.Text, b.Text, dump.lines[k])
	}
	if len(d.Before) != 8 || d.Before[7].Record != d.Record-1 {
		t.Fatalf("%d records of context, last %+v", len(d.Before), d.Before[len(d.Before)-1])
	}
	for _, r := range d.Before {
		if !r.IsStep && r.Text != dump.lines[r.Event] {
			t.Fatalf("context line %q, dump line %d %q", r.Text, r.Event, dump.lines[r.Event])
		}
	}
}

// synthRun is a world of n steps, step i at i ms recording one event.
// differ(run, i) changes step i in the run-th run (1: the first world,
// 2: the second, 3 and 4: their reruns, the order CheckDeterminism runs
// them in): the step is late by lag, and records events events (none: the
// step is not scheduled at all). Every recorder it is given lands in recs.
func synthRun(n int, differ func(run, i int) (lag time.Duration, events int), recs *[]*Recorder) RecordedRun {
	runs := 0
	return func(second bool, rec *Recorder) {
		runs++
		if second != (runs%2 == 0) {
			panic("synthRun: runs out of the expected order")
		}
		*recs = append(*recs, rec)
		tr := NewTrace()
		tr.SetRecorder(rec)
		s := NewScheduler(NewRand(1), tr, SchedulerConfig{})
		for i := range n {
			lag, k := differ(runs, i)
			if k < 0 {
				continue
			}
			s.At(time.Duration(i)*time.Millisecond+lag, func() {
				for range k {
					tr.Begin(s.Now(), KindTimerFire).U("inc", uint64(i)).End()
				}
			})
		}
		for !rec.Halted() && s.Step() {
		}
	}
}

// synthCase changes the steps from `from` to `to` in the given runs (see
// synthRun) to lag and events.
func synthCase(from, to int, runs []int, lag time.Duration, events int) func(run, i int) (time.Duration, int) {
	return func(run, i int) (time.Duration, int) {
		if i < from || i > to || !slices.Contains(runs, run) {
			return 0, 1
		}
		return lag, events
	}
}

// Divergences in a step (no event differs), at the end of either run,
// and ones that a rerun does not reproduce; at stride 1 and at a stride
// of 32 records (200 records, 8 fingerprints at most), where windows end
// at records no fingerprint covers.
func TestCheckDeterminismSynthetic(t *testing.T) {
	const n = 100
	second := []int{2, 4}
	for _, fpMax := range []int{fingerprintsMax, 8} {
		t.Run(strconv.Itoa(fpMax), func(t *testing.T) {
			var recs []*Recorder
			// check runs the world with the first of differ that changes a step.
			check := func(differ ...func(run, i int) (time.Duration, int)) Divergence {
				recs = recs[:0]
				d := checkDeterminism(synthRun(n, func(run, i int) (time.Duration, int) {
					for _, f := range differ {
						if lag, k := f(run, i); lag != 0 || k != 1 {
							return lag, k
						}
					}
					return 0, 1
				}, &recs), 4, fpMax)
				checkTextInWindows(t, recs)
				return d
			}
			d := check(synthCase(40, 40, second, time.Nanosecond, 1))
			if !d.Located || d.Record != 80 || !d.A.IsStep || d.A.Step != 41 || d.B.Step != 41 ||
				d.A.Text != "0.040000000 step n=41 seq=40" || d.B.Text != "0.040000001 step n=41 seq=40" || len(d.Before) != 4 {
				t.Fatalf("late step: %s", showDivergence(d))
			}
			d = check(synthCase(n-1, n-1, second, 0, 0))
			if !d.Located || d.Record != 2*n-1 || d.B != nil || d.A.Event != n-1 || d.A.Text != "0.099000000 timer.fire inc=99" {
				t.Fatalf("last event missing: %s", showDivergence(d))
			}
			d = check(synthCase(n-1, n-1, second, 0, 2))
			if !d.Located || d.Record != 2*n || d.A != nil || d.B.Event != n || d.B.Text != "0.099000000 timer.fire inc=99" ||
				d.Second.Ended || d.Second.Records != 2*n+1 {
				t.Fatalf("one event more: %s", showDivergence(d))
			}
			lastThree := synthCase(n-3, n-1, second, 0, -1)
			d = check(lastThree)
			if !d.Located || d.Record != 2*(n-3) || d.B != nil || !d.A.IsStep || d.A.Text != "0.097000000 step n=98 seq=97" {
				t.Fatalf("last three steps missing: %s", showDivergence(d))
			}

			d = check(synthCase(40, 40, []int{2}, time.Nanosecond, 1))
			want := map[int]string{fingerprintsMax: "by record 80 (step 41, event 40)", 8: "by record 95 (step 48, event 47)"}[fpMax]
			if d.Located || d.Span.Lo > 80 || d.Span.Hi < 80 || !strings.Contains(d.Problem, "second run's rerun differs from it "+want) {
				t.Fatalf("unreproduced: %s", showDivergence(d))
			}
			// The second world's last step has an extra event; its rerun's is
			// also 1ns late.
			d = check(synthCase(n-1, n-1, []int{2}, 0, 2), synthCase(n-1, n-1, []int{4}, time.Nanosecond, 2))
			want = map[int]string{fingerprintsMax: "by record 198 (step 100, event 99)", 8: "by record 200 (step 100, event 100)"}[fpMax]
			if d.Located || !strings.Contains(d.Problem, "second run's rerun differs from it "+want) {
				t.Fatalf("unreproduced at the end: %s", showDivergence(d))
			}
			// The second world lacks the last three steps; the first's rerun is
			// 1ns late at the step where they would start.
			d = check(lastThree, synthCase(n-3, n-3, []int{3}, time.Nanosecond, 1))
			want = map[int]string{fingerprintsMax: "by record 194 (step 98, event 97)", 8: "by record 199 (step 100, event 99)"}[fpMax]
			if d.Located || !strings.Contains(d.Problem, "first run's rerun differs from it "+want) {
				t.Fatalf("first run unreproduced: %s", showDivergence(d))
			}
		})
	}
}

// showDivergence prints d without its fingerprints.
func showDivergence(d Divergence) string {
	d.First.Hashes, d.Second.Hashes = nil, nil
	return fmt.Sprintf("%+v\nA %+v\nB %+v", d, d.A, d.B)
}

// checkTextInWindows: a recorder formatted text for the events of its
// window only (none without a window).
func checkTextInWindows(t *testing.T, recs []*Recorder) {
	t.Helper()
	for i, r := range recs {
		events := uint64(0)
		for _, w := range r.Window() {
			if !w.IsStep {
				events++
			}
		}
		if r.lines != events {
			t.Fatalf("recorder %d formatted %d lines for %d events in its window %+v", i, r.lines, events, r.cfg.Window)
		}
	}
}
