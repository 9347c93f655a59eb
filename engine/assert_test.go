package engine_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// Each test breaks one invariant on purpose (export_test.go) and checks
// that the engine fails closed with ErrInvariant, naming the invariant
// and carrying the values, at the next change of the state involved.

// wantInvariant waits for the engine to fail closed and checks the error:
// ErrInvariant, the invariant's name, and the numbers named by pattern
// (its submatches, returned).
func wantInvariant(t *testing.T, r *rig, name, pattern string) []int64 {
	t.Helper()
	r.until(func() bool { return r.eng.Err() != nil }, "the engine fails closed")
	err := r.eng.Err()
	if !errors.Is(err, engine.ErrInvariant) || !strings.Contains(err.Error(), "engine: invariant broken: "+name) {
		t.Fatalf("failed closed with %v; want the invariant %q broken", err, name)
	}
	m := regexp.MustCompile(pattern).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("%v: the values (%s) are missing", err, pattern)
	}
	var out []int64
	for _, s := range m[1:] {
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil {
			t.Fatalf("%v: %q is not a number", err, s)
		}
		out = append(out, n)
	}
	return out
}

func TestInvariantHeld(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	r.eng.BreakHeld(7)
	res := r.submit(unit("events", 1))
	v := wantInvariant(t, r, "held bytes = live + queued + active", `held (\d+), live (\d+), queued (\d+) \(\d+ snapshots\), active (\d+)`)
	if v[0]-v[1]-v[2]-v[3] != 7 {
		t.Fatalf("values %v: want held 7 above the rest", v)
	}
	r.until(func() bool { return res.done }, "the answer")
	if !errors.Is(res.err, engine.ErrClosed) {
		t.Fatalf("the unit held when failing closed: %v, want ErrClosed", res.err)
	}
}

// Failing closed for another reason checks held too: every unit held is
// answered.
func TestInvariantHeldWhenFailingClosed(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	old := r.start()
	res := r.submit(unit("events", make([]int64, 10_000)...)) // sealed and persisting
	old.BreakHeld(-1)
	r.inc = nil // old stays: a zombie, about to be fenced at its commit
	r.start()
	r.eng = old
	v := wantInvariant(t, r, "held bytes = live + queued + active when failing closed", `held (\d+), live (\d+), queued (\d+) \(\d+ snapshots\), active (\d+); failing closed on: .*fenced`)
	if v[1]+v[2]+v[3]-v[0] != 1 {
		t.Fatalf("values %v: want held 1 below the rest", v)
	}
	r.until(func() bool { return res.done }, "the answer")
}

func TestInvariantQueueOrder(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	big := make([]int64, 10_000) // above the target: sealed at once
	r.submit(unit("events", big...))
	r.eng.BreakSeq()
	r.submit(unit("events", big...))
	wantInvariant(t, r, "snapshots in id order", `queue\[0\] is \d+-0*(\d+), after \d+-0*(\d+)`)
}

func TestInvariantCommitOrder(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	res := r.submit(unit("events", make([]int64, 10_000)...)) // sealed and persisting
	r.eng.BreakLastCommit(1000)
	// Caught before the marker: its cuts are decided only once every
	// earlier snapshot is committed (checkCommit, at the commit itself,
	// is broken in TestInvariantCommitAfterLast).
	v := wantInvariant(t, r, "cuts are decided for the active snapshot, every earlier one committed", `snapshot \d+-0*(\d+), last commit \d+-0*(\d+)`)
	if v[0] != 1 || v[1] != 1000 {
		t.Fatalf("values %v: want snapshot 1 after 1000", v)
	}
	r.until(func() bool { return res.done }, "the answer")
	if !errors.Is(res.err, engine.ErrClosed) || len(r.eng.Segments()) != 0 {
		t.Fatalf("the out-of-order commit: %v, %d segments owned; want refused", res.err, len(r.eng.Segments()))
	}
}

func TestInvariantRunning(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	withSink(r)
	r.start()
	r.eng.BreakRunning(-1)
	r.submit(unit("events", 1))
	v := wantInvariant(t, r, "0 ≤ running ≤ CompactionConcurrency", `running (-?\d+), limit (\d+)`)
	if v[0] != -1 || v[1] != 4 {
		t.Fatalf("values %v: want running -1, limit 4", v)
	}
}

func TestInvariantLaneOrder(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	r.start()
	cs.down["events"] = true
	first := r.submit(unit("events", 1))
	r.until(func() bool { return first.done }, "ack")
	r.eng.BreakLaneTail("lake", "events", engine.SnapshotID{Epoch: r.eng.Epoch(), Seq: 1000})
	r.submit(unit("events", 2))
	wantInvariant(t, r, "lane lake/events in commit order", `job starting in segment \d+-0*(\d+) \(ordinal 0\) queued after one starting in \d+-0*1000`)
}

