package engine

import (
	"errors"
	"testing"

	"github.com/skipprd/skipprd/engine/wal"
)

// TestInvariantDurableLog breaks on purpose the checks of the durable
// log's seam (durable.go) and of the disk WAL's policy over its log
// (wal_disk*.go) that a test reaches without ports: each fails the engine
// closed with its invariant named.
func TestInvariantDurableLog(t *testing.T) {
	durableUnit := func(l *diskLog, part uint32, seq uint64) *unit {
		return &unit{part: part, seq: seq, seg: &wal.Segment{Path: "wal/partition-0/1"}, bytes: 10}
	}
	cases := []breakCase{
		// durable.go: the seam's contract, checked by the engine where it
		// calls either log.
		{"accept-twice", "a unit is accepted once, fresh from append: 1 answers due, partition 0, sequence 7", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			u := &unit{dones: []func(error){func(error) {}}, seq: 7, seg: &wal.Segment{}}
			if e.checkAccepted(u) {
				t.Error("passed")
			}
			if len(e.answers) != 1 || !errors.Is(e.answers[0].err, ErrClosed) || len(e.live.units) != 0 {
				t.Errorf("%d answers, %d units live: the refused unit is answered ErrClosed and not held", len(e.answers), len(e.live.units))
			}
		}},
		{"persist-not-the-active", "a snapshot persists as the active one, straight from the queue: snapshot 000000000001-000000000002 in stage queued", func(t *testing.T, e *Engine) {
			if e.checkPersisting(&snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}) {
				t.Error("passed")
			}
		}},
		{"committed-before-commit", "a generation is recorded flushed only once its snapshot committed: snapshot 000000000001-000000000002 in stage fencing", func(t *testing.T, e *Engine) {
			if e.checkCommitted(&snapshot{id: SnapshotID{1, 2}, stage: persistFencing}) {
				t.Error("passed")
			}
		}},

		// wal_disk.go: accept, durability, joins, generations.
		{"accept-without-stream", "a unit the disk log accepts is canonical, with its Arrow stream", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			l := testDiskLog(e, 1)
			l.accept(&unit{dones: []func(error){func(error) {}}}, Unit{})
			if len(e.answers) != 1 || l.inFlight != 0 || e.held != 0 {
				t.Errorf("%d answers, %d in flight, %d held: the refused unit is answered and not held", len(e.answers), l.inFlight, e.held)
			}
		}},
		{"durable-twice", "a unit is made durable once, in a segment of its partition: partition 0 of 1, sequence 4, made durable again as 5", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.unitDurable(&wal.Write[logJoin]{Unit: logJoin{u: durableUnit(l, 0, 4)}}, 5, &wal.Segment{})
		}},
		{"durable-without-segment", "a unit is made durable once, in a segment of its partition: partition 0 of 1, sequence 0, made durable again as 5, segment false", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.unitDurable(&wal.Write[logJoin]{Unit: logJoin{u: &unit{}}}, 5, nil)
		}},
		{"durable-with-a-gap", "a partition's units become durable in sequence, without gaps: partition 1 made 9 durable after 7", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 2)
			l.durableSeq[1] = 7
			u := &unit{part: 1}
			l.unitDurable(&wal.Write[logJoin]{Unit: logJoin{u: u}}, 9, &wal.Segment{})
			if u.seq != 0 {
				t.Errorf("the unit got sequence %d", u.seq)
			}
		}},
		{"join-generation-zero", "live's generation is one the log handed out: generation 0, next 2", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.join(durableUnit(l, 0, 1), Unit{})
		}},
		{"join-generation-not-handed-out", "live's generation is one the log handed out: generation 5, next 2", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen = 5
			l.drain() // nothing in the backlog: no check
			if e.state == stateFailed {
				t.Fatalf("an empty drain failed: %v", e.err)
			}
			l.backlog = []logJoin{{u: durableUnit(l, 0, 1)}}
			l.drain()
		}},
		{"flight-queued-negative", "units on their way into live add up: 0 in flight, 1 in the backlog holding 10 bytes, -1 queued", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.backlog, l.backlogBytes = []logJoin{{u: durableUnit(l, 0, 1)}}, 10
			l.checkFlight(false)
		}},
		{"flight-bytes-without-units", "units on their way into live add up: 1 in flight, 0 in the backlog holding 0 bytes, 1 queued holding -3 bytes", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.inFlight, l.queuedBytes = 1, -3
			l.checkFlight(false)
		}},
		{"backlog-bytes-not-its-units", "backlog bytes = Σ its units' bytes: 7 counted, 1 units hold 10", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen = 1
			l.inFlight, l.backlog, l.backlogBytes = 1, []logJoin{{u: durableUnit(l, 0, 1)}}, 7
			l.drain() // LiveSegmentsMax 0: nothing fits, the backlog stays
		}},
		{"unknown-after-durable", "a unit of a failed batch was never made durable: partition 0, sequence 3", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.inFlight, l.queuedBytes = 1, 10
			logHooks{l}.Unknown(&wal.Write[logJoin]{Unit: logJoin{u: durableUnit(l, 0, 3)}}, errors.New("fsync"))
			if l.inFlight != 1 {
				t.Errorf("%d in flight: the refused answer counted the unit out", l.inFlight)
			}
		}},
		{"sealed-live-not-new", "a generation starts with a new, empty live accumulator: live holds 1 units, generation 3, next 4", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.nextGen = 4
			e.live.gen, e.live.units = 3, []*unit{{}}
			l.sealed()
			if l.nextGen != 4 {
				t.Errorf("next generation %d: a generation was handed out", l.nextGen)
			}
		}},
		{"merged-generation-zero", "a failed generation merges into live's, another one: generation 0 into 3", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.merged([]*batchSet{{gen: 2}, {gen: 0}}, &batchSet{gen: 3})
		}},
		{"merged-into-itself", "a failed generation merges into live's, another one: generation 3 into 3", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.merged([]*batchSet{{gen: 3}}, &batchSet{gen: 3})
		}},
		{"seal-of-generation-zero", "a sealed generation is one the log handed out (≥ 1): snapshot 000000000001-000000000002, generation 0", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			s.content.units = []*unit{durableUnit(l, 0, 1)}
			e.active = s
			l.beforePersist(s, func() {})
		}},
		{"seal-of-a-unit-not-durable", "a sealed generation holds only durable units (sequence ≥ 1): snapshot 000000000001-000000000002, partition 0, range 0-1", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			s.content.gen = 1
			s.content.units = []*unit{{}, durableUnit(l, 0, 1)}
			e.active = s
			l.beforePersist(s, func() {})
		}},
		{"flushed-generation-zero", "a flushed generation is one the log handed out: snapshot 000000000001-000000000001, generation 0, next 2", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.recordFlushed(SnapshotID{1, 1}, 1, 0, nil)
		}},
		{"flushed-generation-not-handed-out", "a flushed generation is one the log handed out: snapshot 000000000001-000000000001, generation 2, next 2", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.recordFlushed(SnapshotID{1, 1}, 1, 2, nil)
		}},

		{"queue-left-twice", "queued bytes ≥ 0: -5 after unit 3 of partition 0 left the queue", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.leaveQueue(&unit{bytes: 5, seq: 3})
		}},
		{"joined-live-not-in-flight", "units in flight ≥ 0: -1 after unit 2 of partition 0 joined live", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen = 1
			seg := l.log.Partition(0).Found(1, wal.SegmentPath(0, 1), 4096)
			l.joinLive(&unit{seq: 2, seg: seg}, Unit{})
		}},

		// wal_disk_hooks.go.
		{"durable-without-unit", "a durable entry is a held unit's, with a sequence number: unit 0x0, sequence 4", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			logHooks{l}.Durable(&wal.Write[logJoin]{}, 4, &wal.Segment{})
		}},
		{"unknown-not-in-flight", "queued bytes and units in flight ≥ 0: -10 bytes, -1 units", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			logHooks{l}.Unknown(&wal.Write[logJoin]{Unit: logJoin{u: &unit{bytes: 10}}}, errors.New("fsync"))
		}},
		{"poisoned-without-error", "a poisoned segment comes with the error that poisoned it: segment true, error <nil>", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			logHooks{l}.Poisoned(&wal.Segment{Path: "wal/partition-0/1"}, nil)
		}},
		{"open-failed-past-partitions", "a failed segment creation is one of the log's partitions', with its error: partition 2 of 2", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 2)
			logHooks{l}.OpenFailed(2, errors.New("disk full"))
		}},
	}
	runBreaks(t, cases)
}

// TestCheckFlightHolds: the disk log's counts of units on their way into
// live pass their check in the states a unit moves through — queued,
// in the backlog, in live.
func TestCheckFlightHolds(t *testing.T) {
	e := bare()
	l := testDiskLog(e, 1)
	u := &unit{bytes: 10, seq: 1, seg: &wal.Segment{}}
	l.inFlight, l.queuedBytes = 1, 10 // accepted
	if !l.checkFlight(true) {
		t.Fatalf("queued: %v", e.err)
	}
	l.queuedBytes, l.backlog, l.backlogBytes = 0, []logJoin{{u: u}}, 10 // durable, in the backlog
	if !l.checkFlight(true) {
		t.Fatalf("backlog: %v", e.err)
	}
	l.inFlight, l.backlog, l.backlogBytes = 0, nil, 0 // in live
	if !l.checkFlight(true) || e.state == stateFailed {
		t.Fatalf("in live: %v", e.err)
	}
}
