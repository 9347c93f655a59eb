package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// The pre- and postconditions of the writer, admission and the durable
// log's seam added for the assertion density (engine.go's neighbours:
// ingest, accumulator, flush, persist, durable, stats, config, retry),
// each broken on purpose.

// aheadlessLog is the S3 log under the disk log's writer policy: no body
// is made ahead of its persist.
type aheadlessLog struct{ s3Log }

func (aheadlessLog) ahead() bool { return false }

// fixedDelayLog sets a fixed seal delay, as the disk log does.
type fixedDelayLog struct {
	s3Log
	d time.Duration
}

func (l fixedDelayLog) sealDelay() (time.Duration, bool) { return l.d, true }

// refusingLog refuses every unit with err.
type refusingLog struct {
	s3Log
	err error
}

func (l refusingLog) refuse(Unit) error { return l.err }

// claimed gives a bare engine a claimed epoch and the log's identity, as
// recovery leaves them.
func claimed(e *Engine) {
	e.epoch, e.nextSeq = 1, 1
	e.origin = segment.Origin{WAL: segment.WALID{1}, Pipeline: "p"}
}

// committing makes s the active snapshot, fenced and ready to commit.
func committing(e *Engine, s *snapshot) {
	e.p.Timers = &heldTimers{}
	e.epoch, e.active = 1, s
	s.stage = persistFencing
	if s.index == nil {
		s.index = &segment.Index{}
	}
}

