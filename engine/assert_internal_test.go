package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// Checks of helpers without an engine (the cache, the offsets view, the
// writer record, the budget) and of engine paths that need no ports. The
// engine-level checks are tested in assert_test.go.

// capture is an invariantHook that keeps the first error.
type capture struct{ err error }

func (c *capture) hook() invariantHook {
	return func(err error) {
		if c.err == nil {
			c.err = err
		}
	}
}

func (c *capture) want(t *testing.T, name string) {
	t.Helper()
	if !errors.Is(c.err, ErrInvariant) || !strings.Contains(c.err.Error(), name) {
		t.Fatalf("got %v; want the invariant %q broken", c.err, name)
	}
}

// bare is an engine with no ports but a clock (failing closed raises an
// alert, stamped with the time), enough for paths that only fail closed.
func bare() *Engine {
	e := &Engine{writing: writing{live: newBatchSet()}, admission: admission{committed: newOffsetsView(), keys: newKeyStore(time.Hour)},
		compaction: compaction{cache: newBodyCache(0, nil)}}
	e.p.Clock = &stepClock{}
	e.dlog = s3Log{e}
	return e
}

// breakCase is an invariant broken on purpose on a bare engine: want is
// the part of the failure's message that names it.
type breakCase struct {
	name   string
	want   string
	break_ func(t *testing.T, e *Engine) // t: the case's own subtest
}

// runBreaks runs each case on its own bare engine and wants it failed
// closed on its invariant.
func runBreaks(t *testing.T, cases []breakCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := bare()
			c.break_(t, e)
			wantFailed(t, e, c.want)
		})
	}
}

func wantFailed(t *testing.T, e *Engine, name string) {
	t.Helper()
	if e.state != stateFailed || !errors.Is(e.Err(), ErrInvariant) || !strings.Contains(e.Err().Error(), name) {
		t.Fatalf("state %d, err %v; want failed closed on %q", e.state, e.Err(), name)
	}
}

func TestInvariantHookWithoutEngine(t *testing.T) {
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "x 1, y 2") {
			t.Fatalf("recovered %v; want a panic with ErrInvariant and the values", err)
		}
	}()
	invariantHook(nil).broken("x = y: x %d, y %d", 1, 2)
}

func TestInvariantCache(t *testing.T) {
	var marks Marks
	var got capture
	c := newBodyCache(100, &marks)
	c.inv = got.hook()
	body := func() *segment.Body { return nil }
	// Legal: a budget that shrinks under a pinned body keeps it.
	c.put(SnapshotID{1, 1}, body(), 60, true)
	c.resize(50)
	c.unpin(SnapshotID{1, 1})
	if got.err != nil || c.used != 0 {
		t.Fatalf("shrink under a pin: %v, used %d", got.err, c.used)
	}
	c.resize(100)
	c.put(SnapshotID{1, 2}, body(), 10, false)
	c.used += 3
	c.put(SnapshotID{1, 3}, body(), 10, false)
	got.want(t, "body cache used = Σ entry sizes: used 23, entries 2 hold 20")

	got = capture{}
	c = newBodyCache(100, &marks)
	c.inv = got.hook()
	c.put(SnapshotID{1, 1}, body(), 10, false)
	c.used = 5
	c.drop(SnapshotID{1, 1})
	got.want(t, "body cache bytes not negative: used -5 after dropping")

	got = capture{}
	c = newBodyCache(100, &marks)
	c.inv = got.hook()
	c.put(SnapshotID{1, 1}, body(), 60, false)
	c.budget = 50 // shrunk without resize: nothing evicted, nothing pinned
	c.unpin(SnapshotID{9, 9})
	if got.err != nil { // unpin evicts: the state is legal again
		t.Fatalf("unpin after a shrink: %v", got.err)
	}
	c.put(SnapshotID{1, 2}, body(), 40, false)
	c.put(SnapshotID{1, 3}, body(), 5, true)
	c.budget = 30 // shrunk without evicting
	c.check(false)
	got.want(t, "body cache used ≤ budget unless all pinned: used 45, budget 30, pinned 5")
}

