package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

func isMarker(key string) bool { return strings.HasSuffix(key, ".seg.commit") }
func isBody(key string) bool   { return strings.HasSuffix(key, ".seg") }

// Units are acked only once their marker exists, all namespaces share one
// segment, and a unit's values land exactly once.
func TestCommitThenAck(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	var acks []*result
	markersAtAck := -1
	for i, ns := range []string{"orders", "events", "pageviews", "events"} {
		res := &result{}
		acks = append(acks, res)
		r.eng.Submit(unit(ns, int64(i)), func(err error) {
			res.done, res.err = true, err
			markersAtAck = r.markers()
		})
	}
	r.until(func() bool { return acks[3].done }, "acks")
	for i, a := range acks {
		if a.err != nil {
			t.Fatalf("unit %d: %v", i, a.err)
		}
	}
	if markersAtAck != 1 {
		t.Fatalf("%d markers existed when the acks ran, want 1 (one segment for all namespaces)", markersAtAck)
	}
	got := r.committedValues()
	if !slices.Equal(got["events"], []int64{1, 3}) || !slices.Equal(got["orders"], []int64{0}) {
		t.Fatalf("committed %v", got)
	}
}

// A unit at the target size flushes at once, not after the delay budget.
func TestTargetFlushesImmediately(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	big := make([]int64, 10_000) // 80 KB > 64 KiB target
	start := r.sched.Now()
	res := r.submit(unit("events", big...))
	r.until(func() bool { return r.store.Counts(sim.OpCreateUpload).Issued > 0 }, "upload start")
	if took := r.sched.Now() - start; took >= 10*time.Millisecond {
		t.Fatalf("upload started after %v; a full segment must not wait for the delay", took)
	}
	r.until(func() bool { return res.done }, "ack")
	if c := r.store.Counts(sim.OpUploadPart); c.Issued == 0 {
		t.Fatal("a body above PartBytes was not uploaded in parts")
	}
}

// Persist failure: nothing is acked, the content returns to the
// accumulator ahead of newer units, and is committed later, in order.
func TestPersistFailureRestoresInOrder(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	failing := true
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpPut).Key(isBody).While(&failing))
	first := r.submit(unit("a", 1, 2))
	r.until(func() bool { return r.eng.Stats().PersistFailures > 0 }, "a persist failure")
	second := r.submit(unit("a", 3))
	if first.done {
		t.Fatalf("unit answered (%v) although its persist failed", first.err)
	}
	failing = false
	r.until(func() bool { return first.done && second.done }, "acks after recovery")
	if first.err != nil || second.err != nil {
		t.Fatalf("errors: %v %v", first.err, second.err)
	}
	if got := r.committedValues()["a"]; !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("committed %v, want [1 2 3]", got)
	}
}

// An ambiguous marker PUT that landed is settled by reading the key: the
// unit is acked once, under the original id.
func TestInDoubtMarkerLanded(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	r.faults = sim.StoreRules(sim.StoreFault(sim.AmbiguousApplied, sim.OpPut).Key(isMarker).Nth(1))
	res := r.submit(unit("a", 1))
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil || r.eng.Stats().InDoubt != 0 && r.markers() != 1 {
		t.Fatalf("err %v, markers %d", res.err, r.markers())
	}
	if r.markers() != 1 || !slices.Equal(r.committedValues()["a"], []int64{1}) {
		t.Fatalf("markers %d, values %v", r.markers(), r.committedValues())
	}
}

// Every marker attempt ambiguous and lost: the engine waits out the fence,
// reads the key, finds nothing, and commits the unit once under a new id.
func TestInDoubtMarkerLost(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	lost := sim.StoreFault(sim.AmbiguousLost, sim.OpPut).Key(isMarker).Nth(1)
	r.faults = sim.StoreRules(lost)
	res := r.submit(unit("a", 7))
	r.until(func() bool { return res.done }, "ack")
	st := r.eng.Stats()
	if res.err != nil || st.InDoubt != 1 || st.PersistFailures != 1 {
		t.Fatalf("err %v, stats %+v", res.err, st)
	}
	if r.markers() != 1 || !slices.Equal(r.committedValues()["a"], []int64{7}) {
		t.Fatalf("markers %d, values %v", r.markers(), r.committedValues())
	}
	if lost.Fired() != 1 {
		t.Fatalf("the lost marker PUT fired %d times, want 1", lost.Fired())
	}
}

