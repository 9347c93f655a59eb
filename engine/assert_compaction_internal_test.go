package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// The pre- and postconditions of compaction (register, the lanes and
// their jobs, a job's content), of the cut decision's engine side and its
// planner, of the coalescing writer's queue, and of the engine's
// answering, broken on purpose on a bare engine (STYLE.md: every
// assertion is broken in a test).

var laneGroup = segment.Group{SinkRef: "lake", Namespace: "ns"}

// laneJob is a job of laneGroup cut in st, holding one PART of it, in
// state s.
func laneJob(id string, st *segState, s jobState) *job {
	return &job{id: id, group: laneGroup, cut: st, state: s, pieces: []piece{{seg: st, ordinals: []segment.SliceOrdinal{0}}}}
}

// withLane gives e one lane of laneGroup holding jobs, in the lane
// order too.
func withLane(e *Engine, jobs ...*job) *lane {
	ln := &lane{key: laneOf(laneGroup), jobs: jobs}
	e.lanes = map[laneKey]*lane{ln.key: ln}
	e.laneOrder = []*lane{ln}
	return ln
}

// noSinks is a Sinks of no sink at all: what compact needs to look.
type noSinks struct{}

func (noSinks) Sink(string) (Sink, bool) { return nil, false }

// fixedRand is a Rand that always says n.
type fixedRand uint64

func (r fixedRand) Uint64() uint64 { return uint64(r) }