func TestInvariantOffsetsView(t *testing.T) {
	var got capture
	v := newOffsetsView()
	v.inv = got.hook()
	v.merge(segment.Offsets{{Key: "a", Value: 1}, {Key: "b", Value: 1}})
	v.sorted()
	v.order = []string{"b", "a"}
	v.sorted()
	got.want(t, `offsets view order sorted: "b" listed before "a"`)

	got = capture{}
	v = newOffsetsView()
	v.inv = got.hook()
	v.merge(segment.Offsets{{Key: idemPrefix + "k", Value: 5}})
	got.want(t, "offsets view holds source offsets only: idem/k=5 merged")

	got = capture{}
	v = newOffsetsView()
	v.inv = got.hook()
	v.merge(segment.Offsets{{Key: "a", Value: 1}})
	v.vals["z"] = 1 // held, never listed
	v.sorted()
	got.want(t, "offsets view lists every key it holds: 1 listed, 2 held")

	got = capture{}
	v = newOffsetsView()
	v.inv = got.hook()
	v.fams = []string{"x/"} // a family without its floor
	v.merge(segment.Offsets{{Key: segment.FloorKey("a/", "m"), Value: 1}})
	got.want(t, "offsets view has one family per floor: 2 families, 1 floors")
}

func TestInvariantKeyStore(t *testing.T) {
	var got capture
	s := newKeyStore(time.Hour)
	s.inv = got.hook()
	s.bucket(5)
	s.bucket(9)
	delete(s.buckets, 9) // a number without its bucket
	s.bucket(9)
	got.want(t, "key store bucket numbers ascending, one per bucket: bucket 9 inserted at 1 of 3 numbers, 2 buckets")

	got = capture{}
	s = newKeyStore(time.Hour)
	s.inv = got.hook()
	h := segment.KeyHashOf("k")
	s.add(h, 5)
	s.buckets, s.nums = map[int64]*keyBucket{}, nil
	if s.durable(h, 5, 0) {
		t.Fatal("durable without its bucket")
	}
	got.want(t, fmt.Sprintf("key store committed keys live in their bucket: %x=5, bucket 0 missing", h))
}

