package sim

import (
	"time"

	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Each oracle is fed one violation and must report it; the control cases
// show the same oracle stays quiet when nothing is wrong.

func testWorld(t *testing.T) *World {
	t.Helper()
	spec := SmallSpec("")
	return NewWorld(Config{Seed: 1, Iters: 1, World: &spec})
}

// unitOf builds unit uid (2 rows) as its source would, and tells the
// oracle it was produced.
func unitOf(w *World, uid UID) arrow.RecordBatch {
	b := unitBatch(w.spec.Sources[uid.source()], uid, 2)
	w.oracle.produced(uid, b, nil)
	return b
}

// commitSegment writes a body and marker holding the given units straight
// into the store's truth, the way a landed commit looks, and tells the
// oracle the marker landed.
func commitSegment(t *testing.T, w *World, seq uint64, uids ...UID) engine.Segment {
	t.Helper()
	return commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: seq}, batchesOf(w, uids...))
}

func batchesOf(w *World, uids ...UID) []arrow.RecordBatch {
	var batches []arrow.RecordBatch
	for _, u := range uids {
		batches = append(batches, unitOf(w, u))
	}
	return batches
}

func commitBatches(t *testing.T, w *World, id engine.SnapshotID, batches []arrow.RecordBatch) engine.Segment {
	t.Helper()
	return commitWithOffsets(t, w, id, batches, coverOf(t, w, batches))
}

