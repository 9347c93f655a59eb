package engine_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// WAL identities (docs/DESIGN.md §8.1, §11): every log gets one at its
// first claim, keeps it across incarnations, and puts it in every marker
// and every compaction id; segments committed before identities keep the
// ids they had.

// writerWAL reads the log's identity from the writer object.
func (r *rig) writerWAL(pipeline string) segment.WALID {
	r.t.Helper()
	raw, ok := r.store.Object(engine.NewLayout("wal", pipeline).WriterKey())
	if !ok {
		r.t.Fatal("no writer object")
	}
	rec, err := engine.ParseWriterObject(raw)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec.WAL()
}

// markerOrigins decodes every marker of a pipeline and returns their
// origins.
func (r *rig) markerOrigins(pipeline string) []segment.Origin {
	r.t.Helper()
	var out []segment.Origin
	for _, key := range r.store.Keys(engine.NewLayout("wal", pipeline).SegmentsPrefix()) {
		if !isMarker(key) {
			continue
		}
		raw, _ := r.store.Object(key)
		ix, err := segment.DecodeMarker(key, raw)
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, ix.Origin)
	}
	return out
}

func TestLogIdentityIsKeptAcrossIncarnations(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	var wal segment.WALID
	for i := range 3 {
		r.start()
		res := r.submit(unit("events", int64(i)))
		r.until(func() bool { return res.done }, "ack")
		got := r.writerWAL("test")
		if i == 0 {
			wal = got
		}
		if got.IsZero() || got != wal {
			t.Fatalf("incarnation %d: writer object WAL id %s, first incarnation's %s", i+1, got, wal)
		}
	}
	r.until(func() bool { return len(dest.Applied()) == 3 }, "three jobs applied")
	for _, o := range r.markerOrigins("test") {
		if o != (segment.Origin{WAL: wal, Pipeline: "test"}) {
			t.Fatalf("a marker's origin is %v, want pipeline test, WAL %s", o, wal)
		}
	}
	for _, j := range dest.Applied() {
		if !strings.HasPrefix(j.ID, "test-") || len(j.ID) != len("test-")+32 || j.Origin.WAL != wal || len(j.Content) != 32 {
			t.Fatalf("job %q (content %q, origin %v): want test-{32 hex} of WAL %s", j.ID, j.Content, j.Origin, wal)
		}
	}
}

// secondEngine starts an engine for another pipeline on the rig's store,
// with its own incarnation and its own sinks, and runs its recovery.
func (r *rig) secondEngine(pipeline string, sinks engine.Sinks) (*engine.Engine, *sim.Incarnation) {
	r.t.Helper()
	cfg := r.cfg
	cfg.Pipeline = pipeline
	inc := r.sched.NewIncarnation()
	eng, err := engine.New(cfg, engine.Ports{Clock: r.sched.Clock(), Rand: r.root.Split("engine/" + pipeline),
		Timers: inc.Timers(), Exec: inc.Executor(), Store: r.store.Client(inc), Memory: r.memory, Sinks: sinks})
	if err != nil {
		r.t.Fatal(err)
	}
	var done bool
	var startErr error
	eng.Start(func(err error) { done, startErr = true, err })
	r.until(func() bool { return done }, "recovery of "+pipeline)
	if startErr != nil {
		r.t.Fatalf("recovery of %s: %v", pipeline, startErr)
	}
	return eng, inc
}

// Two pipelines, two logs on one store, one destination: both commit
// snapshot 000000000001-000000000001 of namespace events, and both jobs
// land, under different ids (before WAL identities the second was taken
// for the first, already applied, and its rows were lost).
func TestTwoLogsShareADestination(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	r.start()
	b, bInc := r.secondEngine("b", oneSink{dest.Sink(r.sched.NewIncarnation().Timers())})
	resA := r.submit(unit("events", 1, 2))
	resB := &result{}
	b.Submit(unit("events", 3, 4, 5), func(err error) { resB.done, resB.err = true, err })
	r.until(func() bool { return resA.done && resB.done && len(dest.Applied()) == 2 }, "both pipelines applied")
	if resA.err != nil || resB.err != nil {
		t.Fatalf("acks: a %v, b %v", resA.err, resB.err)
	}
	jobs := dest.Applied()
	if jobs[0].Segment != jobs[1].Segment || jobs[0].ID == jobs[1].ID {
		t.Fatalf("jobs %s (segment %s) and %s (segment %s): want one snapshot id, two job ids", jobs[0].ID, jobs[0].Segment, jobs[1].ID, jobs[1].Segment)
	}
	if got := destValues(dest)["events"]; len(got) != 5 {
		t.Fatalf("destination holds %v, want the 2 rows of a and the 3 of b", got)
	}
	if r.writerWAL("test") == r.writerWAL("b") {
		t.Fatalf("two logs share WAL id %s", r.writerWAL("b"))
	}
	bInc.Kill()
}