func TestInvariantWriterRecord(t *testing.T) {
	for _, c := range []struct {
		name string
		w    writerRecord
		want string // "" if valid
	}{
		{"valid", writerRecord{epoch: 5, floor: 4, seals: []seal{{1, 3}, {3, 0}}}, ""},
		{"floor = epoch", writerRecord{epoch: 5, floor: 5}, ""},
		{"floor above epoch", writerRecord{epoch: 5, floor: 6}, "floor ≤ epoch: floor 6, epoch 5"},
		{"seal at the floor", writerRecord{epoch: 5, floor: 4, seals: []seal{{4, 1}}}, "seal 0 of epoch 4, floor 4"},
		{"seals out of order", writerRecord{epoch: 5, floor: 4, seals: []seal{{3, 1}, {2, 1}}}, "seal 1 of epoch 2, floor 4"},
	} {
		err := c.w.check()
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A broken invariant found during recovery fails it closed: it is not a
// transient failure to retry.
func TestInvariantStopsRecovery(t *testing.T) {
	e := bare()
	var got error
	e.recoveryFailed(0, writerRecord{epoch: 1, floor: 2}.check(), func(err error) { got = err })
	wantFailed(t, e, "writer record floor ≤ epoch")
	if !errors.Is(got, ErrInvariant) {
		t.Fatalf("Start's done got %v", got)
	}
}

func TestInvariantBudget(t *testing.T) {
	e := bare()
	e.budget = budget{pool: 100, admission: 80, cache: 30}
	e.checkBudget()
	wantFailed(t, e, "admission + cache ≤ pool: admission 80, cache 30, pool 100")
	for _, avail := range []int64{-1, 0, 1, 100 << 20, 1 << 30, 1 << 40, 1 << 62} {
		e := bare()
		e.budget = splitPool(avail)
		if e.checkBudget(); e.err != nil {
			t.Fatalf("splitPool(%d): %v", avail, e.err)
		}
	}
}

func TestInvariantCheckpointRound(t *testing.T) {
	e := bare()
	e.writeCheckpoint(1) // a retry with no round running
	wantFailed(t, e, "one checkpoint round at a time: attempt 1 starts with a round running false")
}

// The accumulator refuses content that would mix CDC and plain rows in
// a part or give a sidecar another length than the rows, changing
// nothing; a rebuilt set whose index, rows or bytes went wrong fails its
// check.
func TestInvariantAccumulator(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	batch := func(n int) arrow.RecordBatch {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for i := range n {
			b.Append(int64(i))
		}
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(schema, []arrow.Array{col}, int64(n))
	}
	key := segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Schema: segment.FingerprintOf(schema)}
	plain := Unit{Key: key, Schema: schema, Batches: []arrow.RecordBatch{batch(2)}}
	cdc := Unit{Key: key, Schema: schema, Batches: []arrow.RecordBatch{batch(2)}, Sidecar: &segment.Sidecar{Rows: make([]segment.CDCRow, 2)}}
	short := Unit{Key: key, Schema: schema, Batches: []arrow.RecordBatch{batch(3)}, Sidecar: &segment.Sidecar{Rows: make([]segment.CDCRow, 2)}}

	s := newBatchSet()
	if err := s.add(&unit{bytes: 10}, plain); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		in   Unit
		want string
	}{
		"cdc into plain":  {cdc, "a part is all CDC or all plain: part lake/ns/@-#"},
		"sidecar too few": {short, "a CDC part's sidecar has a row per row: part lake/ns/@-#"},
	} {
		err := s.add(&unit{bytes: 5}, c.in)
		if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v; want %q", name, err, c.want)
		}
		if s.bytes != 10 || len(s.units) != 1 || s.parts[0].rows != 2 {
			t.Fatalf("%s: a refused unit changed the set: bytes %d, %d units, %d rows", name, s.bytes, len(s.units), s.parts[0].rows)
		}
	}
	if err := s.check(); err != nil {
		t.Fatalf("a sound set: %v", err)
	}
	for name, c := range map[string]struct {
		breakIt func(*batchSet)
		want    string
	}{
		"index": {func(s *batchSet) { s.index[key] = 3 }, "index[p.key] is p's position: part"},
		"rows":  {func(s *batchSet) { s.parts[0].rows++ }, "a part's rows are its batches': part"},
		"bytes": {func(s *batchSet) { s.bytes++ }, "bytes is the sum of units' bytes: 11, units hold 10"},
		"extra": {func(s *batchSet) { s.index[segment.PartitionKey{SinkRef: "x"}] = 0 }, "index[p.key] is p's position: 1 parts, 2 index entries"},
		"side":  {func(s *batchSet) { s.parts[0].sidecar = make([]segment.CDCRow, 1) }, "a CDC part's sidecar has a row per row: part"},
	} {
		o := newBatchSet()
		if err := o.add(&unit{bytes: 10}, plain); err != nil {
			t.Fatal(err)
		}
		c.breakIt(o)
		if err := newBatchSet().prepend(o); err == nil && name != "index" && name != "extra" {
			// prepend rebuilds index and bytes; only what it copies can stay broken
			t.Fatalf("%s: prepend of a broken set passed its check", name)
		}
		if err := o.check(); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v; want %q", name, err, c.want)
		}
	}
}

// TestInvariantStages: a step's callback that arrives in another stage —
// twice, or out of order — fails closed, for each staged procedure.
func TestInvariantStages(t *testing.T) {
	t.Run("recovery", func(t *testing.T) {
		e := bare()
		var got error
		r := &recovery{e: e, done: func(err error) { got = err }}
		r.fenceWaited() // the claim has not answered
		wantFailed(t, e, "a recovery step completes the stage it started")
		if got != nil || r.stage != recoveryClaiming {
			t.Fatalf("done(%v), stage %s: a rejected step must not move the round", got, r.stage)
		}
	})
	t.Run("recovery-bitmaps", func(t *testing.T) {
		e := bare()
		var got error
		r := &recovery{e: e, stage: recoveryReadingBitmaps, owned: make([]Segment, 2), done: func(err error) { got = err }}
		r.bitmapsRead(make([]*segment.Bitmap, 1), make([]string, 2), nil)
		wantFailed(t, e, "one bitmap per owned segment")
		if !errors.Is(got, ErrInvariant) {
			t.Fatalf("done(%v); want the invariant's error", got)
		}
	})
	t.Run("multipart", func(t *testing.T) {
		e := bare()
		m := &multipart{e: e, s: &snapshot{}, key: "k", stage: uploadParts}
		m.partDone(nil, false) // none in flight
		wantFailed(t, e, "a part completes while parts are in flight")
		e = bare()
		m = &multipart{e: e, s: &snapshot{}, key: "k", stage: uploadCompleting}
		m.headed(nil, false)
		wantFailed(t, e, "in stage completing, a callback of heading")
	})
	t.Run("persist", func(t *testing.T) {
		e := bare()
		s := &snapshot{id: SnapshotID{1, 1}, stage: persistCommitted}
		e.persistFailed(s, errors.New("late")) // a committed snapshot never fails
		wantFailed(t, e, "in stage committed, entering failed")
		e = bare()
		s = &snapshot{id: SnapshotID{1, 2}, stage: persistBody}
		e.commit(s) // before its marker and fence
		wantFailed(t, e, "in stage body, entering committed")
	})
}

