package engine_test

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
)

// countingSink counts Apply calls per job and can be switched off (an
// outage) per namespace.
type countingSink struct {
	inner   engine.Sink
	applies map[string]int
	spans   map[string]int // segments each job held PARTs of
	down    map[string]bool
	timers  engine.Timers
	delay   time.Duration // each apply starts this long after it was asked for
}

func (s *countingSink) Apply(j *engine.Job, done func(error)) {
	if s.down[j.Namespace] {
		s.timers.AfterFunc(time.Millisecond, func() { done(errors.New("sink down")) })
		return
	}
	s.applies[j.ID]++
	s.spans[j.ID] = len(j.Segments)
	if s.delay == 0 {
		s.inner.Apply(j, done)
		return
	}
	s.timers.AfterFunc(s.delay, func() { s.inner.Apply(j, done) })
}

type oneSink struct{ s engine.Sink }

func (o oneSink) Sink(ref string) (engine.Sink, bool) { return o.s, ref == "lake" }

// withSink gives the rig a memory destination behind a counting sink that
// follows each new incarnation.
func withSink(r *rig) (*sinks.Memory, *countingSink) {
	dest := sinks.NewMemory()
	cs := &countingSink{applies: map[string]int{}, spans: map[string]int{}, down: map[string]bool{}}
	r.sinksFor = func(inc *sim.Incarnation) engine.Sinks {
		cs.inner, cs.timers = dest.Sink(inc.Timers()), inc.Timers()
		return oneSink{cs}
	}
	return dest, cs
}

// oneSinkDown starts the rig with a sink whose namespace b is down and
// commits one segment of namespaces a and b: job a can apply, job b
// fails until the test brings b back (cs.down).
func oneSinkDown(r *rig) (*sinks.Memory, *countingSink) {
	r.t.Helper()
	dest, cs := withSink(r)
	r.start()
	cs.down["b"] = true
	a, b := r.submit(unit("a", 1)), r.submit(unit("b", 2))
	r.until(func() bool { return a.done && b.done }, "acks")
	return dest, cs
}

func destValues(m *sinks.Memory) map[string][]int64 {
	out := map[string][]int64{}
	for _, a := range m.Applied() {
		for _, b := range a.Batches {
			out[a.Namespace] = append(out[a.Namespace], b.Column(0).(*array.Int64).Int64Values()...)
		}
	}
	return out
}

func (r *rig) walKeys() []string { return r.store.Keys("wal/test/p_year=") }

// Committed units reach the sink once each, in commit order per
// namespace; then the segments are reclaimed and the offsets checkpoint
// outlives them.
func TestCompactionAppliesThenReclaims(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, cs := withSink(r)
	r.start()
	var last *result
	for i := range 30 {
		ns := []string{"orders", "events", "events"}[i%3]
		last = r.submit(withOffset(unit(ns, int64(i)), "src/"+ns+string(rune('0'+i)), 1))
		if i%7 == 0 {
			r.until(func() bool { return last.done }, "ack")
		}
	}
	var pinnedPeak int64 // bodies pinned while their jobs run, none after
	r.until(func() bool {
		pinnedPeak = max(pinnedPeak, r.eng.Stats().CachePinnedBytes)
		return last.done && r.eng.Drained() && len(r.walKeys()) == 0
	}, "drain")
	if st := r.eng.Stats(); pinnedPeak == 0 || st.CachePinnedBytes != 0 || st.CachePinnedBytes > st.CacheBytes {
		t.Fatalf("pinned bytes peaked at %d, %d after the drain (cache %d)", pinnedPeak, st.CachePinnedBytes, st.CacheBytes)
	}
	got := destValues(dest)
	var wantEvents, wantOrders []int64
	for i := range 30 {
		if i%3 == 0 {
			wantOrders = append(wantOrders, int64(i))
		} else {
			wantEvents = append(wantEvents, int64(i))
		}
	}
	if !slices.Equal(got["events"], wantEvents) || !slices.Equal(got["orders"], wantOrders) {
		t.Fatalf("destination %v", got)
	}
	for id, n := range cs.applies {
		if n != 1 {
			t.Fatalf("job %s applied %d times without any failure", id, n)
		}
	}
	if _, ok := r.store.Object("wal/test/_offsets"); !ok {
		t.Fatal("no offsets checkpoint after reclaim")
	}
	second := r.start()
	if v, ok := second.Offsets().Get("src/events1"); !ok || v != 1 {
		t.Fatalf("offsets lost with the reclaimed segments: %v", second.Offsets())
	}
}