// After a marker PUT whose outcome is unknown, the key is only read, never
// PUT again: the marker may have landed and been reclaimed by a successor
// meanwhile, and a second create-only PUT would recreate it (seed 8).
func TestInDoubtMarkerIsNeverPutAgain(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	lost := sim.StoreFault(sim.AmbiguousLost, sim.OpPut).Key(isMarker).Nth(1)
	r.faults = sim.StoreRules(lost)
	res := r.submit(unit("a", 7))
	r.until(func() bool { return res.done }, "ack")
	// One lost PUT of the first id, then one PUT of the next id: never a
	// second PUT of a key whose first PUT went unheard.
	if res.err != nil || lost.Seen() != 2 || r.eng.Stats().PersistFailures != 1 {
		t.Fatalf("err %v, marker PUTs %d, stats %+v", res.err, lost.Seen(), r.eng.Stats())
	}
}

// Another writer's marker at our key: the engine fails closed rather
// than ack or re-commit.
func TestForeignMarkerFailsClosed(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	eng := r.start()
	id := engine.SnapshotID{Epoch: eng.Epoch(), Seq: 1}
	key := eng.Layout().Key(eng.Layout().SegmentDir(r.sched.WallUnixMs()), id, engine.KindMarker)
	r.putObject(key, []byte("another writer's marker"))
	res := r.submit(unit("a", 1))
	r.until(func() bool { return res.done }, "answer")
	if !errors.Is(res.err, engine.ErrClosed) || !errors.Is(eng.Err(), engine.ErrCorrupt) || eng.Marks()[engine.MarkMarkerExists] != 1 {
		t.Fatalf("answer %v, engine error %v, marker-exists %d", res.err, eng.Err(), eng.Marks()[engine.MarkMarkerExists])
	}
}

// putObject writes an object through a setup incarnation's port.
func (r *rig) putObject(key string, body []byte) {
	r.t.Helper()
	inc := r.sched.NewIncarnation()
	done := false
	r.store.Client(inc).PutObject(engine.PutObjectInput{Key: key, Body: body}, func(_ string, err error) {
		if err != nil {
			r.t.Fatal(err)
		}
		done = true
	})
	r.until(func() bool { return done }, "setup put")
	inc.Kill()
}

// A completion that was ambiguous but applied: the retry hears "no such
// upload", and a HEAD of the body proves the upload completed.
func TestAmbiguousCompleteSettledByHead(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	r.faults = sim.StoreRules(sim.StoreFault(sim.AmbiguousApplied, sim.OpComplete).Nth(1))
	res := r.submit(unit("a", make([]int64, 10_000)...))
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil || r.markers() != 1 || r.store.Counts(sim.OpHead).Issued == 0 {
		t.Fatalf("err %v, markers %d, heads %d", res.err, r.markers(), r.store.Counts(sim.OpHead).Issued)
	}
}