func TestInvariantCompactionSteps(t *testing.T) {
	cases := []breakCase{
		{"register-bitmap-length", "a segment registers once, fresh, with a bit per PART: segment 000000000001-000000000001, 3 bits (3 durable), 2 parts, 0 jobs", func(t *testing.T, e *Engine) {
			e.register(stepSeg(1, 2, 3))
			if len(e.segs) != 0 {
				t.Error("a refused segment was owned")
			}
		}},
		{"register-twice", "a segment registers once, fresh, with a bit per PART: segment 000000000001-000000000001, 1 bits (1 durable), 1 parts, 1 jobs, 1 groups open", func(t *testing.T, e *Engine) {
			st := stepSeg(1, 1, 1)
			st.jobs, st.open = []*job{laneJob("j", st, jobPending)}, 1
			e.register(st)
		}},
		{"legacy-job-of-spanning-segment", "a legacy job is one piece of a segment committed before spanning jobs: segment 000000000001-000000000001 (spanning true)", func(t *testing.T, e *Engine) {
			st := stepSeg(1, 1, 1)
			st.Index.Spanning = true
			e.legacyJob(st, laneGroup, piece{seg: st, ordinals: []segment.SliceOrdinal{0}})
		}},
		{"settle-lost-bytes-negative", "an open job's bytes are its pieces': -2 bytes left in 0 pieces", func(t *testing.T, e *Engine) {
			st := stepSeg(1, 1, 1)
			st.bitmapLost, st.open = true, 1
			o := &openJob{group: laneGroup, pieces: []piece{{seg: st, ordinals: []segment.SliceOrdinal{0}, bytes: 5}}, bytes: 3}
			e.settleLost(o, SnapshotID{1, 2})
		}},
		{"join-open-out-of-order", "an open job's pieces ascend by segment, each of ≥ 1 PART: piece of 000000000001-000000000001 (1 PARTs, 0 bytes) joins lake/ns", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.joinOpen(laneGroup, piece{seg: stepSeg(2, 1, 1), ordinals: []segment.SliceOrdinal{0}})
			e.joinOpen(laneGroup, piece{seg: stepSeg(1, 1, 1), ordinals: []segment.SliceOrdinal{0}})
		}},
		{"join-open-empty-piece", "an open job's pieces ascend by segment, each of ≥ 1 PART: piece of 000000000001-000000000001 (0 PARTs", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.joinOpen(laneGroup, piece{seg: stepSeg(1, 1, 1)})
		}},
		{"join-open-more-groups-than-parts", "0 ≤ open groups ≤ parts of a segment: segment 000000000001-000000000001, 1 open, 0 parts", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.joinOpen(laneGroup, piece{seg: stepSeg(1, 0, 0), ordinals: []segment.SliceOrdinal{0}})
		}},
		{"lane-not-in-order", "every lane is in the lane order once: 2 lanes, 1 in order, after lane lake/ns", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{{"other", "ns"}: {}}
			e.lane(laneOf(laneGroup))
		}},
		{"job-pieces-out-of-order", "a job's pieces are one per segment, ascending, each of ≥ 1 PART: job j (cut in segment 000000000001-000000000002, lake/ns#0000000000000000) piece 1 of 2 in 000000000001-000000000001 after 000000000001-000000000002", func(t *testing.T, e *Engine) {
			a, b := stepSeg(1, 1, 1), stepSeg(2, 1, 1)
			j := laneJob("j", b, jobPending)
			j.pieces = append(j.pieces, piece{seg: a, ordinals: []segment.SliceOrdinal{0}})
			e.checkPieces(j)
		}},
		{"job-pieces-same-segment", "piece 1 of 2 in 000000000001-000000000001 after 000000000001-000000000001", func(t *testing.T, e *Engine) {
			a := stepSeg(1, 2, 2)
			j := laneJob("j", a, jobPending)
			j.pieces = append(j.pieces, piece{seg: a, ordinals: []segment.SliceOrdinal{1}})
			e.checkPieces(j)
		}},
		{"add-running-job", "a job joins its lane pending with ≥ 1 piece, or its segments applied: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000) in state 1, 1 pieces", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.addJob(laneJob("j", stepSeg(1, 1, 1), jobRunning))
			if len(e.lanes) != 0 {
				t.Error("a refused job joined a lane")
			}
		}},
		{"add-pending-job-of-no-piece", "in state 0, 0 pieces", func(t *testing.T, e *Engine) {
			e.addJob(&job{id: "j", group: laneGroup, cut: stepSeg(1, 1, 1)})
		}},
		{"applied-twice", "a job is applied once, from pending (found applied at its cut) or running: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000) in state 2", func(t *testing.T, e *Engine) {
			e.setApplied(laneJob("j", stepSeg(1, 1, 1), jobApplied))
		}},
		{"start-not-lane-head", "a job starts as its lane's head: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000), lane known true", func(t *testing.T, e *Engine) {
			e.p.Sinks, e.state, e.cfg.CompactionConcurrency = noSinks{}, stateReady, 1
			withLane(e, laneJob("j", stepSeg(1, 1, 1), jobPending))
			e.lanes[laneOf(laneGroup)] = &lane{key: laneOf(laneGroup)} // another lane under its key
			e.compact()
			if e.running != 0 {
				t.Errorf("running %d: the job started", e.running)
			}
		}},
		{"unbounded-job-applied", "a job of PARTs no live cut bounded is never applied: job j (cut in segment 000000000001-000000000002) holds PARTs of 000000000001-000000000001", func(t *testing.T, e *Engine) {
			e.running, e.cfg.CompactionConcurrency = 1, 1
			j := laneJob("j", stepSeg(2, 1, 1), jobRunning)
			j.unknown = stepSeg(1, 1, 1)
			withLane(e, j)
			e.jobDone(j, true)
			if j.state != jobRunning {
				t.Errorf("state %d: the job was recorded applied", j.state)
			}
		}},
		{"next-head-running", "only a lane's head runs: after job j, lane lake/ns's next head k (cut in segment 000000000001-000000000001) is in state 1", func(t *testing.T, e *Engine) {
			st := stepSeg(1, 1, 1)
			j := laneJob("j", st, jobRunning)
			withLane(e, j, laneJob("k", st, jobRunning))
			e.popLane(j)
		}},
		{"retried-not-head", "a failed job stays its lane's head: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000) retried, lane of 1 jobs", func(t *testing.T, e *Engine) {
			e.p.Rand, e.cfg.RetryBase, e.cfg.RetryMax = fixedRand(0), time.Second, time.Minute
			e.running, e.cfg.CompactionConcurrency = 1, 1
			st := stepSeg(1, 1, 1)
			j := laneJob("j", st, jobRunning)
			withLane(e, laneJob("k", st, jobPending))
			e.retryJob(j)
		}},
		{"refused-not-head", "a failed job stays its lane's head: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000) refused, lane of 0 jobs", func(t *testing.T, e *Engine) {
			e.running, e.cfg.CompactionConcurrency = 1, 1
			withLane(e)
			e.refuseJob(laneJob("j", stepSeg(1, 1, 1), jobRunning), errors.New("unreadable"))
		}},
		{"content-of-no-piece", "a job's content fingerprints ≥ 1 piece: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000) has none", func(t *testing.T, e *Engine) {
			e.jobContent(&job{id: "j", group: laneGroup, cut: stepSeg(1, 1, 1)})
		}},
		{"content-ordinals-descending", "a job's content lists each piece's ordinals ascending: job j, segment 000000000001-000000000001, ordinal 0 at 1 after 1", func(t *testing.T, e *Engine) {
			st := stepSeg(1, 2, 2)
			j := laneJob("j", st, jobPending)
			j.pieces[0].ordinals = []segment.SliceOrdinal{1, 0}
			e.jobContent(j)
		}},
	}
	runBreaks(t, cases)
}