func (r *rig) bitmapKey() string {
	for _, k := range r.walKeys() {
		if strings.HasSuffix(k, ".seg.scbl") {
			return k
		}
	}
	return "none"
}

// An unreadable bitmap forbids deletion: the jobs are applied (replay is
// safe), the segment stays, and the engine alerts.
func TestUnreadableBitmapKeepsSegment(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, cs := oneSinkDown(r)
	r.until(func() bool { return r.bitmapKey() != "none" }, "a bitmap write")
	key := r.bitmapKey()
	r.putObject(key, []byte("not a bitmap"))
	r.start()
	cs.down["b"] = false
	r.settle()
	if got := destValues(dest); !slices.Equal(got["b"], []int64{2}) {
		t.Fatalf("destination %v", got)
	}
	if r.eng.Stats().Alerts == 0 || !errors.Is(r.eng.LastAlert(), engine.ErrCorrupt) {
		t.Fatalf("no alert: %v", r.eng.LastAlert())
	}
	if n := r.eng.Marks()[engine.MarkBitmapUnreadable]; n != 1 {
		t.Fatalf("bitmap-unreadable passed %d times, want 1", n)
	}
	if _, ok := r.store.Object(strings.TrimSuffix(key, ".scbl")); !ok || r.eng.Stats().LiveSegments != 1 {
		t.Fatal("the segment was deleted although its bitmap was unreadable")
	}
}

// A body larger than the whole cache is streamed in ranged reads, checked
// against its marker, and applied from the windows kept.
func TestStreamedBodyWhenCacheIsSmall(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.memory = 256 << 10 // cache of about 36 KiB
	dest, _ := withSink(r)
	r.start()
	vals := make([]int64, 8000) // a 64 KB body
	for i := range vals {
		vals[i] = int64(i)
	}
	res := r.submit(unit("big", vals...))
	r.until(func() bool { return res.done && r.eng.Drained() }, "drain")
	if got := destValues(dest)["big"]; !slices.Equal(got, vals) {
		t.Fatalf("destination has %d rows, want %d", len(got), len(vals))
	}
	if n := r.store.Counts(sim.OpGet).Issued; n < 10 {
		t.Fatalf("%d GETs: the body was not streamed in chunks", n)
	}
}

// Corrupted slice bytes (with checksums resealed so only the slice
// decoder can tell) refuse the job: alert, segment kept, lane stopped.
func TestCorruptSliceIsRefused(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.FenceWait = 0
	u := unit("cdc", 1, 2, 3)
	u.Sidecar = &segment.Sidecar{Rows: []segment.CDCRow{{Kind: segment.Insert}, {Kind: segment.Update}, {Kind: segment.Delete}}}
	body, marker := corruptSidecar(t, u)
	dir := engine.NewLayout("wal", "test").SegmentDir(r.sched.WallUnixMs())
	id := engine.SnapshotID{Epoch: 0, Seq: 1}
	r.putObject(dir+id.String()+".seg", body)
	r.putObject(dir+id.String()+".seg.commit", marker)
	dest, _ := withSink(r)
	r.start()
	r.settle()
	if len(dest.Applied()) != 0 || r.eng.Stats().Alerts == 0 || r.eng.Stats().LiveSegments != 1 {
		t.Fatalf("applied %d, alerts %d, live %d", len(dest.Applied()), r.eng.Stats().Alerts, r.eng.Stats().LiveSegments)
	}
}