// Recovery owns committed pairs only, rebuilds offsets from the markers,
// claims a higher epoch, and never reads a body.
func TestRecoveryFromMarkers(t *testing.T) {
	r := newRig(t, sim.StoreConfig{PageSize: 2})
	first := r.start()
	for i := range 5 {
		res := r.submit(withOffset(unit("a", int64(i)), "src/a", uint64(i+1)))
		r.until(func() bool { return res.done }, "ack")
	}
	gets := r.store.Counts(sim.OpGet).Issued
	second := r.start()
	if second.Epoch() <= first.Epoch() {
		t.Fatalf("epoch %d after %d", second.Epoch(), first.Epoch())
	}
	if v, _ := second.Offsets().Get("src/a"); v != 5 {
		t.Fatalf("recovered offset %d, want 5", v)
	}
	if got := len(second.Segments()); got != r.markers() {
		t.Fatalf("owns %d segments, %d markers exist", got, r.markers())
	}
	// One GET for the writer object, one per marker, none for bitmaps
	// (nothing was applied: the LIST shows none), one for _offsets and
	// one per idempotency-key bucket from one before the bucket of
	// now − window to one after the current one — the window is 16
	// buckets exactly, so 16 + 3; none for bodies.
	buckets := engine.IdemBucketsPerWindow + 3
	if extra := r.store.Counts(sim.OpGet).Issued - gets; extra != uint64(2+r.markers()+buckets) {
		t.Fatalf("recovery issued %d GETs for %d markers and %d buckets", extra, r.markers(), buckets)
	}
}

// LIST lags: a marker is listed while its body is not yet. Recovery
// checks the body with a HEAD and owns the segment; a marker whose body
// is truly gone is corruption, and recovery fails closed.
func TestRecoveryLaggingBody(t *testing.T) {
	for _, bodyExists := range []bool{true, false} {
		r := newRig(t, sim.StoreConfig{ListLagMin: time.Second, ListLagMax: time.Second})
		r.cfg.FenceWait = 0
		dir := engine.NewLayout("wal", "test").SegmentDir(r.sched.WallUnixMs())
		body, marker := encodeSegment(t, unit("a", 1))
		id := engine.SnapshotID{Epoch: 1, Seq: 1}
		r.putObject(dir+id.String()+".seg.commit", marker)
		r.sched.RunUntil(r.sched.Now() + 500*time.Millisecond)
		if bodyExists {
			r.putObject(dir+id.String()+".seg", body)
		}
		r.sched.RunUntil(r.sched.Now() + 700*time.Millisecond) // marker listed, body not yet
		r.inc = r.sched.NewIncarnation()
		eng, _ := engine.New(r.cfg, engine.Ports{Clock: r.sched.Clock(), Rand: r.root.Split("e"), Timers: r.inc.Timers(),
			Exec: r.inc.Executor(), Store: r.store.Client(r.inc)})
		var done bool
		var err error
		eng.Start(func(e error) { done, err = true, e })
		r.until(func() bool { return done }, "recovery")
		switch {
		case bodyExists && (err != nil || len(eng.Segments()) != 1 || eng.Marks()[engine.MarkMarkerBodyUnlisted] != 1):
			t.Fatalf("body present: err %v, owned %d, marker-body-unlisted %d", err, len(eng.Segments()), eng.Marks()[engine.MarkMarkerBodyUnlisted])
		case !bodyExists && !errors.Is(err, engine.ErrCorrupt):
			t.Fatalf("body missing: err %v, want ErrCorrupt", err)
		}
	}
}