func TestInvariantLaneHead(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	cs.delay = time.Second
	r.start()
	r.submit(unit("events", 1))
	r.until(func() bool { return len(cs.applies) > 0 }, "the job runs")
	r.eng.BreakLaneHead("lake", "events", engine.SnapshotID{Epoch: 0, Seq: 7})
	wantInvariant(t, r, "a lane applies its head first", `lane head fake \(cut in segment 0+-0*(\d+)\), (\d+) jobs`)
}

func TestInvariantPendingAtReclaim(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	oneSinkDown(r)
	r.until(func() bool { st := r.eng.Stats(); return st.JobsApplied == 1 && st.SinkFailures > 0 }, "job a applied, job b failed")
	r.eng.BreakPending() // job b taken for applied, its bit clear
	v := wantInvariant(t, r, "a reclaimed segment is fully applied", `(\d+) groups open, (\d+) of (\d+) jobs not applied, (\d+) of (\d+) bits set`)
	if v[0] != 0 || v[1] != 0 || v[2] != 2 || v[3] != 1 || v[4] != 2 {
		t.Fatalf("values %v", v)
	}
	if r.markers() != 1 {
		t.Fatal("the segment was deleted")
	}
}

func TestInvariantBitmapBitsOnlySet(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	oneSinkDown(r)
	r.until(func() bool { return r.bitmapKey() != "none" }, "a bitmap write")
	r.settle()
	r.eng.BreakBitmap()
	v := wantInvariant(t, r, "bitmap bits only get set", `bit (\d+) written before is clear now \((\d+) bits set, (\d+) before\)`)
	if v[1] != 0 || v[2] != 1 {
		t.Fatalf("values %v", v)
	}
}

func TestInvariantBitmapMerge(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	r.start()
	cs.down["events"] = true
	res := r.submit(unit("events", 1))
	r.until(func() bool { return res.done }, "ack")
	r.eng.MergeForeignBitmap()
	wantInvariant(t, r, "bitmap bits only get set: merge", `(\d+) bits set before, (\d+) after \(.*2 bits into one of 1`)
}

func TestInvariantAnswering(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	r.eng.BreakAnswers()
	wantInvariant(t, r, "a delivery runs only for answers queued", `a delivery of none`)
}

func TestInvariantCacheAccounting(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	r.eng.BreakCacheUsed(5)
	var answers []error
	r.eng.Submit(unit("events", 1), func(err error) { answers = append(answers, err) }) // its commit caches the body
	v := wantInvariant(t, r, "body cache used = Σ entry sizes", `used (\d+), entries (\d+) hold (\d+)`)
	if v[0]-v[2] != 5 || v[1] != 1 {
		t.Fatalf("values %v", v)
	}
	r.settle()
	if len(answers) != 1 || !errors.Is(answers[0], engine.ErrClosed) {
		t.Fatalf("answers %v; want one, ErrClosed (the commit stopped before its acks)", answers)
	}
}

// manyOffsets returns n offsets under prefix.
func manyOffsets(prefix string, n int) segment.Offsets {
	o := make(segment.Offsets, n)
	for i := range o {
		o[i] = segment.Offset{Key: fmt.Sprintf("%s%06d", prefix, i), Value: 1}
	}
	return o
}

// A unit whose offsets and idempotency key together are more entries
// than a segment holds is invalid — it would fit no segment, not even
// alone — and is refused as such, not as backpressure for ever; the same
// offsets without the key are committed.
func TestUnitOffsetsCountTheIdempotencyKey(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	over := unit("events", 1)
	over.Offsets, over.IdempotencyKey = manyOffsets("a", segment.OffsetsEntriesMax), "k-over"
	refused := r.submit(over)
	r.until(func() bool { return refused.done }, "the answer")
	if !errors.Is(refused.err, engine.ErrInvalidUnit) || !strings.Contains(refused.err.Error(), "65537 entries with the idempotency key's") {
		t.Fatalf("answer %v; want the unit invalid, naming its entries", refused.err)
	}
	without := unit("events", 2)
	without.Offsets = over.Offsets // the same offsets, no key: they fit
	res := r.submit(without)
	r.until(func() bool { return res.done }, "the answer")
	if res.err != nil {
		t.Fatalf("a unit of %d entries: %v", segment.OffsetsEntriesMax, res.err)
	}
}