// corruptSidecar encodes u as a segment, flips the first CDC row's kind to
// an invalid one, and reseals the body's checksum and the marker.
func corruptSidecar(t *testing.T, u engine.Unit) (body, marker []byte) {
	t.Helper()
	var buf strings.Builder
	ix, err := segment.Encode(&writerAdapter{&buf}, 0, nil,
		[]segment.Part{{Key: u.Key, Schema: u.Schema, Batches: u.Batches, Sidecar: u.Sidecar}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(buf.String())
	body[ix.Entries[0].SidecarStart+10] = 9 // header: magic 4, version 2, row count 4
	sum := sha256.Sum256(body[:len(body)-32])
	copy(body[len(body)-32:], sum[:])
	ix.BodySum = sum
	marker, err = segment.EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	return body, marker
}

// A marker write that timed out but lands late must not come back after
// its segment was reclaimed: reclaim waits out the request lifetime
// (found by the simulator: the resurrected marker had no body, and the
// next recovery failed closed).
func TestLateMarkerDoesNotOutliveReclaim(t *testing.T) {
	r := newRig(t, sim.StoreConfig{AmbiguousLandMax: 400 * time.Millisecond})
	r.cfg.FenceWait = 500 * time.Millisecond // the store's request lifetime
	dest, _ := withSink(r)
	r.start()
	// The first marker PUT is ambiguous: it lands up to 400 ms after the error.
	r.faults = sim.StoreRules(sim.StoreFault(sim.AmbiguousApplied, sim.OpPut).Key(isMarker).Nth(1))
	res := r.submit(unit("a", 1))
	r.until(func() bool { return res.done }, "ack")
	r.settle()
	if len(r.walKeys()) != 0 {
		t.Fatalf("WAL not empty: %v (a late marker came back)", r.walKeys())
	}
	if got := destValues(dest); !slices.Equal(got["a"], []int64{1}) {
		t.Fatalf("destination %v", got)
	}
	r.start() // must recover cleanly
}

// closeEngine closes the rig's engine and steps until it answers.
func (r *rig) closeEngine() error {
	r.t.Helper()
	var closed bool
	var closeErr error
	r.eng.Close(func(err error) { closed, closeErr = true, err })
	r.until(func() bool { return closed }, "close")
	return closeErr
}

// A graceful close drains: what it commits is applied and reclaimed
// before it answers, so a clean stop leaves the lake complete and the
// WAL empty.
func TestCloseAppliesAndReclaims(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	closeDrains(t, r, 5)
}

// closeDrains starts r with a memory sink, submits events 0..n-1 and
// closes at once: every unit must be acked, applied once and reclaimed
// when Close answers.
func closeDrains(t *testing.T, r *rig, n int) {
	t.Helper()
	dest, _ := withSink(r)
	r.start()
	var units []*result
	for i := range n {
		units = append(units, r.submit(unit("events", int64(i))))
	}
	if err := r.closeEngine(); err != nil {
		t.Fatal(err)
	}
	for i, u := range units {
		if !u.done || u.err != nil {
			t.Fatalf("unit %d: %+v", i, u)
		}
	}
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(0, n)) {
		t.Fatalf("after close the destination holds %v, want 0..%d once each", got, n-1)
	}
	if keys := r.walKeys(); len(keys) != 0 {
		t.Fatalf("after close the WAL holds %v; stats %+v", keys, r.eng.Stats())
	}
}

// A close waits for reclaims only its StopGrace from its start: a job
// that runs past the default grace leaves its segment to the next start;
// a longer grace lets the close reclaim it.
func TestStopGraceBoundsTheClosesReclaims(t *testing.T) {
	for _, tc := range []struct {
		grace time.Duration
		left  bool
	}{{0, true}, {30 * time.Second, false}} {
		r := newRig(t, sim.StoreConfig{})
		r.cfg.StopGrace = tc.grace
		dest, cs := withSink(r)
		cs.delay = engine.CloseReclaimGrace + 2*time.Second
		r.start()
		u := r.submit(unit("events", 7))
		if err := r.closeEngine(); err != nil || !u.done || u.err != nil {
			t.Fatalf("grace %v: close %v, unit %+v", tc.grace, err, u)
		}
		if got := destValues(dest)["events"]; !slices.Equal(got, []int64{7}) {
			t.Fatalf("grace %v: destination %v, want the unit once: jobs run to their end", tc.grace, got)
		}
		if left := len(r.walKeys()) > 0; left != tc.left {
			t.Fatalf("grace %v: WAL after close %v, want a segment left %v", tc.grace, r.walKeys(), tc.left)
		}
	}
}

// A sink that fails does not hold a graceful close: each job is tried
// once more at most, the segment stays in the WAL, and the next start
// applies it.
func TestCloseDoesNotWaitForAFailingSink(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, cs := withSink(r)
	r.start()
	cs.down["events"] = true
	u := r.submit(unit("events", 7))
	if err := r.closeEngine(); err != nil {
		t.Fatal(err)
	}
	if !u.done || u.err != nil {
		t.Fatalf("unit %+v", u)
	}
	if len(r.walKeys()) == 0 || len(destValues(dest)["events"]) != 0 {
		t.Fatalf("sink down: WAL %v, destination %v", r.walKeys(), destValues(dest))
	}
	r.inc.Kill()
	cs.down["events"] = false
	r.start()
	r.until(func() bool { return r.eng.Drained() && len(r.walKeys()) == 0 }, "drain after restart")
	if got := destValues(dest)["events"]; !slices.Equal(got, []int64{7}) {
		t.Fatalf("destination %v, want the unit once", got)
	}
}

// With one job at a time, compaction takes the oldest segment's jobs
// first across lanes, so segments complete (and are reclaimed) in order
// instead of one busy lane starving the others.
func TestCompactionOldestSegmentFirst(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CompactionConcurrency = 1
	dest, cs := withSink(r)
	cs.delay = 10 * time.Second // every segment commits while the first job runs
	r.start()
	for i := range 6 {
		a := r.submit(unit("events", int64(i)))
		b := r.submit(unit("orders", int64(i)))
		r.until(func() bool { return a.done && b.done }, "ack")
	}
	r.until(func() bool { return r.eng.Drained() }, "drain")
	applied := dest.Applied()
	if len(applied) != 12 {
		t.Fatalf("%d jobs applied, want 12", len(applied))
	}
	for i := 1; i < len(applied); i++ {
		if applied[i].Segment.Less(applied[i-1].Segment) {
			t.Fatalf("job %d (%s, segment %s) applied after one of segment %s: not oldest first",
				i, applied[i].Namespace, applied[i].Segment, applied[i-1].Segment)
		}
	}
}

// A sink that is down fills the WAL up to LiveSegmentsMax, then ingest is
// refused (backpressure) until reclaim frees room.
func TestWALBacklogIsBounded(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.LiveSegmentsMax = 3
	_, cs := withSink(r)
	r.start()
	cs.down["events"] = true
	for i := range 3 {
		res := r.submit(withOffset(unit("events", int64(i)), "src/events", uint64(i+1)))
		r.until(func() bool { return res.done }, "ack")
		if res.err != nil {
			t.Fatalf("unit %d: %v", i, res.err)
		}
	}
	refused := r.submit(unit("events", 3))
	r.until(func() bool { return refused.done }, "answer")
	if !errors.Is(refused.err, engine.ErrResourceExhausted) || !strings.Contains(refused.err.Error(), "WAL backlog of 3 segments") {
		t.Fatalf("4th unit: %v, want a WAL backlog refusal", refused.err)
	}
	if n := len(r.eng.Segments()); n != 3 {
		t.Fatalf("%d segments owned, limit 3", n)
	}
	// A unit the offsets already cover takes no room: acked at once.
	replayed := r.submit(withOffset(unit("events", 0), "src/events", 1))
	r.until(func() bool { return replayed.done }, "the replay's answer")
	if replayed.err != nil {
		t.Fatalf("a covered unit under backpressure: %v", replayed.err)
	}
	cs.down["events"] = false
	r.until(func() bool { return r.eng.Drained() }, "drain")
	again := r.submit(unit("events", 3))
	r.until(func() bool { return again.done }, "ack")
	if again.err != nil {
		t.Fatalf("after the drain: %v", again.err)
	}
}

// A superseded writer that is still running does not delete what its
// successor owns: before a reclaim deletes, it reads the writer object,
// finds the newer claim and fails closed, leaving the segment in place.
func TestZombieDoesNotReclaim(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	old := r.start()
	cs.down["events"] = true // the segment stays unapplied for now
	res := r.submit(unit("events", 1))
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		t.Fatal(res.err)
	}
	r.inc = nil // keep the old incarnation running: a zombie
	r.sinksFor = nil
	fresh := r.start() // recovers (no sinks: it only owns)
	if len(fresh.Segments()) != 1 {
		t.Fatalf("the successor owns %d segments", len(fresh.Segments()))
	}
	cs.down["events"] = false // the zombie applies, then wants to reclaim
	r.until(func() bool { return old.Err() != nil }, "the zombie fails closed")
	if !errors.Is(old.Err(), engine.ErrFenced) || old.Marks()[engine.MarkFencedBeforeReclaim] != 1 {
		t.Fatalf("zombie: %v, fenced-before-reclaim %d", old.Err(), old.Marks()[engine.MarkFencedBeforeReclaim])
	}
	if r.markers() != 1 {
		t.Fatalf("%d markers left; the successor's segment was deleted under it", r.markers())
	}
}