func encodeSegment(t *testing.T, u engine.Unit) (body, marker []byte) {
	t.Helper()
	var buf strings.Builder
	ix, err := segment.Encode(&writerAdapter{&buf}, 0, nil, []segment.Part{{Key: u.Key, Schema: u.Schema, Batches: u.Batches}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	marker, err = segment.EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(buf.String()), marker
}

type writerAdapter struct{ b *strings.Builder }

func (w *writerAdapter) Write(p []byte) (int, error) { return w.b.Write(p) }

// The sweeper deletes a previous incarnation's old orphan body (no marker)
// and aborts its stale uploads; it keeps a committed pair.
func TestSweepOrphans(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.OrphanGrace = 0
	r.start()
	res := r.submit(unit("a", 1))
	r.until(func() bool { return res.done }, "ack")
	dir := r.eng.Layout().SegmentDir(r.sched.WallUnixMs())
	orphan := dir + engine.SnapshotID{Epoch: r.eng.Epoch(), Seq: 99}.String() + ".seg"
	r.putObject(orphan, []byte("orphan body"))
	r.start()
	r.settle()
	if _, ok := r.store.Object(orphan); ok {
		t.Fatal("orphan body survived the sweep")
	}
	if r.markers() != 1 || r.eng.Stats().OrphansSwept != 1 {
		t.Fatalf("markers %d, swept %d", r.markers(), r.eng.Stats().OrphansSwept)
	}
}

// Duplicates are answered from the offsets view or joined to the pending
// unit; nothing is stored twice.
func TestDuplicates(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	idem := func(v int64) engine.Unit { u := unit("http", v); u.IdempotencyKey = "req-1"; return u }
	a, b := r.submit(idem(1)), r.submit(idem(1))
	r.until(func() bool { return a.done && b.done }, "acks")
	c := r.submit(idem(1))
	d := r.submit(withOffset(unit("log", 5), "src/log", 1))
	r.until(func() bool { return c.done && d.done }, "acks")
	e := r.submit(withOffset(unit("log", 5), "src/log", 1))
	r.until(func() bool { return e.done }, "ack")
	for i, res := range []*result{a, b, c, d, e} {
		if res.err != nil {
			t.Fatalf("answer %d: %v", i, res.err)
		}
	}
	got := r.committedValues()
	if !slices.Equal(got["http"], []int64{1}) || !slices.Equal(got["log"], []int64{5}) {
		t.Fatalf("committed %v", got)
	}
	if st := r.eng.Stats(); st.UnitsDuplicate != 3 {
		t.Fatalf("duplicates %d, want 3", st.UnitsDuplicate)
	}
}

func TestRefusals(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.memory = 1 << 20 // a pool of 700 KiB: admission about 560 KiB
	early := &result{}
	r.inc = r.sched.NewIncarnation()
	eng, _ := engine.New(r.cfg, engine.Ports{Clock: r.sched.Clock(), Rand: r.root, Timers: r.inc.Timers(), Exec: r.inc.Executor(), Store: r.store.Client(r.inc)})
	eng.Submit(unit("a", 1), func(err error) { early.done, early.err = true, err })
	r.until(func() bool { return early.done }, "answer")
	if !errors.Is(early.err, engine.ErrNotReady) {
		t.Fatalf("before recovery: %v", early.err)
	}
	r.start()
	wrongSchema := unit("a", 1)
	wrongSchema.Key.Schema++
	otherBatch := unit("a", 1)
	otherBatch.Batches = renamed(unit("a", 1)).Batches // its part's schema is the unit's
	cdc := unit("a", 1, 2)
	cdc.Sidecar = &segment.Sidecar{Rows: []segment.CDCRow{{Kind: segment.Insert}}}
	reserved := withOffset(unit("a", 1), "idem/x", 1)
	for _, c := range []struct {
		name string
		u    engine.Unit
		want error
	}{
		{"schema fingerprint", wrongSchema, engine.ErrInvalidUnit},
		{"batch schema", otherBatch, engine.ErrInvalidUnit},
		{"sidecar rows", cdc, engine.ErrInvalidUnit},
		{"reserved offset key", reserved, engine.ErrInvalidUnit},
		{"over admission", unit("a", make([]int64, 100_000)...), engine.ErrResourceExhausted},
	} {
		res := r.submit(c.u)
		r.until(func() bool { return res.done }, c.name)
		if !errors.Is(res.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, res.err, c.want)
		}
	}
	// One unanswered unit per offset key: the next offset must wait; the
	// same unit resubmitted shares the first answer and is stored once.
	first := r.submit(withOffset(unit("a", 1), "src/a", 1))
	again := r.submit(withOffset(unit("a", 1), "src/a", 1))
	second := r.submit(withOffset(unit("a", 2), "src/a", 2))
	r.until(func() bool { return first.done && again.done && second.done }, "answers")
	if first.err != nil || again.err != nil || !errors.Is(second.err, engine.ErrResourceExhausted) {
		t.Fatalf("offset key in flight: %v, %v, %v", first.err, again.err, second.err)
	}
	if m := r.eng.Marks(); m[engine.MarkBackpressureOffset] != 1 || m[engine.MarkDuplicateJoined] != 1 || m[engine.MarkBackpressureMemory] != 1 {
		t.Fatalf("marks: backpressure-offset %d, duplicate-joined %d, backpressure-memory %d",
			m[engine.MarkBackpressureOffset], m[engine.MarkDuplicateJoined], m[engine.MarkBackpressureMemory])
	}
	if got := r.committedValues()["a"]; !slices.Equal(got, []int64{1}) {
		t.Fatalf("committed %v, want the unit once", got)
	}
}

// Close commits what is held and acks it; later submits are refused.
func TestCloseFlushes(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	res := r.submit(unit("a", 1))
	var closed bool
	var closeErr error
	r.eng.Close(func(err error) { closed, closeErr = true, err })
	r.until(func() bool { return closed }, "close")
	if closeErr != nil || !res.done || res.err != nil {
		t.Fatalf("close %v, unit %+v", closeErr, res)
	}
	late := r.submit(unit("a", 2))
	r.until(func() bool { return late.done }, "answer")
	if !errors.Is(late.err, engine.ErrClosed) {
		t.Fatalf("after close: %v", late.err)
	}
}

// A writer superseded by a newer one (a paused process that wakes up)
// must not ack: its marker lands after the newer writer sealed its epoch,
// so it fails closed, the unit is answered with an error, the newer
// writer commits it, and no later recovery owns the stale marker.
func TestSupersededWriterIsFenced(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	old := r.start()
	oldInc := r.inc
	r.inc = nil // keep the old incarnation alive: a zombie, not a crash
	fresh := r.start()
	if fresh.Epoch() <= old.Epoch() {
		t.Fatalf("epochs %d then %d", old.Epoch(), fresh.Epoch())
	}
	idem := func() engine.Unit { u := unit("http", 42); u.IdempotencyKey = "req-42"; return u }
	stale := &result{}
	old.Submit(idem(), func(err error) { stale.done, stale.err = true, err })
	r.until(func() bool { return stale.done }, "the stale writer's answer")
	if !errors.Is(stale.err, engine.ErrClosed) || !errors.Is(old.Err(), engine.ErrFenced) {
		t.Fatalf("stale writer answered %v, engine error %v", stale.err, old.Err())
	}
	res := r.submit(idem())
	r.until(func() bool { return res.done }, "the current writer's answer")
	if res.err != nil {
		t.Fatal(res.err)
	}
	oldInc.Kill()
	third := r.start()
	r.settle()
	owned := 0
	for _, s := range third.Segments() {
		owned++
		if s.ID.Epoch == old.Epoch() {
			t.Fatalf("recovery owns the fenced writer's segment %s", s.ID)
		}
	}
	if owned != 1 || r.markers() != 1 {
		t.Fatalf("owned %d segments, %d markers left; want the current writer's one", owned, r.markers())
	}
	if got := r.committedValues()["http"]; !slices.Equal(got, []int64{42}) {
		t.Fatalf("committed %v, want the unit once", got)
	}
}

// Close during recovery: recovery does not open ingest afterwards.
func TestCloseDuringRecovery(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.inc = r.sched.NewIncarnation()
	eng, _ := engine.New(r.cfg, engine.Ports{Clock: r.sched.Clock(), Rand: r.root, Timers: r.inc.Timers(), Exec: r.inc.Executor(), Store: r.store.Client(r.inc)})
	var started, closed bool
	var startErr, closeErr error
	eng.Start(func(err error) { started, startErr = true, err })
	eng.Close(func(err error) { closed, closeErr = true, err })
	r.until(func() bool { return started && closed }, "answers")
	if closeErr != nil || !errors.Is(startErr, engine.ErrClosed) || eng.Ready() {
		t.Fatalf("close %v, start %v, ready %v", closeErr, startErr, eng.Ready())
	}
}

// The offsets view must fit one checkpoint: a unit that would grow its
// source offsets past OffsetsViewMax is refused with ErrResourceExhausted
// (not acked, nothing lost); units whose keys it already holds (the next
// offset of a known partition) still ack. Idempotency keys are the key
// store's: no count of them is refused.
func TestOffsetsViewIsBounded(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.OffsetsViewMax = 2
	r.start()
	for v := range int64(2) {
		if err := r.answer(withOffset(unit("log", v), fmt.Sprintf("src/%d", v), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.answer(withOffset(unit("log", 2), "src/2", 1)); !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), "offsets view") {
		t.Fatalf("a third source key: %v", err)
	}
	if err := r.answer(withOffset(unit("log", 3), "src/1", 2)); err != nil {
		t.Fatalf("next offset of a known key: %v", err)
	}
	for v := range int64(20) {
		if err := r.answer(idemUnit("http", v, fmt.Sprintf("req-%d", v))); err != nil {
			t.Fatalf("idempotency key %d: %v", v, err)
		}
	}
	got := r.committedValues()
	if len(got["http"]) != 20 || !slices.Equal(got["log"], []int64{0, 1, 3}) {
		t.Fatalf("committed %v, want each unit once", got)
	}
}

func TestConfigRejectsAnOffsetsViewLargerThanACheckpoint(t *testing.T) {
	c := newRig(t, sim.StoreConfig{}).cfg
	c.OffsetsViewMax = segment.CheckpointEntriesMax + 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "offsets view") {
		t.Fatalf("validate: %v", err)
	}
}

// A snapshot at a segment limit (here: offset entries) is sealed; when the
// writer queue is full too, the unit is refused — backpressure, nothing
// lost — and once the queue drains the same unit is accepted.
func TestRefusalWhenSnapshotFullAndQueueFull(t *testing.T) {
	r := newRig(t, sim.StoreConfig{Latency: [sim.NumOps]sim.Latency{sim.OpPut: sim.Constant(time.Second)}})
	r.cfg.QueueCapacity = 1
	r.memory = 1 << 32
	r.start()
	many := func(ns string, n int) engine.Unit {
		u := unit(ns, 1)
		for i := range n {
			u.Offsets = append(u.Offsets, segment.Offset{Key: fmt.Sprintf("%s/%06d", ns, i), Value: 1})
		}
		return u
	}
	a := r.submit(many("a", 40_000)) // sealed at once (over the target): persisting
	b := r.submit(many("b", 40_000)) // sealed into the queue
	c := r.submit(many("c", 40_000)) // live: the queue is full
	d := r.submit(many("d", 40_000)) // live would pass 65,536 entries; cannot seal
	r.until(func() bool { return d.done }, "the fourth answer")
	if !errors.Is(d.err, engine.ErrResourceExhausted) || !strings.Contains(d.err.Error(), "writer queue is full") {
		t.Fatalf("fourth unit: %v, want a full-queue refusal", d.err)
	}
	if r.eng.Marks()[engine.MarkBackpressureQueue] != 1 {
		t.Fatal("backpressure-queue mark not passed")
	}
	r.until(func() bool { return a.done && b.done && c.done }, "the others' acks")
	again := r.submit(many("d", 40_000))
	r.until(func() bool { return again.done }, "the retry")
	if a.err != nil || b.err != nil || c.err != nil || again.err != nil {
		t.Fatalf("answers %v %v %v, retry %v", a.err, b.err, c.err, again.err)
	}
}

// An epoch claim whose answer was lost but that landed is recognised by
// its nonce when the writer object is read again: the claim stands, no
// second epoch is taken.
func TestClaimLandedDespiteLostAnswer(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.faults = sim.StoreRules(sim.StoreFault(sim.AmbiguousApplied, sim.OpPut).Suffix("_writer").Nth(1))
	eng := r.start()
	if eng.Marks()[engine.MarkClaimLanded] != 1 || eng.Epoch() != 1 {
		t.Fatalf("claim-landed %d, epoch %d: want the lost claim recognised as epoch 1", eng.Marks()[engine.MarkClaimLanded], eng.Epoch())
	}
}