// TestInvariantMoreWriter: the writer's steps — the flush delay and
// timer, the seal, the queue, the body, the marker, the commit, the
// backoff — and the S3 log's step before a persist.
func TestInvariantMoreWriter(t *testing.T) {
	cases := []breakCase{
		{"flush-delay-not-positive", "a flush delay is positive: -1s, max delay 1m0s, the log's fixed delay true", func(t *testing.T, e *Engine) {
			e.cfg.MaxDelay, e.dlog = time.Minute, fixedDelayLog{s3Log{e}, -time.Second}
			e.flushDelay()
		}},
		{"flush-timer-for-empty-live", "the flush timer runs for a live accumulator holding units: live empty, flush due false", func(t *testing.T, e *Engine) {
			e.flushCancel = func() {}
			e.onFlushTimer()
		}},
		{"live-dated-after-seal", "live is dated no later than its seal: live since 1h0m0s, sealed at 1s, 0 units", func(t *testing.T, e *Engine) {
			claimed(e)
			e.cfg.QueueCapacity, e.liveSince = 1, time.Hour
			e.seal()
			if len(e.queue) != 0 || e.nextSeq != 1 {
				t.Errorf("%d queued, next seq %d: the refused seal sealed", len(e.queue), e.nextSeq)
			}
		}},
		{"queued-snapshot-persisting", "a queued snapshot has not started persisting: queue[0] 000000000001-000000000001 in stage marker", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity = 2
			e.queue = []*snapshot{{id: SnapshotID{1, 1}, stage: persistMarker, content: newBatchSet()}}
			e.checkQueue()
		}},
		{"body-ahead-under-disk-policy", "a body is made ahead only where its log allows: snapshot 000000000001-000000000003 in stage queued", func(t *testing.T, e *Engine) {
			e.dlog = aheadlessLog{s3Log{e}}
			s := &snapshot{id: SnapshotID{1, 3}, content: newBatchSet()}
			e.prepare(s)
			if s.ahead != nil {
				t.Error("the refused body was started")
			}
		}},
		{"body-of-released-units", "a body holds its units' rows: snapshot 000000000001-000000000003 has 1 units (7 bytes) and no parts", func(t *testing.T, e *Engine) {
			s := &snapshot{id: SnapshotID{1, 3}, stage: persistBody, content: &batchSet{units: []*unit{{bytes: 7}}, bytes: 7}}
			e.prepare(s)
			if s.ahead != nil {
				t.Error("the refused body was started")
			}
		}},
		{"marker-of-dropped-body", "a dropped body is never committed: snapshot 000000000001-000000000002 in stage marker", func(t *testing.T, e *Engine) {
			claimed(e)
			s := &snapshot{id: SnapshotID{1, 2}, stage: persistBody, content: newBatchSet(), body: []byte("b"),
				index: &segment.Index{BodyBytes: 1}, ahead: &bodyAhead{done: true, dropped: true}}
			e.putMarkerOf(s)
			if s.marker != nil {
				t.Error("the dropped body got a marker")
			}
		}},
		{"marker-parts-not-content", "a body holds a PART per part of its snapshot: snapshot 000000000001-000000000002, 2 PARTs, 0 parts (0 units)", func(t *testing.T, e *Engine) {
			claimed(e)
			s := &snapshot{id: SnapshotID{1, 2}, stage: persistBody, content: newBatchSet(), body: []byte("b"),
				index: &segment.Index{BodyBytes: 1, Entries: make([]segment.IndexEntry, 2)}}
			e.putMarkerOf(s)
		}},
		{"marker-body-redated", "a body carries its snapshot's date: snapshot 000000000001-000000000002, body dated 5, snapshot 6", func(t *testing.T, e *Engine) {
			claimed(e)
			s := &snapshot{id: SnapshotID{1, 2}, stage: persistBody, content: newBatchSet(), body: []byte("b"), created: 6,
				index: &segment.Index{BodyBytes: 1, CreatedAtUnixMs: 5}}
			e.putMarkerOf(s)
		}},
		{"persist-time-negative", "a persist takes a time ≥ 0 (the monotonic clock never goes back): snapshot 000000000001-000000000002 started at 1h0m0s, committed at 1s", func(t *testing.T, e *Engine) {
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet(), startedAt: time.Hour}
			committing(e, s)
			e.commit(s)
			if e.stats.Commits != 0 || e.persistEMA != 0 {
				t.Errorf("%d commits, persist EMA %v: the refused commit was counted", e.stats.Commits, e.persistEMA)
			}
		}},
		{"fsync-acked-unit-waits", "a unit acked at its fsync has no submitter left at its commit: unit 4 of partition 1, 1 waiting, snapshot 000000000001-000000000002", func(t *testing.T, e *Engine) {
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			acked := false
			u := &unit{part: 1, seq: 4, seg: &wal.Segment{}, bytes: 10, dones: []func(error){func(err error) { acked = err == nil }}}
			s.content.units, s.content.bytes, e.held = []*unit{u}, 10, 10
			committing(e, s)
			e.commit(s)
			if acked || e.stats.Commits != 0 {
				t.Errorf("acked %t, %d commits: the commit went on", acked, e.stats.Commits)
			}
		}},
		{"persist-while-cooling", "nothing is sealed or persisted while the writer backs off: 0 queued (0 sealed again), active true at the backoff's end (1 failures)", func(t *testing.T, e *Engine) {
			end := failedPersist(e)
			e.active = &snapshot{id: SnapshotID{1, 3}, content: newBatchSet()} // started while cooling
			end()
			if !e.cooling {
				t.Error("the backoff ended on the broken state")
			}
		}},
		{"sealed-while-cooling", "nothing is sealed or persisted while the writer backs off: 1 queued (0 sealed again), active false at the backoff's end (1 failures)", func(t *testing.T, e *Engine) {
			end := failedPersist(e)
			e.queue = []*snapshot{{id: SnapshotID{1, 3}, content: newBatchSet()}} // sealed while cooling
			end()
			if !e.cooling {
				t.Error("the backoff ended on the broken state")
			}
		}},
		{"regroup-without-live", "a failed persist takes back its own set, the queue's and live, live last: 2 sets, live last false", func(t *testing.T, e *Engine) {
			if _, err := e.regroup([]*batchSet{newBatchSet(), newBatchSet()}); err != nil {
				e.failClosed(err)
			}
		}},
		{"s3-persists-replayed", "an S3 WAL persists fresh snapshots, of no generation: snapshot 000000000001-000000000002, replayed true, generation 0", func(t *testing.T, e *Engine) {
			e.dlog.beforePersist(&snapshot{id: SnapshotID{1, 2}, replayed: true, content: newBatchSet()}, func() { t.Error("persisted") })
		}},
		{"s3-persists-a-generation", "an S3 WAL persists fresh snapshots, of no generation: snapshot 000000000001-000000000002, replayed false, generation 3", func(t *testing.T, e *Engine) {
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			s.content.gen = 3
			e.dlog.beforePersist(s, func() { t.Error("persisted") })
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantMoreAdmission: admission's keys and its whole-state
// check, a unit joining live, the log's refusals, the acked count and
// the accumulator's release.
func TestInvariantMoreAdmission(t *testing.T) {
	key := segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Partition: "p"}
	cases := []breakCase{
		{"log-refuses-otherwise", "a log refuses a unit only as backpressure or for a halted partition: disk on fire", func(t *testing.T, e *Engine) {
			refused := errors.New("disk on fire")
			e.dlog = refusingLog{s3Log{e}, refused}
			if err := e.room(Unit{}, 0); err != refused {
				t.Errorf("room answered %v; want the log's refusal", err)
			}
		}},
		{"join-answered-offsets-unit", "offsetPending maps a key to the unanswered unit holding it: unit at [{src/1 1}], 0 waiting, replayed false", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			offsets := segment.Offsets{{Key: "src/1", Value: 1}}
			pending := &unit{offsets: offsets}
			e.offsetPending = map[string]*unit{"src/1": pending}
			e.joinDuplicate(Unit{Offsets: offsets}, func(error) {})
			if len(e.answers) != 1 || len(pending.dones) != 0 {
				t.Errorf("%d answers due, %d joined: the retry must be answered, not joined", len(e.answers), len(pending.dones))
			}
		}},
		{"admission-idem-key-of-answered-unit", `a pending idempotency key's unit is unanswered: 1 are answered, the least "a"`, func(t *testing.T, e *Engine) {
			waiting := []func(error){func(error) {}}
			e.idemPending = map[string]*unit{"b": {idem: "b", dones: waiting}, "a": {idem: "a"}, "r": {idem: "r", replayed: true}}
			e.checkAdmission()
		}},
		{"admission-offset-key-of-answered-unit", `a pending offset key's unit is unanswered: 1 are answered, the least "src/1"`, func(t *testing.T, e *Engine) {
			offsets := segment.Offsets{{Key: "src/1", Value: 1}}
			e.offsetPending = map[string]*unit{"src/1": {offsets: offsets}}
			e.checkAdmission()
		}},
		{"release-idem-key-not-held", `a submitted unit holds its idempotency key until its answer: "k" released, held by another unit false`, func(t *testing.T, e *Engine) {
			e.releaseKeys(&unit{idem: "k"})
		}},
		{"release-offset-key-of-another", `a submitted unit holds its offset keys until its answer: "src/1" of [{src/1 2}] released, held by another unit true`, func(t *testing.T, e *Engine) {
			other := &unit{offsets: segment.Offsets{{Key: "src/1", Value: 3}}}
			e.offsetPending = map[string]*unit{"src/1": other}
			e.releaseKeys(&unit{offsets: segment.Offsets{{Key: "src/1", Value: 2}}})
			if e.offsetPending["src/1"] != other {
				t.Error("the other unit's key was released")
			}
		}},
		{"join-live-rows-miscounted", "a unit joins live with the rows it is counted for: unit 0 of partition 0 counts 2 rows, brings 3", func(t *testing.T, e *Engine) {
			schema, b := int64Batch(t, 3)
			defer b.Release()
			e.joinLive(&unit{bytes: 10, rows: 2}, Unit{Key: key, Schema: schema, Batches: []arrow.RecordBatch{b}})
		}},
		{"join-live-past-offsets-limit", fmt.Sprintf("live fits a segment (roomFor): 1 parts, limit %d; %d offsets, limit %d; part lake/ns/p",
			segment.PartsMax, segment.OffsetsEntriesMax+1, segment.OffsetsEntriesMax), func(t *testing.T, e *Engine) {
			e.live.offsets = make(segment.Offsets, segment.OffsetsEntriesMax)
			for i := range e.live.offsets {
				e.live.offsets[i] = segment.Offset{Key: fmt.Sprintf("k%05d", i), Value: 1}
			}
			e.joinLive(&unit{bytes: 10}, Unit{Key: key, Offsets: segment.Offsets{{Key: "z", Value: 1}}})
		}},
		{"join-live-twice", "a unit joins a set once: unit 7 of partition 2 (10 bytes) is its last already, of 1", func(t *testing.T, e *Engine) {
			u := &unit{part: 2, seq: 7, bytes: 10}
			e.joinLive(u, Unit{Key: key})
			if e.err != nil {
				t.Fatalf("the first join failed: %v", e.err)
			}
			e.joinLive(u, Unit{Key: key})
			if len(e.live.units) != 1 || e.live.bytes != 10 {
				t.Errorf("live holds %d units, %d bytes: the second join was taken", len(e.live.units), e.live.bytes)
			}
		}},
		{"acked-unit-answered-already", "an acked unit has submitters to ack: unit 3 of partition 0, 5 bytes, replayed false", func(t *testing.T, e *Engine) {
			e.countAcked(&unit{seq: 3, bytes: 5, rows: 1})
			if e.stats.UnitsAcked != 0 {
				t.Errorf("%d units counted acked", e.stats.UnitsAcked)
			}
		}},
		{"set-released-twice", "a set is released once: 1 units, 10 bytes, their parts released already", func(t *testing.T, e *Engine) {
			s := newBatchSet()
			if err := s.add(&unit{bytes: 10}, Unit{Key: key}); err != nil {
				t.Fatal(err)
			}
			e.releaseOffLoop(s)
			if e.err != nil {
				t.Fatalf("the first release failed: %v", e.err)
			}
			e.releaseOffLoop(s)
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantMoreHolds: the checks that break above hold where their
// rule makes room — a replayed unit keeps its keys pending unanswered,
// and its released key may be another unit's; a log's backpressure and
// halted partitions are refusals; a set is released once.
func TestInvariantMoreHolds(t *testing.T) {
	e := bare()
	replayed := &unit{idem: "k", offsets: segment.Offsets{{Key: "src/1", Value: 1}}, replayed: true}
	e.idemPending = map[string]*unit{"k": replayed}
	e.offsetPending = map[string]*unit{"src/1": replayed}
	if !e.checkAdmission() {
		t.Fatalf("a replayed unit's pending keys failed the check: %v", e.err)
	}
	newer := &unit{offsets: segment.Offsets{{Key: "src/1", Value: 2}}, replayed: true}
	e.offsetPending["src/1"] = newer
	e.releaseKeys(replayed)
	if e.err != nil || e.offsetPending["src/1"] != newer || len(e.idemPending) != 0 {
		t.Fatalf("err %v, %d idempotency keys pending: a replayed unit releases what it still holds", e.err, len(e.idemPending))
	}
	for _, refusal := range []error{ErrResourceExhausted, fmt.Errorf("%w: partition 0", ErrPartitionHalted)} {
		e.dlog = refusingLog{s3Log{e}, refusal}
		if err := e.room(Unit{}, 0); err != refusal || e.err != nil {
			t.Fatalf("room answered %v, err %v; want the refusal %v", err, e.err, refusal)
		}
	}
	e.dlog = s3Log{e}
	s := newBatchSet()
	if err := s.add(&unit{bytes: 10}, Unit{}); err != nil {
		t.Fatal(err)
	}
	e.releaseOffLoop(s)
	if e.err != nil || s.parts != nil {
		t.Fatalf("err %v, %d parts: a committed set is released", e.err, len(s.parts))
	}
}

// TestInvariantMoreRequires: callers' contracts of helpers, which panic
// with the values: a close's grace, a retry's functions, a unit added
// to a set twice (an error of the set's own).
func TestInvariantMoreRequires(t *testing.T) {
	wantPanic(t, "a close's grace is not negative (Config.StopGrace validated): -1s", func() {
		Config{StopGrace: -time.Second}.stopGrace()
	})
	wantPanic(t, "a retry has its stop and done: stop false, done true", func() {
		bare().retryStop(func(func(error)) {}, nil, func(error, bool) {})
	})
	s, u := newBatchSet(), &unit{seq: 1, bytes: 4}
	if err := s.add(u, Unit{}); err != nil {
		t.Fatal(err)
	}
	err := s.add(u, Unit{})
	if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "a unit joins a set once: unit 1 of partition 0 (4 bytes) is its last already, of 1") {
		t.Fatalf("the second add: %v; want the invariant broken", err)
	}
	if len(s.units) != 1 || s.bytes != 4 {
		t.Fatalf("%d units, %d bytes: the refused add changed the set", len(s.units), s.bytes)
	}
}