// legacyID is the compaction id of builds before WAL identities, written
// out here on its own: the upgrade promise is that it does not change.
func legacyID(id engine.SnapshotID, sinkRef string, ordinals ...uint32) string {
	h := sha256.New()
	h.Write([]byte(id.String() + "\x00" + sinkRef + "\x00"))
	for _, o := range ordinals {
		h.Write(binary.LittleEndian.AppendUint32(nil, o))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// putLegacySegment stores a segment as a build before WAL identities
// committed it: body, and a version 1 marker (no origin).
func (r *rig) putLegacySegment(pipeline string, id engine.SnapshotID, u engine.Unit, offsets segment.Offsets) {
	r.t.Helper()
	var buf bytes.Buffer
	ix, err := segment.Encode(&buf, r.sched.WallUnixMs(), offsets, []segment.Part{{Key: u.Key, Schema: u.Schema, Batches: u.Batches}}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	marker, err := segment.EncodeMarker(ix)
	if err != nil || binary.LittleEndian.Uint16(marker[4:]) != segment.MarkerVersionLegacy {
		r.t.Fatalf("legacy marker: %v (version %d)", err, binary.LittleEndian.Uint16(marker[4:]))
	}
	dir := engine.NewLayout("wal", pipeline).SegmentDir(r.sched.WallUnixMs())
	r.putObject(dir+id.String()+".seg", buf.Bytes())
	r.putObject(dir+id.String()+".seg.commit", marker)
}

// An upgrade across a crash: a log an older build wrote (a version 2
// writer object, version 1 markers) is recovered by this build. Its
// segments' jobs keep their old ids — the formula is pinned here — through
// an apply, a crash before the bitmap was written, and the replay after
// it: the sink finds the id applied and holds the rows once. New segments
// get the log's new identity; the log keeps the identity it was given.
func TestUpgradeKeepsLegacyIDsAcrossACrash(t *testing.T) {
	if got, want := legacyID(engine.SnapshotID{Epoch: 1, Seq: 1}, "lake", 0, 2), "4493f92379823c6a5fafd3f54ef196b6"; got != want {
		t.Fatalf("legacy id formula %s, the released one gives %s", got, want)
	}
	r := newRig(t, sim.StoreConfig{})
	r.cfg.BitmapDelay = time.Hour // the crash comes before any bitmap is written
	dest, cs := withSink(r)
	r.putObject(engine.NewLayout("wal", "test").WriterKey(), engine.EncodeWriterObject(1, 7, 1, nil))
	old := []engine.SnapshotID{{Epoch: 1, Seq: 1}, {Epoch: 1, Seq: 2}}
	for i, id := range old {
		r.putLegacySegment("test", id, unit("events", int64(10*i), int64(10*i+1)), segment.Offsets{{Key: "src/p", Value: uint64(i + 1)}})
	}
	first := r.start()
	r.until(func() bool { return len(dest.Applied()) == 2 }, "the legacy jobs applied")
	if first.Marks()[engine.MarkLegacyOrigin] != 2 {
		t.Fatalf("legacy-origin marked %d times, want 2", first.Marks()[engine.MarkLegacyOrigin])
	}
	wal := r.writerWAL("test")
	second := r.start() // a crash: the bits were never written
	r.until(func() bool { return second.Drained() && len(r.walKeys()) == 0 }, "drain after the crash")
	for _, id := range old {
		want := legacyID(id, "lake", 0)
		if cs.applies[want] != 2 {
			t.Fatalf("legacy job %s of %s applied %d times, want 2 (before and after the crash, under one id): %v", want, id, cs.applies[want], cs.applies)
		}
	}
	if got := destValues(dest)["events"]; !slices.Equal(got, []int64{0, 1, 10, 11}) {
		t.Fatalf("destination holds %v, want each legacy row once", got)
	}
	res := r.submit(unit("events", 99))
	r.until(func() bool { return res.done && len(dest.Applied()) == 3 }, "a new segment applied")
	if j := dest.Applied()[2]; j.Origin != (segment.Origin{WAL: wal, Pipeline: "test"}) || !strings.HasPrefix(j.ID, "test-") || r.writerWAL("test") != wal {
		t.Fatalf("new job %s of origin %v; writer WAL %s, given %s at the upgrade", j.ID, j.Origin, r.writerWAL("test"), wal)
	}
}

// Defence in depth: two logs whose jobs do share an id — segments both
// committed before identities, with the same snapshot id — meet in one
// destination. The sink tells them apart by content, and the engine
// alerts and keeps the segment instead of calling the job applied.
func TestLegacyIDCollisionIsAlerted(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	id := engine.SnapshotID{Epoch: 1, Seq: 1}
	for _, p := range []string{"test", "b"} {
		r.putObject(engine.NewLayout("wal", p).WriterKey(), engine.EncodeWriterObject(1, 7, 1, nil))
		r.putLegacySegment(p, id, unit("events", 1), segment.Offsets{{Key: "src/" + p, Value: 1}})
	}
	a := r.start()
	r.until(func() bool { return len(dest.Applied()) == 1 }, "pipeline test's legacy job applied")
	b, bInc := r.secondEngine("b", oneSink{dest.Sink(r.sched.NewIncarnation().Timers())})
	defer bInc.Kill()
	r.until(func() bool { return b.Stats().Alerts > 0 }, "pipeline b's alert")
	alerts, _ := b.AlertsSince(0)
	if alerts[0].Kind != engine.AlertIDCollision || !errors.Is(alerts[0].Err, engine.ErrIDCollision) || !strings.Contains(alerts[0].Err.Error(), legacyID(id, "lake", 0)) {
		t.Fatalf("alert %v (%v), want an id collision naming job %s", alerts[0].Kind, alerts[0].Err, legacyID(id, "lake", 0))
	}
	if n := len(b.Segments()); n != 1 || len(dest.Applied()) != 1 || a.Stats().Alerts != 0 {
		t.Fatalf("b owns %d segments (want its segment kept), the sink holds %d jobs, a alerted %d times", n, len(dest.Applied()), a.Stats().Alerts)
	}
}
