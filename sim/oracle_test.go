package sim

import (
	"time"

	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Each oracle is fed one violation and must report it; the control cases
// show the same oracle stays quiet when nothing is wrong.

func testWorld(t *testing.T) *World {
	t.Helper()
	return NewWorld(Config{Seed: 1, Iters: 1})
}

// commitSegment writes a body and marker holding the given units straight
// into the store's truth, the way a landed commit looks, and tells the
// oracle the marker landed.
func commitSegment(t *testing.T, w *World, seq uint64, uids ...UID) engine.Segment {
	t.Helper()
	var batches []arrow.RecordBatch
	for _, u := range uids {
		if _, ok := w.oracle.rows[u]; !ok {
			w.oracle.produced(u, 2)
		}
		batches = append(batches, w.builder.batch(u, 2))
	}
	part := segment.Part{Key: segment.PartitionKey{SinkRef: "lake", Namespace: "events", Schema: unitFingerprint},
		Schema: unitSchema, Batches: batches}
	var body bytes.Buffer
	ix, err := segment.Encode(&body, 0, nil, []segment.Part{part}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	marker, err := segment.EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	id := engine.SnapshotID{Epoch: 1, Seq: seq}
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

func (v fakeView) Segments() []engine.Segment { return v.segs }
func (v fakeView) Offsets() segment.Offsets   { return v.offsets }
func (v fakeView) Stats() engine.Stats        { return engine.Stats{RecoveryRuns: v.runs} }

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
	wantClean(t, w)
	commitSegment(t, w, 3, makeUID(0, 0, 1))
	wantViolation(t, w, "committed twice")
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

func w0spec() SourceSpec { return DefaultWorkload()[0] }

func TestOracleFinal(t *testing.T) {
	w := testWorld(t)
	seg := commitSegment(t, w, 1, makeUID(0, 0, 1))
	w.oracle.checkFinal(fakeView{segs: []engine.Segment{seg}})
	wantClean(t, w)
	w.oracle.produced(makeUID(0, 0, 2), 3)
	w.oracle.checkFinal(fakeView{segs: []engine.Segment{seg}})
	wantViolation(t, w, "produced but never committed")
	w.oracle.checkFinal(fakeView{})
	wantViolation(t, w, "final engine owns 0 segments")
}

// A unit whose rows in the segment differ from what was produced (a
// partial or padded unit) is caught when its marker lands.
func TestOracleRowCount(t *testing.T) {
	w := testWorld(t)
	w.oracle.produced(makeUID(0, 0, 1), 5) // commitSegment writes 2 rows
	commitSegment(t, w, 1, makeUID(0, 0, 1))
	wantViolation(t, w, "has 2 rows")
}

// Units of a source that cannot replay are covered by their idempotency
// key until the key may have expired.
func TestOracleRecoveryIdempotent(t *testing.T) {
	http := len(DefaultWorkload()) - 1
	if DefaultWorkload()[http].Replayable {
		t.Fatal("the last default source should be the one that cannot replay")
	}
	uid := makeUID(http, 0, 42)
	keyed := segment.Offsets{{Key: "idem/" + idemKey(uid), Value: 1}}
	for _, c := range []struct {
		name    string
		offsets segment.Offsets
		expired bool
		want    string
	}{
		{"key recovered", keyed, false, ""},
		{"key lost", nil, false, "not covered"},
		{"other key only", segment.Offsets{{Key: "idem/" + idemKey(makeUID(http, 0, 43)), Value: 1}}, false, "not covered"},
		{"key lost after the window", nil, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			seg := commitSegment(t, w, 1, uid)
			w.oracle.onAck(uid)
			if c.expired {
				w.oracle.firstSeen[uid] = -w.engCfg.IdempotencyWindow - time.Second
			}
			w.oracle.checkRecovery(fakeView{segs: []engine.Segment{seg}, offsets: c.offsets, runs: 1}, recoveryStats{ops: 3})
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}