// The WAL bound holds when Submit seals the live accumulator to make room
// for a unit: that seal takes a slot admission counted as free. (Found by
// the WAL check: a unit was appended with the WAL at its limit, and two
// segments were committed with LiveSegmentsMax 1.)
func TestSealInSubmitKeepsWALBound(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.LiveSegmentsMax = 1
	r.cfg.TargetBytes = 16 << 20 // the units stay live until the second
	r.start()
	a, b := unit("events", 1), unit("events", 2)
	a.Offsets = manyOffsets("a", 40_000)
	b.Offsets = manyOffsets("b", 30_000) // with a's: above OffsetsEntriesMax, a is sealed
	ra, rb := r.submit(a), r.submit(b)
	r.until(func() bool { return ra.done && rb.done }, "answers")
	if ra.err != nil || !errors.Is(rb.err, engine.ErrResourceExhausted) || !strings.Contains(rb.err.Error(), "WAL backlog of 1 segments") {
		t.Fatalf("answers %v, %v; want the second refused by the WAL bound", ra.err, rb.err)
	}
	if r.eng.Err() != nil || len(r.eng.Segments()) != 1 {
		t.Fatalf("engine %v, %d segments owned, limit 1", r.eng.Err(), len(r.eng.Segments()))
	}
	// A unit appended past the bound breaks the invariant.
	r.eng.AppendUnchecked(unit("events", 3), func(error) {})
	v := wantInvariant(t, r, "walSegments + live ≤ LiveSegmentsMax", `(\d+) segments owned, (\d+) queued, active false, and live, limit (\d+)`)
	if v[0] != 1 || v[1] != 0 || v[2] != 1 {
		t.Fatalf("values %v", v)
	}
}

// One unanswered unit per offset key: a second one appended for the key
// breaks it.
func TestInvariantOneUnitPerOffsetKey(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	first := r.submit(withOffset(unit("events", 1), "src/a", 1))
	second := &result{}
	r.eng.AppendUnchecked(withOffset(unit("events", 2), "src/a", 2), func(err error) { second.done, second.err = true, err })
	wantInvariant(t, r, "one unanswered unit per offset key", `"src/a" has one at \[\{src/a 1\}\], another appended at \[\{src/a 2\}\]`)
	r.until(func() bool { return first.done && second.done }, "answers")
	if !errors.Is(first.err, engine.ErrClosed) || !errors.Is(second.err, engine.ErrClosed) {
		t.Fatalf("answers %v, %v; want both ErrClosed", first.err, second.err)
	}
}

// A unit with an idempotency key whose offsets are those of a pending
// unit is that unit resubmitted (Unit.Offsets): it shares its answer and
// is stored once. (Found by the offset-key check: it was appended as a
// second unit for the key.)
func TestIdemKeyUnitWithPendingOffsetsJoins(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	first := r.submit(withOffset(unit("events", 1), "src/a", 1))
	again := withOffset(unit("events", 1), "src/a", 1)
	again.IdempotencyKey = "k"
	second := r.submit(again)
	r.until(func() bool { return first.done && second.done }, "answers")
	if first.err != nil || second.err != nil || r.eng.Err() != nil {
		t.Fatalf("answers %v, %v, engine %v", first.err, second.err, r.eng.Err())
	}
	if got := r.committedValues()["events"]; len(got) != 1 {
		t.Fatalf("committed %v, want the unit once", got)
	}
}

// busyEngine returns a rig whose engine owns segments with jobs in lanes,
// caches bodies and holds a live unit.
func busyEngine(t testing.TB) *rig {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	r.start()
	cs.down["b"] = true
	for i := range 6 {
		a, b := r.submit(unit("a", int64(i))), r.submit(unit("b", int64(i)))
		r.until(func() bool { return a.done && b.done }, "acks")
	}
	r.submit(unit("a", 99))
	if !r.eng.CheckInvariants() {
		t.Fatalf("an invariant is broken: %v", r.eng.Err())
	}
	return r
}

// The checks cost their comparisons only: none allocates while it holds.
func TestInvariantChecksDoNotAllocate(t *testing.T) {
	r := busyEngine(t)
	if n := testing.AllocsPerRun(100, func() { r.eng.CheckInvariants() }); n != 0 {
		t.Fatalf("the checks allocate %v times per run", n)
	}
}

// BenchmarkInvariantChecks: every check that holds between events, once.
func BenchmarkInvariantChecks(b *testing.B) {
	r := busyEngine(b)
	b.ReportAllocs()
	for b.Loop() {
		r.eng.CheckInvariants()
	}
}
