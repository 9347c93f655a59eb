package engine_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
)

// submitEach submits units one after the other, each acked (committed)
// before the next: one segment each.
func (r *rig) submitEach(ns string, from, n int) {
	r.t.Helper()
	for i := range n {
		v := int64(from + i)
		res := r.submit(unit(ns, v))
		r.until(func() bool { return res.done }, "ack")
		if res.err != nil {
			r.t.Fatalf("unit %d: %v", v, res.err)
		}
	}
}

func seq(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// maxSpan is the most segments one applied job held.
func (cs *countingSink) maxSpan() (n int) {
	for _, s := range cs.spans {
		n = max(n, s)
	}
	return n
}

// Jobs cut by size hold the PARTs of several segments: one file for many
// segments, every row once and in order, and every segment reclaimed.
func TestSpanningJobsCutBySize(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 2 << 10, FlushInterval: time.Hour}
	dest, cs := withSink(r)
	eng := r.start()
	r.submitEach("events", 0, 24)
	r.until(func() bool { return eng.Stats().JobsApplied >= 2 }, "jobs cut by size")
	if got := eng.Marks()[engine.MarkCutSize]; got == 0 {
		t.Fatal("no job cut by size")
	}
	if cs.maxSpan() < 2 {
		t.Fatalf("jobs held at most %d segments, want several: %v", cs.maxSpan(), cs.spans)
	}
	if applied, segs := eng.Stats().JobsApplied, r.markers()+int(eng.Stats().SegmentsReclaimed); applied*2 > uint64(segs) {
		t.Fatalf("%d jobs for %d segments: jobs do not span", applied, segs)
	}
	closeEngine(t, r)
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(0, 24)) {
		t.Fatalf("destination holds %v, want 0..23 once each, in order", got)
	}
	if keys := r.walKeys(); len(keys) != 0 {
		t.Fatalf("the WAL still holds %v", keys)
	}
}

// closeEngine closes the rig's engine gracefully and waits for the answer.
func closeEngine(t *testing.T, r *rig) {
	t.Helper()
	var closed bool
	var err error
	r.eng.Close(func(e error) { closed, err = true, e })
	r.until(func() bool { return closed }, "close")
	if err != nil {
		t.Fatalf("close: %v", err)
	}
}

// A quiet lane is cut by its flush interval, by a segment that carries
// only the cut when nothing else is written.
func TestSpanningJobCutByInterval(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: 5 * time.Second}
	dest, cs := withSink(r)
	eng := r.start()
	r.submitEach("events", 0, 3)
	r.sched.RunUntil(r.sched.Now() + 3*time.Second)
	if n := eng.Stats().JobsApplied; n != 0 {
		t.Fatalf("%d jobs applied before the interval ran out", n)
	}
	r.until(func() bool { return eng.Stats().JobsApplied == 1 }, "the interval cut")
	r.until(func() bool { return eng.Drained() && len(r.walKeys()) == 0 }, "reclaim")
	m := eng.Marks()
	if m[engine.MarkCutInterval] != 1 || m[engine.MarkCutOnlySegment] != 1 {
		t.Fatalf("interval cuts %d, cut-only segments %d; want 1 and 1", m[engine.MarkCutInterval], m[engine.MarkCutOnlySegment])
	}
	if cs.maxSpan() != 3 {
		t.Fatalf("the job held %d segments, want 3", cs.maxSpan())
	}
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("destination holds %v", got)
	}
}

// A graceful close cuts every open job: nothing waits for a next start.
func TestCloseCutsOpenJobs(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	dest, _ := withSink(r)
	eng := r.start()
	r.submitEach("events", 0, 4)
	r.submitEach("pageviews", 100, 2)
	closeEngine(t, r)
	if m := eng.Marks(); m[engine.MarkCutClose] != 2 {
		t.Fatalf("close cuts %d, want 2 (one per lane)", m[engine.MarkCutClose])
	}
	got := destValues(dest)
	if !slices.Equal(got["events"], seq(0, 4)) || !slices.Equal(got["pageviews"], seq(100, 2)) {
		t.Fatalf("destination holds %v", got)
	}
	if keys := r.walKeys(); len(keys) != 0 {
		t.Fatalf("the WAL still holds %v after a close", keys)
	}
}

