package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// The stages' pre- and postconditions added for the assertion density
// (compact, cut, planner, flush, persist, apply, checkpoint, recovery,
// reclaim, trouble, stats, retry), each broken on purpose: a port that
// answers twice, a timer that fires with none armed, a step in the wrong
// stage, a caller's REQUIRES broken.

// twiceExec runs work, then its completion twice: an executor that
// breaks its contract.
type twiceExec struct{}

func (twiceExec) Go(work, done func()) { work(); done(); done() }

// stagesStore holds the callbacks of PUTs, GETs and LISTs for the test to
// answer, and drops deletes (best effort, never waited for).
type stagesStore struct {
	heldStore
	lists []func(ListPage, error)
}

func (s *stagesStore) DeleteObject(string, func(error)) {}

func (s *stagesStore) ListObjects(_, _ string, done func(ListPage, error)) {
	s.lists = append(s.lists, done)
}

// heldSink keeps the answers of the jobs it is asked to apply.
type heldSink struct{ dones []func(error) }

func (s *heldSink) Apply(_ *Job, done func(error)) { s.dones = append(s.dones, done) }

type sinksOf struct{ s Sink }

func (o sinksOf) Sink(string) (Sink, bool) { return o.s, true }

// failedPersist fails the active snapshot's persist on e (held timers,
// a store that answers nothing) and returns the end of the writer's
// backoff that follows.
func failedPersist(e *Engine) (end func()) {
	h := &heldTimers{}
	e.p.Timers, e.p.Rand = h, fixedRand(1)
	e.p.Store = countingStore{ObjectStore: &stagesStore{}, e: e}
	e.cfg.RetryBase, e.cfg.RetryMax = time.Millisecond, time.Second
	s := &snapshot{id: SnapshotID{1, 2}, stage: persistMarker, content: newBatchSet()}
	e.active = s
	e.persistFailed(s, errors.New("marker refused"))
	return h.fns[len(h.fns)-1]
}

// wantPanic runs f and wants it to panic with a message holding want.
func wantPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg := fmt.Sprint(r)
		if err, ok := r.(error); ok {
			msg = err.Error()
		}
		if r == nil || !strings.Contains(msg, want) {
			t.Fatalf("recovered %v; want a panic naming %q", r, want)
		}
	}()
	f()
}