// A segment reclaimed by another writer (body and marker gone) is
// dropped by the writer that still thought it owned it, which then
// drains; a marker whose body is gone is corruption and is refused.
func TestSegmentReclaimedElsewhere(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	r.start()
	cs.down["events"] = true
	res := r.submit(unit("events", 1))
	r.until(func() bool { return res.done }, "ack")
	eng := r.start() // a new incarnation with an empty cache: it must read the body
	for _, k := range r.walKeys() {
		r.store.Remove(k) // what the previous owner's reclaim does
	}
	cs.down["events"] = false
	r.until(func() bool { return eng.Drained() }, "drain")
	if eng.Marks()[engine.MarkReclaimedElsewhere] != 1 || eng.LastAlert() != nil {
		t.Fatalf("reclaimed-elsewhere %d, alert %v", eng.Marks()[engine.MarkReclaimedElsewhere], eng.LastAlert())
	}

	r2 := newRig(t, sim.StoreConfig{})
	_, cs2 := withSink(r2)
	r2.start()
	cs2.down["events"] = true
	res = r2.submit(unit("events", 1))
	r2.until(func() bool { return res.done }, "ack")
	eng = r2.start()
	for _, k := range r2.walKeys() {
		if strings.HasSuffix(k, ".seg") {
			r2.store.Remove(k) // the body only
		}
	}
	cs2.down["events"] = false
	r2.until(func() bool { return eng.LastAlert() != nil }, "an alert")
	if !errors.Is(eng.LastAlert(), engine.ErrCorrupt) || len(eng.Segments()) != 1 {
		t.Fatalf("alert %v, %d segments owned", eng.LastAlert(), len(eng.Segments()))
	}
}