// TestFailedJobOfAGoneSegment: a job that a segment reclaimed elsewhere
// took out of its lane may fail after: it is no lane's head, and that
// holds (checkStillHead).
func TestFailedJobOfAGoneSegment(t *testing.T) {
	e := bare()
	e.running, e.cfg.CompactionConcurrency = 1, 1
	st := stepSeg(1, 1, 1)
	st.gone = true
	withLane(e)
	e.refuseJob(laneJob("j", st, jobRunning), errors.New("unreadable"))
	if e.err != nil || e.running != 0 {
		t.Fatalf("err %v, running %d; a gone job ends quietly", e.err, e.running)
	}
}

func TestInvariantCutSteps(t *testing.T) {
	cases := []breakCase{
		{"cuts-before-index", "cuts are decided once, after the index is encoded: snapshot 000000000001-000000000002, index false, 0 cuts already", func(t *testing.T, e *Engine) {
			e.active = &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			e.decideCuts(e.active)
		}},
		{"cuts-decided-twice", "index true, 1 cuts already", func(t *testing.T, e *Engine) {
			e.active = &snapshot{id: SnapshotID{1, 2}, content: newBatchSet(), index: &segment.Index{Cuts: make([]segment.Cut, 1)}}
			e.decideCuts(e.active)
		}},
		{"open-job-from-the-future", "an open job waits from no later than now: lane lake/ns, lake/ns#0000000000000000 since 1h0m0s, now 1s", func(t *testing.T, e *Engine) {
			ln := withLane(e)
			ln.open = []*openJob{{group: laneGroup, pieces: []piece{{seg: stepSeg(1, 1, 1), ordinals: []segment.SliceOrdinal{0}}}, since: time.Hour}}
			e.nextInterval()
		}},
		{"cut-of-unknown-reason", "a cut has a known reason: reason(99)", func(t *testing.T, e *Engine) {
			e.markCut(segment.CutReason(99))
		}},
	}
	runBreaks(t, cases)
}

// TestPlannerStepChecks breaks the planner's checks that are not its
// input's or result's (planner_test.go): a sink's limits, and a segment
// that holds a group twice.
func TestPlannerStepChecks(t *testing.T) {
	t.Run("negative-limits", func(t *testing.T) {
		var c capture
		p := cutPlanner{limits: func(string) LaneLimits { return LaneLimits{FileBytes: -1, FlushInterval: time.Second} }, inv: c.hook()}
		if r := p.reason(cutInput{}, laneOf(laneGroup), sizedCut{}, nil); r != 0 {
			t.Errorf("reason %s under broken limits", r)
		}
		c.want(t, "cut planner: a sink's lane limits ≥ 0: lake, file bytes -1, flush interval 1s")
	})
	t.Run("group-twice", func(t *testing.T) {
		var c capture
		p := cutPlanner{limits: func(string) LaneLimits { return LaneLimits{} }, inv: c.hook()}
		open := &openSummary{group: laneGroup, first: SnapshotID{1, 1}, segments: 1, parts: 1}
		groups := []groupParts{{group: laneGroup, parts: 1}, {group: laneGroup, parts: 1}}
		if cuts, ok := p.shapeCuts(SnapshotID{1, 2}, open, groups, []int{0, 1}); ok || cuts != nil {
			t.Errorf("shapeCuts gave %v, %t", cuts, ok)
		}
		c.want(t, "cut planner: a segment holds each group once: lake/ns#0000000000000000 2 times in 000000000001-000000000002")
	})
}

