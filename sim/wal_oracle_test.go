package sim

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

func testDiskWorld(t *testing.T) *World {
	t.Helper()
	spec := SmallSpec("")
	spec.Engine.Disk = engine.DefaultDiskWAL()
	return NewWorld(Config{Seed: 1, Iters: 1, World: &spec})
}

// logImage is a log segment holding one unit record per uid, as the
// engine writes them.
func logImage(t *testing.T, w *World, uids ...UID) []byte {
	t.Helper()
	h, err := wal.AppendHeader(nil, wal.Header{Partition: 0, Segment: 1, FirstSeq: 1, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	img := wal.AppendEntry(nil, h)
	for i, uid := range uids {
		b := unitOf(w, uid)
		var buf bytes.Buffer
		iw := ipc.NewWriter(&buf, ipc.WithSchema(b.Schema()), ipc.WithAllocator(memory.DefaultAllocator))
		if err := iw.Write(b); err != nil {
			t.Fatal(err)
		}
		iw.Close()
		p, err := wal.AppendUnit(nil, wal.UnitRecord{Seq: uint64(i + 1), Key: segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Partition: "0", Schema: unitFingerprint}, Arrow: buf.Bytes()})
		if err != nil {
			t.Fatal(err)
		}
		img = wal.AppendEntry(img, p)
	}
	return img
}

// writeDurable puts b at path on the world's disk, fsynced, through an
// incarnation of the test's own.
func writeDurable(t *testing.T, w *World, path string, b []byte) {
	t.Helper()
	inc := w.sched.NewIncarnation()
	d := w.disk.Client(inc)
	step := func(start func(done func(error))) {
		var done bool
		var err error
		start(func(e error) { done, err = true, e })
		for !done && w.sched.Step() {
		}
		if err != nil || !done {
			t.Fatalf("disk %s: %v (done %v)", path, err, done)
		}
	}
	step(func(done func(error)) { d.MkdirAll("wal/partition-0", done) })
	var f engine.File
	step(func(done func(error)) {
		d.Open(path, engine.OpenMode{Create: true, Write: true}, func(x engine.File, err error) { f = x; done(err) })
	})
	step(func(done func(error)) { f.WriteAt(b, 0, done) })
	step(func(done func(error)) { f.Sync(done) })
	for _, dir := range []string{"", "wal", "wal/partition-0"} {
		step(func(done func(error)) { d.SyncDir(dir, done) })
	}
	inc.Kill()
}

// Disk WAL: an ACK must follow a completed fsync covering the unit's log
// entry.
func TestOracleWALAckBeforeFsync(t *testing.T) {
	w := testDiskWorld(t)
	a, b := makeUID(0, 0, 1), makeUID(0, 0, 2)
	w.oracle.walSynced("wal/partition-0/segment-000000000001.wal", logImage(t, w, a))
	w.oracle.onAck(a)
	wantClean(t, w)
	unitOf(w, b)
	w.oracle.onAck(b)
	wantViolation(t, w, "acked before a completed fsync")
}

// Disk WAL: after a power loss every acked unit no marker holds is in the
// log the disk kept.
func TestOracleWALAckedSurvivesCrash(t *testing.T) {
	w := testDiskWorld(t)
	a, b := makeUID(0, 0, 1), makeUID(0, 0, 2)
	img := logImage(t, w, a, b)
	w.oracle.walSynced("wal/partition-0/segment-000000000001.wal", img)
	w.oracle.onAck(a)
	w.oracle.onAck(b)
	writeDurable(t, w, "wal/partition-0/segment-000000000001.wal", img)
	w.oracle.walAfterCrash()
	wantClean(t, w)
	// Only a's entry survived (the disk kept a shorter file).
	w2 := testDiskWorld(t)
	w2.oracle.walSynced("wal/partition-0/segment-000000000001.wal", logImage(t, w2, a, b))
	w2.oracle.onAck(a)
	w2.oracle.onAck(b)
	writeDurable(t, w2, "wal/partition-0/segment-000000000001.wal", logImage(t, w2, a))
	w2.oracle.walAfterCrash()
	wantViolation(t, w2, "neither in a landed marker nor in the log the disk kept")
}

// Disk WAL: after convergence each log partition keeps its append target
// only.
func TestOracleWALReclaimed(t *testing.T) {
	w := testDiskWorld(t)
	writeDurable(t, w, "wal/partition-0/segment-000000000001.wal", logImage(t, w))
	w.oracle.walFinal()
	wantClean(t, w)
	writeDurable(t, w, "wal/partition-0/segment-000000000002.wal", logImage(t, w))
	w.oracle.walFinal()
	wantViolation(t, w, "holds 2 segment files after convergence")
}

// viewOnly is an engine whose recovered view is offsets.
type viewOnly map[string]uint64

func (v viewOnly) Segments() []engine.Segment { return nil }
func (v viewOnly) Stats() engine.Stats        { return engine.Stats{} }
func (v viewOnly) IdempotencyKeyKnown(k string) bool {
	_, ok := v["idem/"+k]
	return ok
}
func (v viewOnly) KeyHashKnown(h segment.KeyHash) bool {
	for k := range v {
		if key, ok := strings.CutPrefix(k, "idem/"); ok && segment.KeyHashOf(key) == h {
			return true
		}
	}
	return false
}
func (v viewOnly) Offset(k string) (uint64, bool) {
	x, ok := v[k]
	return x, ok
}

// Disk WAL: after a recovery a key is known from the recovered view or
// from the log on the disk (read back and replayed, committed later) —
// and from nothing else.
func TestOracleWALRecoveredOffsetReadsTheLog(t *testing.T) {
	w := testDiskWorld(t)
	h, err := wal.AppendHeader(nil, wal.Header{Partition: 0, Segment: 1, FirstSeq: 1, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	p, err := wal.AppendUnit(nil, wal.UnitRecord{Seq: 1, Key: segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Schema: unitFingerprint},
		Offsets: segment.Offsets{{Key: "both", Value: 4}, {Key: "logged", Value: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	writeDurable(t, w, "wal/partition-0/segment-000000000001.wal", wal.AppendEntry(wal.AppendEntry(nil, h), p))
	off := w.oracle.recoveredOffset(viewOnly{"viewed": 3, "both": 6})
	for key, want := range map[string]uint64{"logged": 9, "viewed": 3, "both": 6} {
		if got, ok := off(key); !ok || got != want {
			t.Errorf("offset of %q = %d, %v; want %d", key, got, ok, want)
		}
	}
	if got, ok := off("neither"); ok {
		t.Errorf("offset of a key in neither = %d, want none", got)
	}
	w.engCfg.Disk = nil // an S3-WAL world reads the view only
	if _, ok := w.oracle.recoveredOffset(viewOnly{})("logged"); ok {
		t.Error("an S3-WAL world took a key from a log it does not have")
	}
}

// An alert ends a run as it should only when the world's faults call for
// it: a halted log partition after a bit flip, or on a gap after the disk
// ignored an fsync; any other alert is a violation.
func TestExpectedAlert(t *testing.T) {
	gap := fmt.Errorf("%w: WAL partition 0 halted: seg: first sequence 9, but the log before it ends at 7 (a gap)", engine.ErrCorrupt)
	flipped := DiskCounts{}
	flipped.Outcomes[DiskBitFlip] = 1
	for _, c := range []struct {
		name     string
		err      error
		expected []string
		diskWAL  bool
		disk     DiskCounts
		want     string
	}{
		{"planned corruption at rest", errors.New("body of segment x: checksum"), []string{"segment x"}, false, DiskCounts{}, "segment x"},
		{"gap on an honest disk", gap, nil, true, DiskCounts{}, ""},
		{"gap after an ignored fsync", gap, nil, true, DiskCounts{SyncsIgnored: 1}, "a gap a hidden fsync error left"},
		{"gap in an S3 world", gap, nil, false, DiskCounts{SyncsIgnored: 1}, ""},
		{"log damage after a bit flip", gap, nil, true, flipped, "a flipped bit in the log"},
		{"not corruption", errors.New("WAL partition 0 halted (a gap)"), nil, true, DiskCounts{SyncsIgnored: 1}, ""},
	} {
		got, ok := expectedAlert(c.err, c.expected, c.diskWAL, c.disk)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: expectedAlert = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}