// TestInvariantStagePorts: a port that answers twice — a sink, the
// executor, the store — or a timer that fires with none armed fails the
// engine closed on the step it would repeat.
func TestInvariantStagePorts(t *testing.T) {
	seg := &segState{Segment: Segment{ID: SnapshotID{1, 4}, Index: &segment.Index{}}}
	g := segment.Group{SinkRef: "lake", Namespace: "ns"}
	cases := []breakCase{
		{"sink-answers-twice", "a sink answers a job once: job j (cut in segment 000000000001-000000000004) answered again", func(t *testing.T, e *Engine) {
			withPorts(e)
			e.reporting.namespaces = map[string]*NamespaceStats{}
			e.cfg.CompactionConcurrency, e.running = 1, 1
			j := &job{id: "j", group: g, cut: seg, state: jobRunning}
			e.lanes = map[laneKey]*lane{laneOf(g): {key: laneOf(g), jobs: []*job{j}}}
			sink := &heldSink{}
			e.apply(sink, j, nil, func() {})
			refused := fmt.Errorf("%w: no such table", ErrCannotApply)
			sink.dones[0](refused) // refused: the lane stops, the engine goes on
			if e.err != nil {
				t.Fatalf("the first answer failed the engine: %v", e.err)
			}
			sink.dones[0](refused)
		}},
		{"piece-decoded-twice", "the executor answers a piece's decode once: job j, piece 0 of 1 in segment 000000000001-000000000004 answered again", func(t *testing.T, e *Engine) {
			withPorts(e)
			e.p.Exec, e.p.Sinks = twiceExec{}, sinksOf{&heldSink{}}
			e.cache.entries[seg.ID] = &cacheEntry{body: &segment.Body{}}
			j := &job{id: "j", group: g, cut: seg, state: jobRunning, pieces: []piece{{seg: seg}}}
			e.gather(j, 0, nil, nil)
		}},
		{"body-encoded-twice", "the executor answers a body's encoding once: snapshot 000000000001-000000000002 answered again", func(t *testing.T, e *Engine) {
			withPorts(e)
			e.p.Exec, e.cfg.PartBytes = twiceExec{}, 1<<20
			e.prepare(&snapshot{id: SnapshotID{1, 2}, content: newBatchSet()})
		}},
		{"offsets-write-answered-twice", "a write of _offsets answers once: _offsets answered again", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.ckptWriting = true
			landed := 0
			e.writeSources(func(bool) { landed++ })
			s.puts[0]("v1", nil)
			s.puts[0]("v2", nil)
			if landed != 1 {
				t.Errorf("the round heard %d landings", landed)
			}
		}},
		{"flush-timer-unarmed", "the flush timer fires once, while armed: fired with none armed", func(t *testing.T, e *Engine) {
			e.onFlushTimer()
		}},
		{"bitmap-timer-unarmed", "a segment's bitmap timer fires once, while armed: segment 000000000001-000000000004", func(t *testing.T, e *Engine) {
			h := &heldTimers{}
			e.p.Timers = h
			st := &segState{Segment: seg.Segment}
			e.scheduleBitmap(st)
			st.flushCancel = nil // cleared without its cancel
			h.fns[0]()
		}},
		{"cut-timer-early", "the cut timer fires once, while armed, at its time: armed true, due 1h0m", func(t *testing.T, e *Engine) {
			h := &heldTimers{}
			e.p.Timers = h
			e.cfg.DefaultLanes = LaneLimits{FileBytes: 1 << 20, FlushInterval: time.Hour}
			o := &openJob{group: g, pieces: []piece{{seg: seg}}}
			e.laneOrder = []*lane{{key: laneOf(g), open: []*openJob{o}}}
			e.armInterval()
			h.fns[0]() // at once: an hour early
		}},
		{"close-grace-twice", "a close's grace runs out once: it ran out again in state 3", func(t *testing.T, e *Engine) {
			h := &heldTimers{}
			e.p.Timers = h
			e.state = stateReady
			e.Close(func(error) {})
			h.fns[0]()
			if e.err != nil {
				t.Fatalf("the grace's end failed the engine: %v", e.err)
			}
			h.fns[0]()
		}},
		{"cooling-ends-twice", "the writer's backoff after a failed persist ends once: ended with none running, 1 failures", func(t *testing.T, e *Engine) {
			end := failedPersist(e)
			end()
			if e.err != nil {
				t.Fatalf("the backoff's end failed the engine: %v", e.err)
			}
			end()
		}},
		{"idem-listing-repeats", `a LIST page moves on: pipe/_idem/ gave next token "t1" for token "t1"`, func(t *testing.T, e *Engine) {
			h := &heldTimers{}
			s := &stagesStore{}
			e.p.Timers, e.p.Store = h, s
			e.layout = NewLayout("", "pipe")
			e.sweepIdemBuckets("t1")
			s.lists[0](ListPage{NextToken: "t1"}, nil)
			h.fns[0]() // forEach of none answers later
			if len(s.lists) != 1 {
				t.Errorf("%d listings: the repeated page was listed again", len(s.lists))
			}
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantStageSteps: steps run in the wrong stage or state fail
// closed: a multipart upload's create, complete, HEAD and part starts;
// a recovery round once ingest opened; a read of _offsets over a write in
// flight; a trouble from the future.
func TestInvariantStageSteps(t *testing.T) {
	upload := func(e *Engine, stage uploadStage, id string) *multipart {
		return &multipart{e: e, s: &snapshot{id: SnapshotID{1, 2}, uploadID: id}, key: "k.seg", stage: stage, parts: make([]CompletedPart, 3)}
	}
	cases := []breakCase{
		{"upload-created-twice", `a multipart upload is created once: k.seg in stage parts, upload "u1"`, func(t *testing.T, e *Engine) {
			upload(e, uploadParts, "u1").create(func(error) { t.Error("created") })
		}},
		{"upload-completed-early", `a multipart upload completes a created upload with no part in flight: k.seg in stage parts, upload "u1", 0 parts in flight`, func(t *testing.T, e *Engine) {
			upload(e, uploadParts, "u1").complete(func(error) { t.Error("completed") })
		}},
		{"upload-headed-unasked", "a multipart body is read back only to settle an ambiguous completion: k.seg in stage completing", func(t *testing.T, e *Engine) {
			upload(e, uploadCompleting, "u1").head(func(error) { t.Error("headed") })
		}},
		{"parts-after-completing", "parts start only while an upload is in stage parts: k.seg in stage completing, part 1 of 3 next", func(t *testing.T, e *Engine) {
			e.cfg.PartConcurrency = 2
			m := upload(e, uploadCompleting, "u1")
			m.launch()
			if m.inFlight != 0 {
				t.Errorf("%d parts started", m.inFlight)
			}
		}},
		{"recovery-after-open", "recovery rounds run while recovering: round 1 in state 2", func(t *testing.T, e *Engine) {
			e.state = stateReady
			var got error
			e.recover(1, func(err error) { got = err })
			if !errors.Is(got, ErrInvariant) {
				t.Errorf("done(%v); want the invariant's error", got)
			}
		}},
		{"offsets-read-over-a-write", "_offsets is read into a view with no write in flight: _offsets read while 1 keys are in flight", func(t *testing.T, e *Engine) {
			withPorts(e)
			v := newOffsetsView()
			v.flight["src/1"] = struct{}{}
			e.readSources(v, e.keys, func(error) {})
		}},
		{"trouble-from-the-future", "a trouble has failed since it started: recovery, 1 attempts, error true, since 1h0m0s", func(t *testing.T, e *Engine) {
			e.trouble.now = map[string]*Trouble{troubleRecovery: {Op: troubleRecovery, Since: time.Hour, Attempts: 1, Err: errors.New("down")}}
			if _, ok := e.troubleFor(troubleRecovery); ok {
				t.Error("a trouble from the future is reported as lasting")
			}
		}},
		{"pieces-miss-a-part", "a segment's pieces hold each of its PARTs once, a piece per group: segment 000000000001-000000000003, 2 PARTs, 1 in pieces, 1 pieces for 1 groups", func(t *testing.T, e *Engine) {
			st := &segState{Segment: Segment{ID: SnapshotID{1, 3}, Index: &segment.Index{Entries: make([]segment.IndexEntry, 2)}}}
			if e.checkPiecesCover(st, []segment.Group{{}}, []piece{{seg: st, ordinals: []segment.SliceOrdinal{0}}}) {
				t.Error("held")
			}
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantStagePlanner: the cut planner's interval with a negative
// limit reports through its hook.
func TestInvariantStagePlanner(t *testing.T) {
	var c capture
	p := cutPlanner{limits: func(string) LaneLimits { return LaneLimits{FileBytes: 1, FlushInterval: -time.Second} }, inv: c.hook()}
	if at := p.intervalEnd("lake", 5*time.Second); at != 5*time.Second {
		t.Errorf("interval end %v; want the job's own start", at)
	}
	c.want(t, "cut planner: a sink's flush interval ≥ 0: lake, flush interval -1s")
}

// TestInvariantStageRequires: a helper's REQUIRES broken by its direct
// caller panics, naming it with its values.
func TestInvariantStageRequires(t *testing.T) {
	st := &segState{Segment: Segment{ID: SnapshotID{1, 5}}}
	other := &segState{Segment: Segment{ID: SnapshotID{1, 6}}}
	g := segment.Group{SinkRef: "lake", Namespace: "ns"}
	cases := []struct {
		name, want string
		f          func()
	}{
		{"later-nothing", "later without a function to run", func() { bare().later(nil) }},
		{"start-without-answer", "Start without its answer", func() { bare().Start(nil) }},
		{"job-of-another-segment", "a segment's jobs hold PARTs of it or end with its cut: job j (cut in segment 000000000001-000000000006, 1 pieces) joins segment 000000000001-000000000005", func() {
			st.addJob(&job{id: "j", cut: other, pieces: []piece{{seg: other}}})
		}},
		{"drop-an-open-job-not-held", "an open job dropped is one of its lane's, once: lane lake/ns", func() {
			ln := &lane{key: laneOf(g), open: []*openJob{{group: g}}}
			ln.dropOpen(&openJob{group: g})
		}},
		{"pending-cut-of-two-groups", "a pending cut extends its open job by one group of it at most: 2 groups of the lane in 000000000001-000000000005, open job false", func() {
			pendingCut(st.ID, nil, []groupParts{{group: g, parts: 1}, {group: g, parts: 1}}, []int{0, 1})
		}},
		{"pending-cut-of-another-group", "by one group of it at most: 1 groups of the lane in 000000000001-000000000005, open job true", func() {
			cdc := segment.Group{SinkRef: "lake", Namespace: "ns", CDC: true}
			pendingCut(st.ID, &openSummary{group: g, segments: 1, parts: 1}, []groupParts{{group: cdc, parts: 1}}, []int{0})
		}},
		{"summary-of-an-empty-open-job", "an open job summarized holds a piece: lake/", func() {
			(&openJob{group: g}).summary()
		}},
		{"average-of-negative", "a moving average of a duration or rate takes samples ≥ 0: -1 into 3", func() { ema(3, -1) }},
		{"average-of-nan", "takes samples ≥ 0: NaN into 0", func() { ema(0, math.NaN()) }},
		{"latency-negative", "a latency observed is not negative: -1ms", func() { (&Histogram{}).observe(-time.Millisecond) }},
		{"backoff-before-the-first-try", "a backoff after try -1: tries count from 0", func() { bare().backoff(-1) }},
		{"body-finished-twice", "a body made ahead finishes once: finished with <nil>, again with refused", func() {
			a := &bodyAhead{}
			a.finish(nil)
			a.finish(errors.New("refused"))
		}},
		{"merged-not-part-for-part", "merged parts are released against their originals, part for part: 1 merged, 2 originals", func() {
			releaseMerged(make([]segment.Part, 2), make([]segment.Part, 1))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantPanic(t, c.want, c.f) })
	}
}

// TestInvariantStageReplay: a replayed unit that would take an offset key
// from a submitted unit fails closed (replay runs before ingest opens).
func TestInvariantStageReplay(t *testing.T) {
	runBreaks(t, []breakCase{
		{"replay-over-a-submitted-unit", `a replayed unit takes its offset keys from replayed units only: "src/1" held by a submitted unit`, func(t *testing.T, e *Engine) {
			submitted := &unit{offsets: segment.Offsets{{Key: "src/1", Value: 4}}, dones: []func(error){func(error) {}}}
			e.offsetPending = map[string]*unit{"src/1": submitted}
			e.holdReplayed(&unit{replayed: true, offsets: segment.Offsets{{Key: "src/1", Value: 5}}})
			if e.offsetPending["src/1"] != submitted {
				t.Error("the replayed unit took the key")
			}
		}},
	})
}