// A streamed body whose chunks come back damaged now and then — some chunk
// in every pass — is still read: later passes take a chunk once two reads
// of it agree. (A body damaged in the store: TestCorruptSliceIsRefused.)
func TestStreamSurvivesDamagedChunks(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.memory = 256 << 10 // cache of about 36 KiB: the body streams in 4 KiB chunks
	dest, _ := withSink(r)
	r.start()
	vals := make([]int64, 8000)
	for i := range vals {
		vals[i] = int64(i)
	}
	gets := 0
	r.corrupt = func(string) (int64, bool) {
		gets++
		return int64(gets * 2), gets%7 == 3 // a flipped bit in one read of seven
	}
	res := r.submit(unit("big", vals...))
	r.until(func() bool { return res.done && r.eng.Drained() }, "drain")
	if got := destValues(dest)["big"]; !slices.Equal(got, vals) {
		t.Fatalf("destination has %d rows, want %d", len(got), len(vals))
	}
	m := r.eng.Marks()
	if m[engine.MarkChunkReread] == 0 || m[engine.MarkBodyMismatch] == 0 || r.eng.LastAlert() != nil {
		t.Fatalf("chunk-reread %d, body-checksum-mismatch %d, alert %v", m[engine.MarkChunkReread], m[engine.MarkBodyMismatch], r.eng.LastAlert())
	}
}