// coverOf is what the engine records for the units in batches: each
// replayable unit's partition at its position, each idempotent unit's key.
func coverOf(t *testing.T, w *World, batches []arrow.RecordBatch) segment.Offsets {
	t.Helper()
	var o segment.Offsets
	for _, b := range batches {
		cols, err := UnitColumns(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cols.Len() {
			uid := UID(cols.UID(i))
			spec := w.sources[uid.source()].spec
			if spec.Replayable {
				o = o.Advance(offsetKey(spec, uid.partition()), uid.seq())
			} else {
				o = o.Advance(idemOffsetKey(spec.Name, uid), 1)
			}
		}
	}
	return o
}

// commitWithOffsets is commitBatches with the marker's offsets given.
func commitWithOffsets(t *testing.T, w *World, id engine.SnapshotID, batches []arrow.RecordBatch, offsets segment.Offsets) engine.Segment {
	t.Helper()
	schema := batches[0].Schema()
	part := segment.Part{Key: segment.PartitionKey{SinkRef: "lake", Namespace: "events", Schema: fingerprintOf(schema)},
		Schema: schema, Batches: batches}
	var body bytes.Buffer
	ix, err := segment.Encode(&body, 0, offsets, []segment.Part{part}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	marker, err := segment.EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	dir := w.layout.SegmentDir(0)
	w.store.write(w.layout.Key(dir, id, engine.KindBody), body.Bytes(), "\"b\"")
	key := w.layout.Key(dir, id, engine.KindMarker)
	w.store.write(key, marker, "\"m\"")
	w.oracle.onApply(OpPut, key)
	return engine.Segment{ID: id, Dir: dir, Index: ix}
}

type fakeView struct {
	segs    []engine.Segment
	offsets segment.Offsets
	runs    uint64
}

func (v fakeView) Segments() []engine.Segment     { return v.segs }
func (v fakeView) Offset(k string) (uint64, bool) { return v.offsets.Get(k) }
func (v fakeView) Stats() engine.Stats            { return engine.Stats{RecoveryRuns: v.runs} }
func (v fakeView) IdempotencyKeyKnown(k string) bool {
	_, ok := v.offsets.Get("idem/" + k)
	return ok
}

func (v fakeView) KeyHashKnown(h segment.KeyHash) bool {
	for _, o := range v.offsets {
		if k, ok := strings.CutPrefix(o.Key, "idem/"); ok && segment.KeyHashOf(k) == h {
			return true
		}
	}
	return false
}

func wantViolation(t *testing.T, w *World, substr string) {
	t.Helper()
	for _, v := range w.oracle.Violations() {
		if strings.Contains(v, substr) {
			return
		}
	}
	t.Fatalf("no violation containing %q; got %q", substr, w.oracle.Violations())
}

func wantClean(t *testing.T, w *World) {
	t.Helper()
	if v := w.oracle.Violations(); len(v) > 0 {
		t.Fatalf("unexpected violations: %q", v)
	}
}

func TestOracleAckBeforeCommit(t *testing.T) {
	w := testWorld(t)
	commitSegment(t, w, 1, makeUID(0, 0, 1))
	w.oracle.onAck(makeUID(0, 0, 1))
	wantClean(t, w)
	w.oracle.onAck(makeUID(0, 0, 2))
	wantViolation(t, w, "acked before any marker")
}

func TestOracleCommittedTwice(t *testing.T) {
	w := testWorld(t)
	commitSegment(t, w, 1, makeUID(0, 0, 1))
	commitSegment(t, w, 2, makeUID(0, 0, 2))
	w.oracle.checkCommits()
	wantClean(t, w)
	commitSegment(t, w, 3, makeUID(0, 0, 1))
	w.oracle.checkCommits()
	wantViolation(t, w, "committed twice")
}

// writeWriter stores a writer object: epoch, floor, and seals.
func writeWriter(w *World, epoch, floor uint64, seals ...[2]uint64) {
	w.store.write(w.layout.WriterKey(), engine.EncodeWriterObject(epoch, 7, floor, seals), "\"w\"")
	w.oracle.onApply(OpPut, w.layout.WriterKey())
}

// A zombie's marker beyond its epoch's seal does not count: its units
// committed again by the new writer are not duplicates, but a unit acked
// only through such a marker is a violation.
func TestOracleZombieMarkers(t *testing.T) {
	u1, u2 := makeUID(0, 0, 1), makeUID(0, 0, 2)
	zombie := func(w *World) {
		writeWriter(w, 1, 1)
		commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, batchesOf(w, u1)) // listed: sealed at 1
		writeWriter(w, 2, 1)
		writeWriter(w, 2, 2, [2]uint64{1, 1})
		commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 2}, batchesOf(w, u2)) // beyond the seal
		commitBatches(t, w, engine.SnapshotID{Epoch: 2, Seq: 1}, batchesOf(w, u2)) // committed again
	}
	w := testWorld(t)
	zombie(w)
	w.oracle.checkCommits()
	wantClean(t, w)
	w.oracle.onAck(u1)
	w.oracle.checkCommits()
	wantClean(t, w)

	w = testWorld(t)
	writeWriter(w, 1, 1)
	commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, batchesOf(w, u1))
	writeWriter(w, 2, 2) // epoch 1 sealed with nothing: its marker does not count
	w.oracle.onAck(u1)
	w.oracle.checkCommits()
	wantViolation(t, w, "do not count")

	// A recovery in its fence wait: epoch 2 claimed, epoch 1 not sealed
	// yet. A unit acked through epoch 1's marker, and held again by a
	// zombie's marker beyond a seal, is undecided until the seal lands:
	// then it counts (sealed at 1), or it does not (sealed with nothing).
	for _, c := range []struct {
		seals [][2]uint64
		want  string
	}{{[][2]uint64{{1, 1}}, ""}, {nil, "do not count"}} {
		w = testWorld(t)
		writeWriter(w, 1, 1)
		commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, batchesOf(w, u1))
		w.oracle.onAck(u1)
		writeWriter(w, 2, 1)                                                       // claimed, not sealed
		commitBatches(t, w, engine.SnapshotID{Epoch: 0, Seq: 9}, batchesOf(w, u1)) // an older zombie's, beyond every seal
		w.oracle.checkCommits()
		wantClean(t, w)
		writeWriter(w, 2, 2, c.seals...)
		w.oracle.checkCommits()
		if c.want == "" {
			wantClean(t, w)
		} else {
			wantViolation(t, w, c.want)
		}
	}

	w = testWorld(t)
	zombie(w)
	commitBatches(t, w, engine.SnapshotID{Epoch: 2, Seq: 2}, batchesOf(w, u1)) // u1 again, and both count
	w.oracle.checkCommits()
	wantViolation(t, w, "committed twice")
}