func TestInvariantWriterQueue(t *testing.T) {
	queued := func(seq uint64) *snapshot {
		return &snapshot{id: SnapshotID{1, seq}, content: newBatchSet(), replayed: true}
	}
	cases := []breakCase{
		{"flush-armed-for-empty-live", "a flush is armed only once a unit joined live: live empty, 0 bytes, flush due false", func(t *testing.T, e *Engine) {
			e.afterAppend()
		}},
		{"seal-unclaimed", "a snapshot is sealed under a claimed epoch, with the log's identity, into a queue with room: epoch 0, next seq 0, origin zero true, 0 queued, capacity 0", func(t *testing.T, e *Engine) {
			e.seal()
		}},
		{"seal-queue-full", "epoch 1, next seq 1, origin zero false, 1 queued, capacity 1", func(t *testing.T, e *Engine) {
			e.epoch, e.nextSeq, e.origin = 1, 1, segment.Origin{WAL: segment.WALID{1}, Pipeline: "p"}
			e.cfg.QueueCapacity, e.queue = 1, []*snapshot{queued(1)}
			e.seal()
			if len(e.queue) != 1 {
				t.Errorf("%d queued: the refused seal queued a snapshot", len(e.queue))
			}
		}},
		{"replay-out-of-order", "snapshots in id order: queue[1] is 000000000001-000000000003, after 000000000001-000000000005", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity, e.queue, e.replayed = 4, []*snapshot{queued(5)}, 1
			e.queueReplayed(queued(3))
		}},
		{"replay-miscounted", "0 ≤ replayed snapshots ≤ those queued or active: 3 replayed, 1 queued, active false", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity, e.replayed = 4, 2
			e.queueReplayed(queued(1))
		}},
		{"pump-miscounted", "0 ≤ replayed snapshots ≤ those queued or active: 2 replayed, 0 queued, active true", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity, e.queue, e.replayed = 4, []*snapshot{queued(1)}, 2
			e.pump() // a persist would need ports: the check stops it
		}},
		{"pump-persisted-before", "a snapshot leaves the queue for the writer once, never persisted before: 000000000001-000000000001 in stage marker", func(t *testing.T, e *Engine) {
			s := queued(1)
			s.stage = persistMarker
			e.cfg.QueueCapacity, e.queue = 4, []*snapshot{s}
			e.pump()
			if e.active != nil {
				t.Error("the refused snapshot became active")
			}
		}},
	}
	runBreaks(t, cases)
}

func TestInvariantClose(t *testing.T) {
	cases := []breakCase{
		{"close-waiting-while-ready", "a close waits, and its grace runs, only while closing: ready with a close waiting true, grace over false", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.state, e.closeDone = stateReady, func(error) {}
			e.Close(func(error) {})
			if len(e.answers) != 2 {
				t.Errorf("%d answers due; want both closes answered", len(e.answers))
			}
		}},
		{"close-grace-over-while-ready", "ready with a close waiting false, grace over true", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.state, e.closeGraceOver = stateReady, true
			e.Close(func(error) {})
		}},
	}
	runBreaks(t, cases)
}

// TestAnswersNeedTheirCallbacks: an answer, a close or a failure without
// what it is about is a caller's contract broken, and panics.
func TestAnswersNeedTheirCallbacks(t *testing.T) {
	for _, c := range []struct {
		name, want string
		call       func(e *Engine)
	}{
		{"answer", "an answer (boom) without its callback", func(e *Engine) { e.answer(nil, errors.New("boom")) }},
		{"close", "Close without its answer", func(e *Engine) { e.Close(nil) }},
		{"fail-closed", "failing closed without a reason", func(e *Engine) { e.failClosed(nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, c.want) {
					t.Fatalf("recovered %q; want the panic %q", msg, c.want)
				}
			}()
			c.call(bare())
		})
	}
}

// TestInvariantCloseAnswered: a close is answered once nothing is held;
// an idle engine that still counts bytes held answers it with the
// broken invariant instead.
func TestInvariantCloseAnswered(t *testing.T) {
	e := bare()
	e.p.Timers = &heldTimers{}
	e.state, e.closeGraceOver, e.held = stateClosing, true, 7
	var got error
	e.closeDone = func(err error) { got = err }
	e.checkClosed()
	wantFailed(t, e, "a close is answered once nothing is held: idle, held 7 bytes, 0 replayed snapshots counted")
	if len(e.answers) != 1 {
		t.Fatalf("%d answers due; want the close's", len(e.answers))
	}
	e.answers[0].done(e.answers[0].err)
	if !errors.Is(got, ErrInvariant) {
		t.Fatalf("the close got %v; want the broken invariant", got)
	}
}