// TestInvariantPreconditions breaks, one by one, the pre- and
// postconditions of the engine's long functions that a test can reach
// without ports.
func TestInvariantPreconditions(t *testing.T) {
	cases := []breakCase{
		{"fence-read-twice", "one fence read at a time", func(t *testing.T, e *Engine) {
			e.fence.reading = true
			e.readFence()
		}},
		{"gather-past-pieces", "a job gathers its pieces in order", func(t *testing.T, e *Engine) {
			e.gather(&job{}, 1, nil, nil)
		}},
		{"cuts-of-a-queued-snapshot", "cuts are decided for the active snapshot", func(t *testing.T, e *Engine) {
			e.active = &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			e.decideCuts(&snapshot{id: SnapshotID{1, 3}})
		}},
		{"cuts-below-last-commit", "every earlier one committed", func(t *testing.T, e *Engine) {
			e.active, e.lastCommit = &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}, SnapshotID{1, 2}
			e.decideCuts(e.active)
		}},
		{"body-prepared-twice", "a snapshot's body is prepared once", func(t *testing.T, e *Engine) {
			e.prepare(&snapshot{id: SnapshotID{1, 1}, ahead: &bodyAhead{}})
		}},
		{"join-other-offsets", "a unit joins a pending one only with the same offsets", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.offsetPending = map[string]*unit{"k": {offsets: segment.Offsets{{Key: "k", Value: 1}}}}
			e.joinDuplicate(Unit{Offsets: segment.Offsets{{Key: "k", Value: 2}}}, func(error) {})
			if len(e.answers) != 1 {
				t.Errorf("%d answers due; the joining unit is answered too", len(e.answers))
			}
		}},
		{"bucket-read-unbounded", "a key bucket is read at most AttemptsMax times", func(t *testing.T, e *Engine) {
			e.readBucketTry(nil, &keyBucket{num: 3}, AttemptsMax, func(error) {})
		}},
		{"manifest-runs-unbounded", "a manifest lists at most KeyManifestRunsMax runs", func(t *testing.T, e *Engine) {
			e.loadRuns(&keyBucket{num: 3}, make([]segment.KeyRunRef, segment.KeyManifestRunsMax+1), func([]*keyRun, bool, error) {})
		}},
		{"flushed-mask-past-partitions", "partition mask names partitions of the log", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 2)
			l.recordFlushed(SnapshotID{1, 1}, 1<<2, 1, nil)
		}},
		{"for-each-answered-twice", "each call of a forEach answers once", func(t *testing.T, e *Engine) {
			e.forEach(1, 1, func(_ int, d func(error)) { d(nil); d(nil) }, func(error) {})
		}},
		{"for-each-answered-twice-beside-another", "each call of a forEach answers once: call 1 answered again, 1 in flight (2 of 2 started)", func(t *testing.T, e *Engine) {
			e.forEach(2, 2, func(i int, d func(error)) {
				if i == 1 { // call 0 is still in flight: its answer is held
					d(nil)
					d(nil)
				}
			}, func(error) { t.Error("done ran with call 0 in flight") })
		}},
		{"open-twice", "recovery opens once, with a bitmap per owned segment", func(t *testing.T, e *Engine) {
			e.state = stateReady
			e.open(recovered{})
		}},
		{"open-without-bitmaps", "with a bitmap per owned segment: state 1, 1 owned, 0 bitmaps", func(t *testing.T, e *Engine) {
			e.state = stateRecovering
			e.open(recovered{owned: make([]Segment, 1)})
		}},
		{"attempt-answered-twice", "a request's attempt answers once", func(t *testing.T, e *Engine) {
			e.retryStop(func(d func(error)) { d(nil); d(nil) }, func(error) bool { return false }, func(error, bool) {})
		}},
		{"seal-logged-after-persist", "a generation's seal is logged before its snapshot persists", func(t *testing.T, e *Engine) {
			l := &diskLog{e: e}
			l.beforePersist(&snapshot{stage: persistBody, content: newBatchSet()}, func() {})
		}},
		{"seal-range-past-partitions", "a unit's log partition is one of the log's: partition 3 of 1", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			s := &snapshot{content: newBatchSet()}
			s.content.gen, s.content.units = 1, []*unit{{part: 3, seq: 1, seg: &wal.Segment{}}}
			l.beforePersist(s, func() {})
		}},
		{"runs-replaced-without-merge", "a merge replaces runs while it holds its bucket", func(t *testing.T, e *Engine) {
			e.replaceRuns(&keyBucket{num: 4}, nil, &keyRun{}, func() {})
		}},
		{"rebuild-from-incomplete-seal", "a generation is rebuilt only from a complete seal", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			seal := &sealScan{id: SnapshotID{1, 1}, ranges: map[uint32][]wal.SeqRange{0: {{Lo: 1, Hi: 1}}}}
			l.rebuild(seal, map[uint32]*partScan{0: {units: map[uint64]*unitScan{}}})
		}},
		{"replay-queues-a-live-snapshot", "only a rebuilt generation is queued by replay", func(t *testing.T, e *Engine) {
			e.queueReplayed(&snapshot{id: SnapshotID{1, 3}})
		}},
		{"replay-holds-a-submitted-unit", "only a replayed unit, which no submitter waits for, holds keys by replay", func(t *testing.T, e *Engine) {
			e.holdReplayed(&unit{dones: []func(error){func(error) {}}})
		}},
		{"apply-a-job-not-running", "a job is applied only while it runs: job j", func(t *testing.T, e *Engine) {
			released := false
			e.apply(nil, &job{id: "j", cut: &segState{}, state: jobPending}, nil, func() { released = true })
			if !released {
				t.Error("the refused apply kept its slices")
			}
		}},
		{"lookup-unbounded", "a key lookup refreshes its bucket at most AttemptsMax times", func(t *testing.T, e *Engine) {
			e.searchBlocks(segment.KeyHash{}, nil, AttemptsMax, func(bool, error) {})
		}},
		{"read-no-bytes", "a ranged read asks for bytes", func(t *testing.T, e *Engine) {
			e.readAgreed("k", &ByteRange{Start: 0, Length: 0}, nil, func([]byte, uint32, error) {})
		}},
		{"claim-without-log-identity", "a claimed epoch has the log's identity: epoch 3", func(t *testing.T, e *Engine) {
			r := &recovery{e: e, done: func(error) {}}
			r.claimed(writerRecord{epoch: 3, floor: 3}, "etag", nil) // a zero WAL id, no pipeline
		}},
		{"marker-without-log-identity", "every marker carries the log's identity: snapshot 000000000001-000000000002 persisted with none (epoch 1)", func(t *testing.T, e *Engine) {
			e.epoch = 1
			e.putMarkerOf(&snapshot{id: SnapshotID{1, 2}, stage: persistBody, content: newBatchSet()})
		}},
		{"key-bucket-written-while-busy", "one write per key bucket at a time: bucket 5 written while busy true with 0 keys in flight", func(t *testing.T, e *Engine) {
			b := e.keys.bucket(5)
			b.busy = true // a write (a merge's) holds it
			e.writeBucket(b, func(bool) {})
		}},
		{"key-bucket-read-unheld", "a key bucket is held by a read only while busy, with no keys in flight: bucket 5 reading, busy false, 0 keys in flight", func(t *testing.T, e *Engine) {
			b := e.keys.bucket(5)
			b.reading = true
			e.writeBucket(b, func(landed bool) {
				if landed {
					t.Error("the write answered landed")
				}
			})
		}},
		{"key-bucket-read-with-keys-in-flight", "a key bucket is held by a read only while busy, with no keys in flight: bucket 5 reading, busy true, 1 keys in flight", func(t *testing.T, e *Engine) {
			b := e.keys.bucket(5)
			b.busy, b.reading = true, true
			b.flight[segment.KeyHash{1}] = 1
			e.writeBucket(b, func(bool) {})
		}},
		{"log-scan-units-not-the-scan's", "the units recovery holds are the log's: partition 0 holds 1, its scan 0", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			ps := &partScan{p: l.log.Partition(0), scan: wal.NewPartitionScan(0), units: map[uint64]*unitScan{7: {}}}
			l.scanSegment(ps, &wal.Segment{Num: 1, Path: "wal/p000/s1"}, nil)
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantCommitAfterLast: a snapshot that reaches its commit with
// an id at or below the last commit fails closed before anything is acked.
func TestInvariantCommitAfterLast(t *testing.T) {
	e := bare()
	s := &snapshot{id: SnapshotID{1, 5}, stage: persistFencing, content: newBatchSet()}
	e.epoch, e.active, e.lastCommit = 1, s, SnapshotID{1, 7}
	e.commit(s)
	wantFailed(t, e, "commits in snapshot-id order")
	if s.stage != persistCommitted || e.lastCommit != (SnapshotID{1, 7}) {
		t.Fatalf("stage %s, last commit %s: the refused commit must not move the last commit", s.stage, e.lastCommit)
	}
}

// TestForEachNeedsALimit: a forEach that could never start a call is a
// caller's contract broken, and panics.
func TestForEachNeedsALimit(t *testing.T) {
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "forEach of 2 calls with limit 0") {
			t.Fatalf("recovered %q; want the panic naming the limit", msg)
		}
	}()
	bare().forEach(2, 0, func(int, func(error)) {}, func(error) {})
}