// Every version of a bitmap holds every bit of the one before.
func TestOracleBitmapOnlyGrows(t *testing.T) {
	w := testWorld(t)
	key := w.layout.Key(w.layout.SegmentDir(0), engine.SnapshotID{Epoch: 1, Seq: 1}, engine.KindBitmap)
	put := func(bits ...segment.SliceOrdinal) {
		b := segment.NewBitmap(4)
		for _, i := range bits {
			b.Set(i)
		}
		w.store.write(key, b.Encode(), "\"x\"")
		w.oracle.onApply(OpPut, key)
	}
	put(0)
	put(0, 2)
	put(0, 1, 2)
	wantClean(t, w)
	w.store.remove(key)
	w.oracle.onApply(OpDelete, key)
	put(3) // a new life of the key
	wantClean(t, w)
	put(0)
	wantViolation(t, w, "cleared it")
}

func TestOracleRecovery(t *testing.T) {
	uid := makeUID(0, 1, 7) // events, partition 1, seq 7
	covering := segment.Offsets{{Key: offsetKey(w0spec(), 1), Value: 7}}
	for _, c := range []struct {
		name string
		edit func(v *fakeView, rs *recoveryStats)
		want string
	}{
		{"control", func(*fakeView, *recoveryStats) {}, ""},
		{"acked unit not owned", func(v *fakeView, _ *recoveryStats) { v.segs = nil }, "neither owned nor reclaimed"},
		{"offsets do not cover", func(v *fakeView, _ *recoveryStats) { v.offsets = segment.Offsets{{Key: covering[0].Key, Value: 6}} }, "not covered"},
		{"orphan owned", func(v *fakeView, _ *recoveryStats) {
			v.segs = append(v.segs, engine.Segment{ID: engine.SnapshotID{Epoch: 9, Seq: 9}, Dir: v.segs[0].Dir})
		}, "an orphan"},
		{"body read", func(_ *fakeView, rs *recoveryStats) { rs.bodyReads = 1 }, "read 1 segment bodies"},
		{"too many requests", func(_ *fakeView, rs *recoveryStats) { rs.ops = 1 << 20 }, "recovery took"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			seg := commitSegment(t, w, 1, uid)
			w.oracle.onAck(uid)
			v := fakeView{segs: []engine.Segment{seg}, offsets: covering, runs: 1}
			rs := recoveryStats{ops: 3}
			c.edit(&v, &rs)
			w.oracle.checkRecovery(v, rs)
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}

// A keyed unit its source gave up on (source.giveUp) is not required to
// be committed; any other unit is.
func TestOracleExcusesOnlyGivenUpUnits(t *testing.T) {
	w := testWorld(t)
	unitOf(w, makeUID(0, 0, 1))
	w.oracle.givenUp[makeUID(0, 0, 1)] = true
	w.oracle.checkFinal(fakeView{})
	wantClean(t, w)
	unitOf(w, makeUID(0, 0, 2))
	w.oracle.checkFinal(fakeView{})
	wantViolation(t, w, "unit 0/0/2 produced but never committed")
}

// The tables' ledger holds a unit given up on once a marker that counts
// holds it — it must then be in its table once — and not before.
func TestGivenUpUnitsAreAcknowledgedOnceCommitted(t *testing.T) {
	w := testWorld(t)
	gone, stored := makeUID(0, 0, 1), makeUID(0, 0, 2)
	w.oracle.givenUp[gone], w.oracle.givenUp[stored] = true, true
	unitOf(w, gone)
	commitSegment(t, w, 1, stored)
	w.oracle.decideValidity()
	if got := w.oracle.acknowledged(w.sources[0]); !slices.Equal(got, []UID{stored}) {
		t.Fatalf("acknowledged %v, want only %v (committed)", got, stored)
	}
}

// A keyed unit is sent while half the idempotency window has not passed
// since it was first sent, and given up after: a retry past the window
// is a new unit to the engine, which would store it again.
func TestKeyedSourceGivesUpAtHalfTheWindow(t *testing.T) {
	w := testWorld(t)
	s := newSource(w, 0, SourceSpec{Name: "keyed", InFlight: 1})
	s.firstSent[7], s.pending[7], s.busy = 0, true, 1
	half := w.engCfg.IdempotencyWindow / 2
	w.sched.RunUntil(half)
	if s.giveUp(7) || !s.pending[7] || s.busy != 1 {
		t.Fatalf("at half the window (%v): gave up", half)
	}
	w.sched.RunUntil(half + time.Nanosecond)
	if !s.giveUp(7) || s.pending[7] || s.busy != 0 || !w.oracle.givenUp[makeUID(0, 0, 7)] || w.first().wmarks[MarkIdemRetryGivenUp] != 1 {
		t.Fatalf("past half the window: pending %t, busy %d, excused %t", s.pending[7], s.busy, w.oracle.givenUp[makeUID(0, 0, 7)])
	}
}

func w0spec() SourceSpec { return DefaultWorkload()[0] }

func TestOracleFinal(t *testing.T) {
	w := testWorld(t)
	seg := commitSegment(t, w, 1, makeUID(0, 0, 1))
	w.oracle.checkFinal(fakeView{segs: []engine.Segment{seg}})
	wantClean(t, w)
	unitOf(w, makeUID(0, 0, 2))
	w.oracle.checkFinal(fakeView{segs: []engine.Segment{seg}})
	wantViolation(t, w, "produced but never committed")
	w.oracle.checkFinal(fakeView{})
	wantViolation(t, w, "final engine owns 0 segments")
}

// A unit whose rows in the segment differ from what was produced — fewer
// rows, or one payload byte changed — is caught when its marker lands.
func TestOracleUnitContent(t *testing.T) {
	uid := makeUID(0, 0, 1)
	w := testWorld(t)
	commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, batchesOf(w, uid))
	wantClean(t, w)

	w = testWorld(t)
	unitOf(w, uid) // produced with 2 rows
	short := unitBatch(w.spec.Sources[0], uid, 1)
	commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, []arrow.RecordBatch{short})
	wantViolation(t, w, "produced 2 rows")

	w = testWorld(t)
	good := unitOf(w, uid)
	flipped := flipPayload(good)
	commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, []arrow.RecordBatch{flipped})
	wantViolation(t, w, "produced 2 rows (digest")
}