// A crash after a spanning job was applied but before any of its bits
// were written: recovery forms the same job from the committed cut — the
// same PARTs, the same id — and the sink, finding the id, holds the rows
// once.
func TestSpanningJobReplayedAfterCrash(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 2 << 10, FlushInterval: time.Hour}
	r.cfg.BitmapDelay = time.Hour // the crash comes before any bitmap is written
	dest, cs := withSink(r)
	deletesFail := true // no segment is reclaimed before the crash
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpDelete).While(&deletesFail))
	r.start()
	r.submitEach("events", 0, 12)
	r.until(func() bool { return len(cs.applies) > 1 }, "spanning jobs applied")
	ids := map[string]int{}
	for id, n := range cs.applies {
		if n > 0 && cs.spans[id] > 1 {
			ids[id] = cs.spans[id]
		}
	}
	if len(ids) == 0 {
		t.Fatalf("no spanning job applied: %v", cs.spans)
	}
	second := r.start() // a crash
	deletesFail = false
	r.until(func() bool { return second.Drained() && len(r.walKeys()) == 0 }, "drain after the crash")
	for id, span := range ids {
		if cs.applies[id] != 2 || cs.spans[id] != span {
			t.Fatalf("job %s applied %d times holding %d segments after the crash; want 2, %d (applies %v, recovery marks: found applied %d, replayed %d)",
				id, cs.applies[id], cs.spans[id], span, cs.applies, second.Marks()[engine.MarkCutFoundApplied], second.Marks()[engine.MarkCutReplayed])
		}
	}
	if second.Marks()[engine.MarkCutReplayed] == 0 {
		t.Fatal("recovery replayed no cut")
	}
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(0, 12)) {
		t.Fatalf("destination holds %v, want 0..11 once each", got)
	}
}

// The pressure valve cuts jobs that pin the oldest segments, so lanes
// waiting to fill a file never hold the WAL at its limit: ingest goes on
// without backpressure.
func TestValveCutsPinningJobs(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.LiveSegmentsMax, r.cfg.ValveSegments = 8, 4
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	dest, _ := withSink(r)
	eng := r.start()
	for i := range 20 {
		r.submitEach("events", i, 1)
		if live := eng.Stats().LiveSegments; live > 5 {
			t.Fatalf("%d segments live after unit %d, valve at 4", live, i)
		}
	}
	st := eng.Stats()
	if eng.Marks()[engine.MarkCutValve] == 0 || eng.Marks()[engine.MarkBackpressureWAL] != 0 {
		t.Fatalf("valve cuts %d, WAL backpressure %d; want some and none", eng.Marks()[engine.MarkCutValve], eng.Marks()[engine.MarkBackpressureWAL])
	}
	closeEngine(t, r)
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(0, 20)) {
		t.Fatalf("destination holds %v (jobs %d)", got, st.JobsApplied)
	}
}

// A schema change in a lane cuts its open job: a file holds one schema.
func TestShapeChangeCutsTheLane(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	_, cs := withSink(r)
	eng := r.start()
	r.submitEach("events", 0, 3)
	wide := renamed(unit("events", 99)) // another schema: the same lane, another group
	res := r.submit(wide)
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		t.Fatal(res.err)
	}
	r.until(func() bool { return eng.Stats().JobsApplied == 1 }, "the shape cut")
	if eng.Marks()[engine.MarkCutShape] == 0 || cs.maxSpan() != 3 {
		t.Fatalf("shape cuts %d, the job held %d segments; want some, 3", eng.Marks()[engine.MarkCutShape], cs.maxSpan())
	}
}