// TestRecoveryFailsWithAnError: a failed round without its error is a
// caller's contract broken, and panics.
func TestRecoveryFailsWithAnError(t *testing.T) {
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "recovery round 2 failed without an error") {
			t.Fatalf("recovered %q; want the panic naming the round", msg)
		}
	}()
	bare().recoveryFailed(2, nil, func(error) {})
}

// TestInvariantStageChecks breaks each stage's whole-state check.
func TestInvariantStageChecks(t *testing.T) {
	seg := func(seq uint64) *segState { return &segState{Segment: Segment{ID: SnapshotID{1, seq}}} }
	cases := []breakCase{
		{"compaction-running", "0 ≤ running ≤ CompactionConcurrency: running 3, limit 2", func(t *testing.T, e *Engine) {
			e.cfg.CompactionConcurrency, e.running = 2, 3
			e.checkCompaction()
		}},
		{"compaction-lane-order", "every lane is in the lane order once: 1 lanes, 0 in order", func(t *testing.T, e *Engine) {
			e.cfg.CompactionConcurrency = 1
			e.lanes = map[laneKey]*lane{{}: {}}
			e.checkCompaction()
		}},
		{"compaction-segment-order", "owned segments in id order", func(t *testing.T, e *Engine) {
			e.cfg.CompactionConcurrency = 1
			e.segs = []*segState{seg(2), seg(1)}
			e.checkCompaction()
		}},
		{"forget-unowned", "a reclaimed segment was owned", func(t *testing.T, e *Engine) {
			e.forget(seg(9))
		}},
		{"admission-idem-key-of-another-unit", `a pending idempotency key is its unit's: 2 are not, the least "a"`, func(t *testing.T, e *Engine) {
			e.idemPending = map[string]*unit{"b": {idem: "x"}, "a": {idem: "x"}, "x": {idem: "x"}}
			e.checkAdmission()
		}},
		{"admission-offset-key-not-held", `a pending offset key is one of its unit's offsets, not a floor: 1 are not, the least "src/1"`, func(t *testing.T, e *Engine) {
			e.offsetPending = map[string]*unit{"src/1": {offsets: segment.Offsets{{Key: "src/2", Value: 1}}}}
			e.checkAdmission()
		}},
		{"admission-floor-pending", "a pending offset key is one of its unit's offsets, not a floor: 1 are not", func(t *testing.T, e *Engine) {
			floor := segment.FloorKey("src", "m")
			e.offsetPending = map[string]*unit{floor: {offsets: segment.Offsets{{Key: floor, Value: 1}}}}
			e.checkAdmission()
		}},
		{"admission-lookup-unwaited", "a key lookup in flight has a submission waiting: 1 have none", func(t *testing.T, e *Engine) {
			e.lookups = map[segment.KeyHash]*keyLookup{segment.KeyHashOf("k"): {}}
			e.checkAdmission()
		}},
		{"admission-rate-nan", "the ingest rate is ≥ 0 bytes/s: NaN", func(t *testing.T, e *Engine) {
			e.rateEMA = math.NaN()
			e.checkAdmission()
		}},
		{"writer-negative-counts", "the writer's counts are not negative: -1 failures, persist EMA 0s, ack delay EMA -1ms", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity, e.failures, e.ackDelayEMA = 1, -1, -time.Millisecond
			e.checkQueue()
		}},
		{"checkpoint-waiter-unserved", "a checkpoint waiter has a round running or scheduled: 1 waiting", func(t *testing.T, e *Engine) {
			e.ckptWaiters = []checkpointWaiter{{}}
			e.checkCheckpointing()
		}},
		{"queue-over-capacity", "sealed snapshots held (queue and active) ≤ max(QueueCapacity, replayed) + 1: 2 queued, active true, capacity 1, replayed 0", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity = 1
			e.active = &snapshot{id: SnapshotID{1, 1}, content: newBatchSet()}
			e.queue = []*snapshot{{id: SnapshotID{1, 2}, content: newBatchSet()}, {id: SnapshotID{1, 3}, content: newBatchSet()}}
			e.checkQueue()
		}},
		{"live-past-its-bound", "live holds at most its bound, or one unit: 2 units of 101 bytes, bound 100", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity, e.cfg.LiveBytesMax = 1, 100
			e.live.units, e.live.bytes = []*unit{{}, {}}, 101
			e.checkQueue()
		}},
		{"cut-only-takes-a-reserved-slot", "a cut-only segment leaves a WAL slot to each unit on its way into live: 1 segments owned, 1 queued, active false, 0 units on their way, limit 1", func(t *testing.T, e *Engine) {
			e.cfg.LiveSegmentsMax = 1
			e.segs, e.queue = []*segState{seg(1)}, []*snapshot{{id: SnapshotID{1, 2}, content: newBatchSet()}}
			e.checkCutOnlyRoom()
		}},
		{"queue-over-capacity-idle", "sealed snapshots held (queue and active) ≤ max(QueueCapacity, replayed) + 1: 3 queued, active false, capacity 1, replayed 0", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity = 1
			e.queue = []*snapshot{{id: SnapshotID{1, 1}, content: newBatchSet()}, {id: SnapshotID{1, 2}, content: newBatchSet()}, {id: SnapshotID{1, 3}, content: newBatchSet()}}
			e.checkQueue()
		}},
		{"active-before-last-commit", "snapshots in id order: active 000000000001-000000000002, last committed 000000000001-000000000003", func(t *testing.T, e *Engine) {
			e.cfg.QueueCapacity = 1
			e.active, e.lastCommit = &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}, SnapshotID{1, 3}
			e.checkQueue()
		}},
		{"segment-registered-out-of-order", "owned segments in id order: 000000000001-000000000001 registered after 000000000001-000000000002", func(t *testing.T, e *Engine) {
			e.segs = []*segState{seg(2)}
			e.checkSegAppend(seg(1))
		}},
		{"open-groups-negative", "0 ≤ open groups ≤ parts of a segment: segment 000000000001-000000000004, -1 open, 0 parts", func(t *testing.T, e *Engine) {
			st := seg(4)
			st.Index, st.open = &segment.Index{}, -1
			e.checkPending(st)
		}},
		{"lane-two-open-jobs", "a lane has one open job at most: lane lake/ns has 2", func(t *testing.T, e *Engine) {
			g := segment.Group{SinkRef: "lake", Namespace: "ns"}
			other := segment.Group{SinkRef: "lake", Namespace: "ns", CDC: true}
			ln := &lane{key: laneOf(g), open: []*openJob{{group: g, pieces: []piece{{seg: seg(1)}}}, {group: other, pieces: []piece{{seg: seg(2)}}}}}
			e.lanes = map[laneKey]*lane{ln.key: ln}
			e.checkOpen([]segment.Group{g})
		}},
		{"job-ends-twice", "a job ends once per start: job j (cut in segment 000000000001-000000000001) ends in state 2", func(t *testing.T, e *Engine) {
			e.checkJobEnds(&job{id: "j", cut: seg(1), state: jobApplied})
		}},
		{"cut-leaves-open-part", "a cut takes its whole open job: cut of", func(t *testing.T, e *Engine) {
			o := &openJob{pieces: []piece{{seg: seg(1)}}}
			e.checkOpenFrom(seg(3), segment.Cut{}, o, SnapshotID{1, 2})
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantReporting breaks the bounds of what the engine reports:
// the alert queue, the namespaces counted one by one, the trouble
// events. Each holds under any number of events, and a queue found past
// its bound fails closed at the next insert.
func TestInvariantReporting(t *testing.T) {
	e := bare()
	e.namespaces = map[string]*NamespaceStats{}
	for i := range AlertsMax + 10 {
		e.alert(AlertCannotApply, fmt.Errorf("refused %d", i))
		e.namespace(fmt.Sprint("ns", i))
		e.failing("sink lake/ns", errors.New("down"))
		e.succeeded("sink lake/ns")
	}
	for i := range NamespacesTrackedMax {
		e.namespace(fmt.Sprint("more", i))
	}
	if e.err != nil || len(e.alerts) != AlertsMax || len(e.namespaces) != NamespacesTrackedMax || len(e.trouble.events) != TroubleEventsMax {
		t.Fatalf("err %v: %d alerts, %d namespaces, %d trouble events", e.err, len(e.alerts), len(e.namespaces), len(e.trouble.events))
	}
	cases := []breakCase{
		{"alerts-past-bound", "the alert queue holds at most AlertsMax: 258 alerts queued, limit 256", func(t *testing.T, e *Engine) {
			e.alerts = make([]Alert, AlertsMax+1)
			e.alert(AlertCannotApply, errors.New("refused"))
		}},
		{"namespaces-past-bound", fmt.Sprintf("namespaces counted ≤ NamespacesTrackedMax: 1025 counted after adding %q, limit 1024", NamespaceOther), func(t *testing.T, e *Engine) {
			e.namespaces = map[string]*NamespaceStats{}
			for i := range NamespacesTrackedMax { // none of them NamespaceOther
				e.namespaces[fmt.Sprint("ns", i)] = &NamespaceStats{}
			}
			e.namespace("one more")
		}},
		{"trouble-events-past-bound", "trouble events ≤ TroubleEventsMax: 258 queued after event 1 (store put), limit 256", func(t *testing.T, e *Engine) {
			e.trouble.events = make([]TroubleEvent, TroubleEventsMax+1)
			e.failing("store put", errors.New("refused"))
		}},
	}
	runBreaks(t, cases)
}

// TestTroubleNeedsAnError: a failure recorded without its error is a
// caller's contract broken (a trouble's Err is never nil), and panics.
func TestTroubleNeedsAnError(t *testing.T) {
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, `trouble "persist" without an error`) {
			t.Fatalf("recovered %q; want the panic naming the trouble", msg)
		}
	}()
	bare().failing(troublePersist, nil)
}

// testDiskLog is a disk log of n partitions on no ports, for checks that
// fail before any I/O.
func testDiskLog(e *Engine, n int) *diskLog {
	l := &diskLog{e: e, cfg: DiskWAL{Partitions: n}, nextGen: 2, durableSeq: make([]uint64, n)}
	l.log = wal.New(wal.Config{Partitions: n, SegmentBytes: 1 << 20, BatchBytes: 1 << 16, AttemptsMax: AttemptsMax}, nil, nil, logHooks{l})
	return l
}