// flipPayload returns b with one payload byte changed.
func flipPayload(b arrow.RecordBatch) arrow.RecordBatch {
	p := b.Column(2).(*array.String)
	data := bytes.Clone(p.ValueBytes())
	data[0] ^= 1
	offs := p.Data().Buffers()[1]
	nd := array.NewData(arrow.BinaryTypes.String, p.Len(), []*memory.Buffer{nil, offs, memory.NewBufferBytes(data)}, nil, 0, 0)
	cols := []arrow.Array{b.Column(0), b.Column(1), array.MakeFromData(nd)}
	return array.NewRecordBatch(b.Schema(), cols, b.NumRows())
}

// Units of a source that cannot replay are covered by their idempotency
// key until the key may have expired.
func TestOracleRecoveryIdempotent(t *testing.T) {
	http := len(DefaultWorkload()) - 1
	if DefaultWorkload()[http].Replayable {
		t.Fatal("the last default source should be the one that cannot replay")
	}
	uid := makeUID(http, 0, 42)
	ns := DefaultWorkload()[http].Name
	keyed := segment.Offsets{{Key: idemOffsetKey(ns, uid), Value: 1}}
	for _, c := range []struct {
		name    string
		offsets segment.Offsets
		expired bool
		want    string
	}{
		{"key recovered", keyed, false, ""},
		{"key lost", nil, false, "not covered"},
		{"other key only", segment.Offsets{{Key: idemOffsetKey(ns, makeUID(http, 0, 43)), Value: 1}}, false, "not covered"},
		{"key lost after the window", nil, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			seg := commitSegment(t, w, 1, uid)
			if c.expired {
				w.oracle.units[uid].firstSeen = -w.engCfg.IdempotencyWindow - time.Second
			}
			w.oracle.onAck(uid)
			w.oracle.checkRecovery(fakeView{segs: []engine.Segment{seg}, offsets: c.offsets, runs: 1}, recoveryStats{ops: 3})
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}

// A marker's offsets cover every unit it holds: a replayable unit's
// partition at or above its position, an idempotent unit's key present.
func TestOracleMarkerCoversItsUnits(t *testing.T) {
	replayable, idempotent := makeUID(0, 0, 5), makeUID(3, 0, 42)
	id := engine.SnapshotID{Epoch: 1, Seq: 1}
	for _, c := range []struct {
		name    string
		offsets func(full segment.Offsets) segment.Offsets
		want    string
	}{
		{"covered", func(full segment.Offsets) segment.Offsets { return full }, ""},
		{"partition behind", func(full segment.Offsets) segment.Offsets {
			return slices.DeleteFunc(slices.Clone(full), func(o segment.Offset) bool { return o.Key == "src/events/0" }).Advance("src/events/0", 4)
		}, "but its offsets say src/events/0=4"},
		{"key missing", func(full segment.Offsets) segment.Offsets {
			return slices.DeleteFunc(slices.Clone(full), func(o segment.Offset) bool { return strings.HasPrefix(o.Key, "idem/") })
		}, "lack its idempotency key http/http/42"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			if !w.sources[0].spec.Replayable || w.sources[3].spec.Replayable {
				t.Fatal("the test expects source 0 replayable and source 3 not")
			}
			batches := batchesOf(w, replayable, idempotent)
			commitWithOffsets(t, w, id, batches, c.offsets(coverOf(t, w, batches)))
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}

// A read answered with bytes that rotted at rest must end in an alert: in
// a world that converged (no alert), it is a violation. A range that
// misses the damage is not such a read.
func TestOracleSilentRot(t *testing.T) {
	for _, c := range []struct {
		name string
		rng  *engine.ByteRange
		want string
	}{
		{"whole object", nil, "damaged at rest, and went on without an alert"},
		{"range missing the damage", &engine.ByteRange{Start: 4, Length: 4}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			w.store.write("wal/sim/x.seg", []byte("abcdefgh"), `"e"`)
			if !w.store.Rot("wal/sim/x.seg", func(b []byte) []byte { return CorruptBytes(b, 2) }) { // bit 1 of byte 0
				t.Fatal("Rot refused a present object")
			}
			if _, _, err := w.store.get("wal/sim/x.seg", c.rng, 1<<20); err != nil {
				t.Fatal(err)
			}
			w.oracle.checkNoSilentRot()
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}

// A segment reclaimed before what its offsets cover is durable elsewhere
// is a violation at the delete: the source offset must be in _offsets,
// the idempotency key in a run its bucket's manifest lists.
func TestOracleReclaimAheadOfCheckpoint(t *testing.T) {
	for _, durable := range []bool{false, true} {
		w := testWorld(t)
		now := uint64(w.sched.WallUnixMs())
		offsets := segment.Offsets{{Key: "idem/http/x", Value: now}, {Key: "src/a", Value: 5}}
		if durable {
			ckpt, _ := segment.EncodeCheckpoint(1, segment.Offsets{{Key: "src/a", Value: 5}})
			w.store.write(w.layout.CheckpointKey(), ckpt, "\"c\"")
			run, meta, _ := segment.EncodeKeyRun([]segment.KeyEntry{{Hash: segment.KeyHashOf("http/x"), Value: now}})
			b := int64(now / uint64(engine.IdemBucketWidth(w.engCfg.IdempotencyWindow).Milliseconds()))
			w.store.write(w.layout.IdemRunKey(b, 1, 1), run, "\"r\"")
			manifest, _ := segment.EncodeKeyManifest(1, []segment.KeyRunRef{{Epoch: 1, Seq: 1, Count: 1, MinValue: meta.MinValue, Value: meta.Value}})
			w.store.write(w.layout.IdemBucketKey(b), manifest, "\"m\"")
		}
		seg := commitWithOffsets(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, batchesOf(w, UID(0)), offsets)
		w.store.Remove(w.layout.Key(seg.Dir, seg.ID, engine.KindMarker))
		if durable {
			wantClean(t, w)
			continue
		}
		wantViolation(t, w, "idempotency key http/x is in no run a manifest lists")
		wantViolation(t, w, "_offsets holds src/a=0, below its 5")
	}
}

func TestOracleTroublesAfterConvergence(t *testing.T) {
	w := testWorld(t)
	w.oracle.checkTroubles([]engine.Trouble{{Op: "store list-uploads", Attempts: 1, Err: ErrInjected}})
	if len(w.oracle.violations) != 0 {
		t.Fatalf("a store request kind that has not run again is not a violation: %v", w.oracle.violations)
	}
	w.oracle.checkTroubles([]engine.Trouble{{Op: "sink lake/events", Attempts: 3, Err: ErrInjected}})
	if len(w.oracle.violations) != 1 || !strings.Contains(w.oracle.violations[0], "sink lake/events") {
		t.Fatalf("violations %v, want the sink lane's trouble", w.oracle.violations)
	}
}