// renamed is u with its column renamed: another schema.
func renamed(u engine.Unit) engine.Unit {
	s := arrow.NewSchema([]arrow.Field{{Name: "w", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := u.Batches[0]
	u.Schema, u.Key.Schema = s, segment.FingerprintOf(s)
	u.Batches = []arrow.RecordBatch{array.NewRecordBatch(s, b.Columns(), b.NumRows())}
	return u
}

// legacyV2ID is the id of a job of a version 2 segment, as the builds
// that wrote them computed it (pinned by TestUpgradeFromVersion2).
func legacyV2ID(o segment.Origin, id engine.SnapshotID, sinkRef string, ordinals ...uint32) string {
	h := sha256.New()
	h.Write([]byte("skipprd-job 2\x00"))
	h.Write(o.WAL[:])
	h.Write([]byte(o.Pipeline + "\x00" + id.String() + "\x00" + sinkRef + "\x00"))
	for _, ord := range ordinals {
		h.Write(binary.LittleEndian.AppendUint32(nil, ord))
	}
	return o.Pipeline + "-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// putV2Segment stores a segment as a build before spanning jobs committed
// it: body, and a version 2 marker (origin, no cuts).
func (r *rig) putV2Segment(o segment.Origin, id engine.SnapshotID, u engine.Unit, offsets segment.Offsets) {
	r.t.Helper()
	var buf bytes.Buffer
	ix, err := segment.Encode(&buf, r.sched.WallUnixMs(), offsets, []segment.Part{{Key: u.Key, Schema: u.Schema, Batches: u.Batches}}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	ix.Origin = o
	marker, err := segment.EncodeMarker(ix)
	if err != nil || binary.LittleEndian.Uint16(marker[4:]) != segment.MarkerVersionOrigin {
		r.t.Fatalf("version 2 marker: %v (version %d)", err, binary.LittleEndian.Uint16(marker[4:]))
	}
	dir := engine.NewLayout("wal", o.Pipeline).SegmentDir(r.sched.WallUnixMs())
	r.putObject(dir+id.String()+".seg", buf.Bytes())
	r.putObject(dir+id.String()+".seg.commit", marker)
}

// An upgrade across a crash from a build before spanning jobs: its
// version 2 segments keep one job per segment under the ids they had
// (the formula is pinned), through an apply, a crash before any bitmap
// was written and the replay after it; the segments this build commits
// after them span.
func TestUpgradeFromVersion2(t *testing.T) {
	wal := segment.WALID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	o := segment.Origin{WAL: wal, Pipeline: "test"}
	if got, want := legacyV2ID(o, engine.SnapshotID{Epoch: 1, Seq: 1}, "lake", 0), "test-b4eed1aea5bb6fdb21c96f0f5c8f408c"; got != want {
		t.Fatalf("version 2 id formula %s, the released one gives %s", got, want)
	}
	r := newRig(t, sim.StoreConfig{})
	r.cfg.BitmapDelay = time.Hour
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	dest, cs := withSink(r)
	r.putObject(engine.NewLayout("wal", "test").WriterKey(), engine.EncodeWriterObjectWAL(1, 7, wal))
	old := []engine.SnapshotID{{Epoch: 1, Seq: 1}, {Epoch: 1, Seq: 2}}
	for i, id := range old {
		r.putV2Segment(o, id, unit("events", int64(10*i)), segment.Offsets{{Key: "src/p", Value: uint64(i + 1)}})
	}
	r.start()
	r.until(func() bool { return len(dest.Applied()) == 2 }, "the version 2 jobs applied")
	second := r.start() // a crash: no bit was written
	r.submitEach("events", 100, 2)
	closeEngine(t, r)
	for _, id := range old {
		if want := legacyV2ID(o, id, "lake", 0); cs.applies[want] != 2 {
			t.Fatalf("version 2 job %s of %s applied %d times, want 2 (before and after the crash): %v", want, id, cs.applies[want], cs.applies)
		}
	}
	if second.Marks()[engine.MarkCutClose] != 1 || cs.maxSpan() != 2 {
		t.Fatalf("close cuts %d, widest job %d segments; want the new segments in one job", second.Marks()[engine.MarkCutClose], cs.maxSpan())
	}
	if got := destValues(dest)["events"]; !slices.Equal(got, []int64{0, 10, 100, 101}) {
		t.Fatalf("destination holds %v, want each row once", got)
	}
}

// A segment that holds only a cut is not reclaimed while its job's bits
// are not durable in an earlier segment the job spans: after a crash that
// segment's PARTs would have no cut to say which job they belong to, join
// the next, and reach the sink twice. Here the job's second segment also
// holds a lane whose sink is down, so it stays, with bits in memory only.
func TestCutSegmentWaitsForDurableBits(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.BitmapDelay = time.Hour // no bitmap is written before the crash
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: 2 * time.Second}
	dest, cs := withSink(r)
	cs.down["held"] = true
	eng := r.start()
	r.submitEach("events", 1, 1)
	a, b := r.submit(unit("events", 2)), r.submit(unit("held", -1))
	r.until(func() bool { return a.done && b.done }, "acks")
	r.until(func() bool { return eng.Stats().JobsApplied == 1 }, "the events job, cut by its interval")
	r.sched.RunUntil(r.sched.Now() + 10*time.Second)
	waited := eng.Marks()[engine.MarkReclaimWaitsCut]
	second := r.start() // a crash: the first segment's events bit was never written
	delete(cs.down, "held")
	closeEngine(t, r)
	if got := destValues(dest)["events"]; !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("destination holds events %v, want 1 and 2 once each (recovery: found applied %d, replayed %d)",
			got, second.Marks()[engine.MarkCutFoundApplied], second.Marks()[engine.MarkCutReplayed])
	}
	if waited == 0 {
		t.Fatal("the cut's segment did not wait")
	}
}

// A restart under limits that make a job per segment (a sink switched to
// file_bytes 0, or a drain) cuts the jobs the last run left open at once,
// with nothing written: they do not wait for the next segment.
func TestRestartWithoutLimitsCutsOpenJobs(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	dest, _ := withSink(r)
	r.start()
	r.submitEach("events", 0, 3)
	r.cfg.DefaultLanes = engine.LaneLimits{}
	second := r.start() // a crash, then a start without limits
	r.until(func() bool { return second.Drained() && len(r.walKeys()) == 0 }, "the open job cut and applied")
	if second.Marks()[engine.MarkCutOnlySegment] != 1 {
		t.Fatalf("cut-only segments %d, want 1", second.Marks()[engine.MarkCutOnlySegment])
	}
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("destination holds %v", got)
	}
}

// A segment whose bitmap rots after an earlier spanning job of a lane was
// applied and that job's cut reclaimed: its PART of the lane looks open
// at recovery, before a live cut of the next job. Jobs are cut in lane
// order, so the PART was in the applied job: recovery settles it as
// applied (lost-bits-inferred) — it neither fails closed nor delivers the
// PART again — keeps the segment, and alerts (seed 26 found it). Its
// PART of another lane, which no live cut bounds, may or may not have
// been applied: the job that takes it is refused, never delivered.
func TestLostBitmapBeforeALiveCut(t *testing.T) {
	r, dest, cs, firstBitmap := firstJobApplied(t)
	eng := r.eng
	cs.down["events"] = true
	r.submitEach300(601)
	r.submitEach300(901)
	r.sched.RunUntil(r.sched.Now() + 5*time.Second) // the second events job is cut, not applied
	if eng.Stats().JobsApplied != 1 {
		t.Fatalf("%d jobs applied before the crash, want 1", eng.Stats().JobsApplied)
	}
	r.putObject(firstBitmap, []byte("not a bitmap"))
	second := r.start() // a crash
	delete(cs.down, "events")
	closeEngine(t, r) // applies the second events job, cuts held's
	if n := second.Marks()[engine.MarkLostBitsInferred]; n != 1 {
		t.Fatalf("lost-bits-inferred passed %d times, want 1", n)
	}
	got := destValues(dest)
	if !slices.Equal(got["events"], seq(1, 1200)) || len(got["held"]) != 0 {
		t.Fatalf("destination holds %d events (want 1..1200 once each) and held %v (want none: refused)", len(got["events"]), got["held"])
	}
	if n := second.Marks()[engine.MarkJobRefused]; n != 1 {
		t.Fatalf("job-refused passed %d times, want 1 (held's job)", n)
	}
	if !errors.Is(second.LastAlert(), engine.ErrCorrupt) {
		t.Fatalf("no alert for the unreadable bitmap: %v", second.LastAlert())
	}
	if _, ok := r.store.Object(strings.TrimSuffix(firstBitmap, ".scbl")); !ok {
		t.Fatal("the segment whose bitmap was unreadable was deleted")
	}
}

// firstJobApplied starts a rig whose lanes cut jobs at 4 KiB, with a
// first segment of events 1..300 and one held row (whose lane stays open,
// far below its file size, and keeps the segment live) and a second of
// events 301..600; it returns once the events job the second segment cut
// is applied and that segment reclaimed, with the first segment's bitmap
// key.
func firstJobApplied(t *testing.T) (*rig, *sinks.Memory, *countingSink, string) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.BitmapDelay = 10 * time.Millisecond
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 4 << 10, FlushInterval: time.Hour}
	dest, cs := withSink(r)
	eng := r.start()
	a, b := r.submit(unit("events", seq(1, 300)...)), r.submit(unit("held", -1))
	r.until(func() bool { return a.done && b.done }, "acks of the first segment")
	r.submitEach300(301)
	r.until(func() bool { return eng.Stats().JobsApplied == 1 && eng.Stats().LiveSegments == 1 },
		"the first events job (cut by size in the second segment) applied, the second segment reclaimed")
	return r, dest, cs, r.bitmapKey() // the first segment's, the one left
}

// submitEach300 submits events from..from+299 as one unit, acked before
// it returns: a segment.
func (r *rig) submitEach300(from int) {
	r.t.Helper()
	res := r.submit(unit("events", seq(from, 300)...))
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		r.t.Fatalf("events from %d: %v", from, res.err)
	}
}

// A segment whose bitmap rots after a spanning job applied its PART and
// that job's cut was reclaimed, with no later cut live: at recovery the
// PART looks open and joins its lane's next job. Whether it was applied
// is unknown, so that job is refused — its lane stops, with an alert —
// rather than deliver the PART's rows a second time.
func TestLostBitmapWithoutALiveCutStopsTheLane(t *testing.T) {
	r, dest, _, firstBitmap := firstJobApplied(t)
	r.putObject(firstBitmap, []byte("not a bitmap"))
	second := r.start() // a crash
	r.submitEach300(601)
	r.submitEach300(901) // the next events job, cut by size, takes the first segment's PART
	r.settle()
	if got := destValues(dest)["events"]; !slices.Equal(got, seq(1, 600)) {
		t.Fatalf("destination holds %d events, want 1..600 once each (the first segment's PART not again, the next job refused)", len(got))
	}
	if n := second.Marks()[engine.MarkJobRefused]; n != 1 {
		t.Fatalf("job-refused passed %d times, want 1", n)
	}
	if !errors.Is(second.LastAlert(), engine.ErrCorrupt) {
		t.Fatalf("no corruption alert: %v", second.LastAlert())
	}
}

// A segment whose bitmap rots after its lane's job was applied and that
// job's cut reclaimed, the lane's schema having changed since: at
// recovery the rotted PART looks open in its group while a later live
// segment opens another group of the lane — two open jobs. The later
// group proves the first job was cut before it (else that segment would
// carry the first group's shape cut), so the PART was applied: recovery
// settles it (lost-bits-inferred) rather than fail closed (seed 5591).
// The held PART of that segment, which nothing bounds, is refused.
func TestLostBitmapBeforeAShapeChange(t *testing.T) {
	r, dest, _, firstBitmap := firstJobApplied(t)
	res := r.submit(renamed(unit("events", 2000))) // another group of the lane, left open
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if n := r.eng.Marks()[engine.MarkCutShape]; n != 0 {
		t.Fatalf("%d shape cuts before the crash, want none: the first group's job was applied, none open", n)
	}
	r.putObject(firstBitmap, []byte("not a bitmap"))
	second := r.start() // a crash
	closeEngine(t, r)   // cuts and applies the renamed group's job
	if n := second.Marks()[engine.MarkLostBitsInferred]; n != 1 {
		t.Fatalf("lost-bits-inferred passed %d times, want 1", n)
	}
	if n := second.Marks()[engine.MarkJobRefused]; n != 1 {
		t.Fatalf("job-refused passed %d times, want 1 (held's: no live cut bounds its rotted PART)", n)
	}
	got := destValues(dest)
	if want := append(seq(1, 600), 2000); !slices.Equal(got["events"], want) || len(got["held"]) != 0 {
		t.Fatalf("destination holds %d events (want 1..600 and 2000 once each) and held %v (want none: refused)", len(got["events"]), got["held"])
	}
}

// A rotted PART whose lane's later live segment holds the PART's own
// group again proves nothing about it: their job may be the one still
// open. It is never taken as applied (settleShaped looks only at other
// groups); the job that holds it is refused, its lane stopped.
func TestLostBitmapBeforeItsOwnGroupStopsTheLane(t *testing.T) {
	r, dest, _, firstBitmap := firstJobApplied(t)
	res := r.submit(unit("held", -2)) // held's group again, in a later segment
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		t.Fatal(res.err)
	}
	r.putObject(firstBitmap, []byte("not a bitmap"))
	second := r.start() // a crash
	closeEngine(t, r)   // cuts held's job (the rotted PART and the later one), and events'
	if n := second.Marks()[engine.MarkJobRefused]; n != 2 {
		t.Fatalf("job-refused passed %d times, want 2: held's and events', each holding a rotted PART", n)
	}
	if got := destValues(dest); len(got["held"]) != 0 || !slices.Equal(got["events"], seq(1, 600)) {
		t.Fatalf("destination holds held %v (want none: its job holds a PART that may have been applied) and %d events (want 1..600)",
			got["held"], len(got["events"]))
	}
}
