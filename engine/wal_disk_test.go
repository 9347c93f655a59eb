package engine_test

import (
	"fmt"
	"strconv"

	"errors"
	"pgregory.net/rapid"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/wal"
	"github.com/skipprd/skipprd/sim"
)

// newDiskRig is a rig whose engines run the disk WAL over the simulated
// disk (with its crash model), segments going to the simulated store.
func newDiskRig(t tb, partitions int) *rig {
	r := newRig(t, sim.StoreConfig{})
	r.disk = sim.NewDisk(r.sched, r.root.Split("disk"), sim.DiskConfig{})
	d := engine.DefaultDiskWAL()
	d.Partitions = partitions
	d.SegmentBytes = 64 << 10
	d.BatchBytes = 16 << 10
	d.PinnedMax = 5 * time.Minute
	r.cfg.Disk = d
	r.cfg.MaxDelay = time.Hour // nothing is flushed unless a test asks
	r.cfg.TargetBytes = 64 << 20
	return r
}

// failMarkers makes every marker PUT fail while *on: nothing commits.
func (r *rig) failMarkers(on *bool) {
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpPut).Suffix(".seg.commit").While(on))
}

// crash kills the incarnation and crashes the disk (power loss).
func (r *rig) crash() {
	r.inc.Kill()
	r.inc = nil
	r.disk.Crash(r.root.Split("crash"))
}

// loggedUnits scans every durable log segment and returns the sequence
// numbers of the unit records each partition holds, from the disk's
// durable bytes (not the engine's word).
func (r *rig) loggedUnits() map[uint32][]uint64 {
	out := map[uint32][]uint64{}
	for _, p := range r.disk.Paths() {
		if !strings.HasSuffix(p, ".wal") {
			continue
		}
		_, durable := r.disk.File(p)
		res := wal.Scan(p, durable)
		for _, ent := range res.Entries {
			rec, err := wal.DecodeRecord(p, ent.Payload)
			if err != nil {
				r.t.Fatal(err)
			}
			if u, ok := rec.(*wal.UnitRecord); ok {
				part := uint32(0)
				if _, err := fmtSscan(p, &part); err != nil {
					r.t.Fatal(err)
				}
				out[part] = append(out[part], u.Seq)
			}
		}
	}
	return out
}

func fmtSscan(path string, part *uint32) (int, error) {
	dir := strings.Split(path, "/")[1]
	p, ok := wal.ParsePartitionDir(dir)
	if !ok {
		return 0, errors.New("bad partition dir " + dir)
	}
	*part = p
	return 1, nil
}

// A unit is acked at the group-commit fsync, before any segment exists,
// and its entry is in the disk's durable bytes when the ack comes.
func TestDiskAckAtFsync(t *testing.T) {
	r := newDiskRig(t, 1)
	r.start()
	res := r.submit(unit("ns", 1, 2, 3))
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if n := r.markers(); n != 0 {
		t.Fatalf("%d markers at the ack: the disk WAL acks at the fsync", n)
	}
	if got := r.loggedUnits()[0]; !slices.Equal(got, []uint64{1}) {
		t.Fatalf("durable log holds units %v, want [1]", got)
	}
}

// Acked units survive a power loss before any flush, and reach the store
// exactly once after the restart (replayed into the memtable).
func TestDiskReplayAfterCrash(t *testing.T) {
	r := newDiskRig(t, 2)
	r.start()
	var res []*result
	for i := range 20 {
		res = append(res, r.submit(unit([]string{"a", "b", "c"}[i%3], int64(i))))
	}
	r.until(func() bool { return allDone(res) }, "acks")
	for _, x := range res {
		if !x.done || x.err != nil {
			t.Fatalf("unit not acked: %+v", x)
		}
	}
	r.crash()
	r.start()
	r.closeEngine()
	got := r.committedValues()
	var all []int64
	for _, ns := range []string{"a", "b", "c"} {
		all = append(all, got[ns]...)
	}
	slices.Sort(all)
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(all, want) {
		t.Fatalf("committed %v, want each of 0..19 once", all)
	}
}

func allDone(res []*result) bool {
	for _, x := range res {
		if !x.done {
			return false
		}
	}
	return true
}

// loggedSeals returns the snapshot ids of the seal records in the disk's
// durable bytes.
func (r *rig) loggedSeals() []string {
	var out []string
	for _, p := range r.disk.Paths() {
		if !strings.HasSuffix(p, ".wal") {
			continue
		}
		_, durable := r.disk.File(p)
		for _, ent := range wal.Scan(p, durable).Entries {
			if s, ok := mustRecord(r.t, p, ent.Payload).(*wal.SealRecord); ok {
				out = append(out, engine.SnapshotID{Epoch: s.Snapshot.Epoch, Seq: s.Snapshot.Seq}.String())
			}
		}
	}
	return out
}

func mustRecord(t tb, name string, payload []byte) wal.Record {
	rec, err := wal.DecodeRecord(name, payload)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A generation sealed (its boundary logged) but never committed is
// persisted again after a crash under its own snapshot id: the marker
// that lands names the id the seal record named.
func TestDiskReplayKeepsSnapshotID(t *testing.T) {
	r := newDiskRig(t, 1)
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpPut).Suffix(".seg.commit"))
	eng := r.start()
	res := r.submit(unit("ns", 7, 8))
	r.until(func() bool { return res.done }, "ack")
	eng.Close(func(error) {}) // seals live: the marker PUT keeps failing
	r.until(func() bool { return len(r.loggedSeals()) > 0 }, "seal logged")
	sealed := r.loggedSeals()[0]
	r.crash()
	r.faults = nil
	r.start()
	r.closeEngine()
	var markers []string
	for _, k := range r.store.Keys("wal/test/p_year=") {
		if strings.HasSuffix(k, ".seg.commit") {
			markers = append(markers, k)
		}
	}
	if len(markers) != 1 || !strings.Contains(markers[0], sealed) {
		t.Fatalf("markers %v, want one for the logged snapshot %s", markers, sealed)
	}
	if got := r.committedValues()["ns"]; !slices.Equal(got, []int64{7, 8}) {
		t.Fatalf("committed %v, want [7 8]", got)
	}
}

// An fsync failure poisons the segment: the unit is answered
// ErrUnknownOutcome, the log rolls to a new segment, and the same unit
// retried with its idempotency key is stored once.
func TestDiskFsyncFailurePoisons(t *testing.T) {
	r := newDiskRig(t, 1)
	// The second fsync of the log fails; the first is the segment header's.
	r.disk.SetFaults(sim.DiskRules(sim.DiskFault(sim.DiskIOError, sim.DiskSync).Suffix(".wal").Nth(2)))
	eng := r.start()
	u := unit("ns", 42)
	u.IdempotencyKey = "k1"
	res := r.submit(u)
	r.until(func() bool { return res.done }, "answer")
	if !errors.Is(res.err, engine.ErrUnknownOutcome) {
		t.Fatalf("answer %v, want ErrUnknownOutcome", res.err)
	}
	res = r.submit(u)
	r.until(func() bool { return res.done }, "retry")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if st := eng.Stats(); st.WALSyncFailures != 1 || st.WALSegmentsCreated != 2 {
		t.Fatalf("sync failures %d, segments created %d; want 1 and 2", st.WALSyncFailures, st.WALSegmentsCreated)
	}
	r.crash() // the poisoned segment's entry may be durable: it must not come back twice
	r.start()
	r.closeEngine()
	if got := r.committedValues()["ns"]; !slices.Equal(got, []int64{42}) {
		t.Fatalf("committed %v, want [42] once", got)
	}
}

// nsFor returns a namespace that the disk WAL routes to partition part
// (of n), found by asking the engine's router through a probe.
func nsFor(part, n uint32) string {
	for i := 0; ; i++ {
		ns := "ns" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if engine.WALPartitionOf(ns, "", int(n)) == part {
			return ns
		}
	}
}

// A bit flip in the middle of a partition's log — a bad entry followed
// by valid ones — is corruption: that partition halts (alert, writes
// refused, nothing of it delivered) and the other partition keeps
// working, its units all delivered.
func TestDiskMidSegmentCorruptionHaltsOnePartition(t *testing.T) {
	r := newDiskRig(t, 2)
	eng := r.start()
	bad, good := nsFor(0, 2), nsFor(1, 2)
	var res []*result
	for i := range 6 { // one unit per batch: entries follow each other
		res = append(res, r.submit(unit(bad, int64(i))), r.submit(unit(good, int64(100+i))))
		r.until(func() bool { return allDone(res) }, "acks")
	}
	_ = eng
	r.crash()
	// Flip a bit inside the second unit entry of partition 0.
	seg := wal.SegmentPath(0, 1)
	_, durable := r.disk.File(seg)
	entries := wal.Scan(seg, durable).Entries
	if len(entries) < 4 {
		t.Fatalf("partition 0 holds %d entries", len(entries))
	}
	if !r.disk.FlipBit(seg, entries[2].Offset+6, 3) {
		t.Fatal("flip missed")
	}
	eng = r.start()
	if eng.Stats().WALCorruptions != 1 || eng.LastAlert() == nil || !errors.Is(eng.LastAlert(), engine.ErrCorrupt) {
		t.Fatalf("corruptions %d, alert %v: want 1 and an ErrCorrupt alert", eng.Stats().WALCorruptions, eng.LastAlert())
	}
	x := r.submit(unit(bad, 999))
	y := r.submit(unit(good, 1000))
	r.until(func() bool { return x.done && y.done }, "answers")
	if !errors.Is(x.err, engine.ErrPartitionHalted) || y.err != nil {
		t.Fatalf("halted partition answered %v, healthy one %v", x.err, y.err)
	}
	r.closeEngine()
	got := r.committedValues()
	if !slices.Equal(got[good], []int64{100, 101, 102, 103, 104, 105, 1000}) {
		t.Fatalf("healthy partition delivered %v", got[good])
	}
	// The halted partition is frozen as found: nothing of it delivered.
	if len(got[bad]) != 0 {
		t.Fatalf("halted partition delivered %v", got[bad])
	}
}

// Property: whatever the crashes (power loss, with torn writes of the
// rewritten tail block), fsync failures and flushes, every unit the disk
// WAL acked reaches the store exactly once, and nothing else does more
// than once. The tail block of a segment is rewritten by every batch, so
// this is also the proof that a torn rewrite never loses acked bytes.
func TestDiskCrashProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newDiskRig(t, rapid.IntRange(1, 3).Draw(t, "partitions"))
		r.cfg.Disk.SegmentBytes = 8 << 10
		r.cfg.Disk.BatchBytes = int64(rapid.IntRange(200, 4<<10).Draw(t, "batch"))
		if rapid.Bool().Draw(t, "batchSync") {
			r.cfg.Disk.Sync = engine.BatchSync
		}
		r.cfg.TargetBytes = int64(rapid.IntRange(1<<10, 16<<10).Draw(t, "target"))
		r.cfg.MaxDelay = time.Duration(rapid.IntRange(1, 500).Draw(t, "delayMs")) * time.Millisecond
		failRate := rapid.IntRange(0, 20).Draw(t, "syncFailPct")
		frand := r.root.Split("syncfail")
		if failRate > 0 {
			r.disk.SetFaults(sim.DiskRules(sim.DiskFault(sim.DiskIOError, sim.DiskSync).Suffix(".wal").Chance(float64(failRate)/100, frand)))
		}
		acked := map[int64]bool{}
		submitted := map[int64]bool{}
		next := int64(0)
		for round := range rapid.IntRange(1, 4).Draw(t, "rounds") {
			r.start()
			var res []*result
			var vals []int64
			for range rapid.IntRange(1, 30).Draw(t, "units") {
				v := next
				next++
				u := unit(nsFor(uint32(v%3), 3), v)
				u.IdempotencyKey = fmtKey(v)
				submitted[v] = true
				res = append(res, r.submit(u))
				vals = append(vals, v)
				r.sched.RunUntil(r.sched.Now() + time.Duration(rapid.IntRange(0, 3000).Draw(t, "gapUs"))*time.Microsecond)
			}
			// A source retries a unit whose outcome is unknown, with its key.
			for range 100000 {
				if allDone(res) || !r.sched.Step() {
					break
				}
			}
			if !allDone(res) {
				held, _, _, _ := r.eng.Memory()
				t.Fatalf("answers never came: stats %+v held %d idle %v err %v walerr %v", r.eng.Stats(), held, r.eng.Idle(), r.eng.Err(), r.eng.LastWALError())
			}
			for i, x := range res {
				if x.err != nil {
					u := unit(nsFor(uint32(vals[i]%3), 3), vals[i])
					u.IdempotencyKey = fmtKey(vals[i])
					res = append(res, r.submit(u))
					vals = append(vals, vals[i])
				}
			}
			r.sched.RunUntil(r.sched.Now() + time.Duration(rapid.IntRange(0, 2000).Draw(t, "beforeCrashMs"))*time.Millisecond)
			for i, x := range res {
				if x.done && x.err == nil {
					acked[vals[i]] = true
				}
			}
			_ = round
			r.crash()
		}
		eng := r.start()
		r.closeEngine()
		seen := map[int64]int{}
		for _, vs := range r.committedValues() {
			for _, v := range vs {
				seen[v]++
			}
		}
		var lost []int64
		for v := range acked {
			if seen[v] != 1 {
				lost = append(lost, v)
			}
		}
		if len(lost) > 0 {
			slices.Sort(lost)
			var ms []string
			for m, n := range eng.Marks() {
				if n > 0 {
					ms = append(ms, fmt.Sprintf("%v=%d", engine.Mark(m), n))
				}
			}
			t.Fatalf("acked units %v stored %v times; acked %d; stats %+v marks %v", lost, seen, len(acked), eng.Stats(), ms)
		}
		for v, n := range seen {
			if n > 1 || !submitted[v] {
				t.Fatalf("unit %d stored %d times (submitted %v)", v, n, submitted[v])
			}
		}
	})
}

func fmtKey(v int64) string { return "k" + strconv.FormatInt(v, 10) }

// writeFile creates path on the rig's disk with b, durably, through an
// incarnation of its own (the test's hands).
func (r *rig) writeFile(path string, b []byte) {
	r.t.Helper()
	inc := r.sched.NewIncarnation()
	d := r.disk.Client(inc)
	step := func(what string, start func(done func(error))) {
		r.t.Helper()
		var done bool
		var err error
		start(func(e error) { done, err = true, e })
		r.until(func() bool { return done }, what)
		if err != nil {
			r.t.Fatalf("%s %s: %v", what, path, err)
		}
	}
	dir := path[:strings.LastIndex(path, "/")]
	step("mkdir", func(done func(error)) { d.MkdirAll(dir, done) })
	var f engine.File
	step("create", func(done func(error)) {
		d.Open(path, engine.OpenMode{Create: true, Write: true}, func(x engine.File, err error) { f = x; done(err) })
	})
	step("write", func(done func(error)) { f.WriteAt(b, 0, done) })
	step("sync", func(done func(error)) { f.Sync(done) })
	for _, dd := range []string{"", "wal", dir} {
		step("syncdir", func(done func(error)) { d.SyncDir(dd, done) })
	}
	inc.Kill()
}

type seqUnit struct {
	u   engine.Unit
	seq uint64
}

// logImage frames records as a segment image.
func logImage(t tb, recs ...any) []byte {
	var b []byte
	for _, rec := range recs {
		var payload []byte
		var err error
		switch rec := rec.(type) {
		case wal.Header:
			payload, err = wal.AppendHeader(nil, rec)
		case seqUnit:
			payload, err = engine.UnitPayloadForTest(rec.u, rec.seq)
		}
		if err != nil {
			t.Fatal(err)
		}
		b = wal.AppendEntry(b, payload)
	}
	return append(b, make([]byte, 4096)...)
}

// A segment's header says from which sequence number it continues: the
// entries of a poisoned batch that reached disk anyway (outcome unknown,
// never acked, retried by their source) are ignored, never delivered
// beside their retries.
func TestDiskPoisonedBatchSuperseded(t *testing.T) {
	r := newDiskRig(t, 1)
	seq := func(u engine.Unit, s uint64) seqUnit { return seqUnit{u, s} }
	a, b, c := unit("ns", 1), unit("ns", 2), unit("ns", 3)
	a.IdempotencyKey, b.IdempotencyKey, c.IdempotencyKey = "a", "b", "c"
	// Segment 1: a (acked), then the poisoned batch b, c. Segment 2
	// starts over at 2 with c's retry.
	r.writeFile(wal.SegmentPath(0, 1), logImage(t,
		wal.Header{Partition: 0, Segment: 1, FirstSeq: 1, SegmentBytes: 8192}, seq(a, 1), seq(b, 2), seq(c, 3)))
	r.writeFile(wal.SegmentPath(0, 2), logImage(t,
		wal.Header{Partition: 0, Segment: 2, FirstSeq: 2, SegmentBytes: 8192}, seq(c, 2)))
	eng := r.start()
	if eng.Marks()[engine.MarkWALStaleDiscarded] != 2 {
		t.Fatalf("stale entries discarded: %d, want 2", eng.Marks()[engine.MarkWALStaleDiscarded])
	}
	r.closeEngine()
	got := r.committedValues()["ns"]
	slices.Sort(got)
	if !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("delivered %v, want [1 3]: b's outcome was unknown and it was not retried; c once", got)
	}
}

// A unit acked at its fsync releases its offset key then: the key may
// belong to the source's next unit, still pending, when the acked unit's
// segment commits — and that commit must not release it again, or a
// resubmission of the pending unit is stored twice (seed 67).
func TestDiskCommitKeepsNewerPendingKeys(t *testing.T) {
	r := newDiskRig(t, 1)
	r.cfg.MaxDelay = 10 * time.Millisecond
	eng := r.start()
	a := r.submit(withOffset(unit("ns", 1), "src", 1))
	r.until(func() bool { return a.done && len(r.loggedSeals()) > 0 }, "A acked and its generation sealed")
	slow := true
	r.disk.SetFaults(sim.DiskRules(sim.DiskFault(sim.DiskOK, sim.DiskSync).Suffix(".wal").Delay(10 * time.Second).While(&slow)))
	b := r.submit(withOffset(unit("ns", 2), "src", 2))
	r.until(func() bool { return eng.Stats().Commits == 1 }, "A's segment committed")
	if b.done {
		t.Fatal("B answered before its slow fsync")
	}
	again := r.submit(withOffset(unit("ns", 2), "src", 2)) // the source resubmits B
	slow = false
	r.until(func() bool { return b.done && again.done }, "answers")
	if b.err != nil || again.err != nil {
		t.Fatalf("answers %v, %v", b.err, again.err)
	}
	r.closeEngine()
	if got := r.committedValues()["ns"]; !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("committed %v, want [1 2]: B once", got)
	}
}

// A committed segment whose generation has units in a partition that
// later halts on corruption can never be logged flushed there: it is
// kept (never reclaimed), so a repaired log could not replay its units
// a second time.
func TestDiskHaltedPartitionKeepsItsSegments(t *testing.T) {
	r := newDiskRig(t, 2)
	r.cfg.MaxDelay = 10 * time.Millisecond
	dest, _ := withSink(r)
	r.start()
	bad, good := nsFor(0, 2), nsFor(1, 2)
	a, b := r.submit(unit(bad, 1)), r.submit(unit(good, 2))
	r.until(func() bool { return a.done && b.done && len(r.loggedSeals()) == 2 }, "acks and seals")
	// The flushed records never become durable: their fsyncs hang.
	r.disk.SetFaults(sim.DiskRules(sim.DiskFault(sim.DiskOK, sim.DiskSync).Suffix(".wal").Delay(time.Hour)))
	r.until(func() bool { return r.markers() == 1 }, "the generation's marker")
	r.sched.RunUntil(r.sched.Now() + time.Second)
	r.crash()
	r.disk.SetFaults(nil)
	seg := wal.SegmentPath(0, 1)
	_, durable := r.disk.File(seg)
	entries := wal.Scan(seg, durable).Entries
	if len(entries) < 3 { // header, unit, seal
		t.Fatalf("partition 0 holds %d entries", len(entries))
	}
	r.disk.FlipBit(seg, entries[1].Offset+6, 2) // the unit, before the seal
	eng := r.start()
	r.settle()
	if eng.Marks()[engine.MarkWALHaltedKeep] == 0 || eng.Stats().WALCorruptions != 1 {
		t.Fatalf("halted-keep %d, corruptions %d", eng.Marks()[engine.MarkWALHaltedKeep], eng.Stats().WALCorruptions)
	}
	if n := len(eng.Segments()); n != 1 {
		t.Fatalf("%d segments owned after a minute: the kept one must stay", n)
	}
	if got := destValues(dest); len(got[bad]) != 1 || len(got[good]) != 1 {
		t.Fatalf("the kept segment is still applied, once: %v", got)
	}
}

// keyedUnit is a unit of namespace ns carrying n offset keys of its own.
func keyedUnit(ns string, v int64, n int) engine.Unit {
	u := unit(ns, v)
	u.Offsets = manyOffsets(fmt.Sprintf("%s/%d/", ns, v), n)
	return u
}

// A durable unit that cannot join live (a snapshot limit, and live
// cannot be sealed while persists fail) waits in the backlog — acked,
// pinning its log segment — and joins a later generation: every unit is
// committed once.
func TestDiskBacklogKeepsAckedUnits(t *testing.T) {
	r := newDiskRig(t, 1)
	r.cfg.MaxDelay = 10 * time.Millisecond
	r.cfg.QueueCapacity = 1
	failing := true
	r.failMarkers(&failing)
	eng := r.start()
	var res []*result
	// 25,000 keys each: two fit a snapshot, three do not. With one
	// snapshot persisting and one queued, the seventh finds no room.
	for v := range int64(7) {
		res = append(res, r.submit(keyedUnit("ns", v, 25_000)))
	}
	r.until(func() bool { return allDone(res) }, "acks")
	for _, x := range res {
		if x.err != nil {
			t.Fatal(x.err)
		}
	}
	if eng.Marks()[engine.MarkWALBacklog] == 0 {
		t.Fatal("no unit waited in the backlog")
	}
	failing = false
	r.closeEngine()
	got := r.committedValues()["ns"]
	slices.Sort(got)
	if !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("committed %v, want each of 0..6 once", got)
	}
}

// Sequence numbers have no gaps: a segment whose header continues past
// the sequence the log before it reached means entries were lost — the
// partition halts (alert), nothing of it is delivered.
func TestDiskSequenceGapHalts(t *testing.T) {
	r := newDiskRig(t, 1)
	a, b := unit("ns", 1), unit("ns", 2)
	r.writeFile(wal.SegmentPath(0, 1), logImage(t,
		wal.Header{Partition: 0, Segment: 1, FirstSeq: 1, SegmentBytes: 8192}, seqUnit{a, 1}, seqUnit{a, 2}))
	r.writeFile(wal.SegmentPath(0, 2), logImage(t,
		wal.Header{Partition: 0, Segment: 2, FirstSeq: 5, SegmentBytes: 8192}, seqUnit{b, 5}))
	eng := r.start()
	if eng.Stats().WALCorruptions != 1 || !strings.Contains(fmt.Sprint(eng.LastAlert()), "a gap") {
		t.Fatalf("corruptions %d, alert %v: want the gap named", eng.Stats().WALCorruptions, eng.LastAlert())
	}
	x := r.submit(unit("ns", 3))
	r.until(func() bool { return x.done }, "answer")
	if !errors.Is(x.err, engine.ErrPartitionHalted) {
		t.Fatalf("answer %v, want ErrPartitionHalted", x.err)
	}
}

// A unit prepared off the loop (PrepareUnit, as the host does) is logged
// and committed exactly as the same unit submitted raw: the two worlds
// store the same objects, byte for byte, and only the prepared one
// passes the wal-prepared mark.
func TestDiskPreparedUnitSameAsRaw(t *testing.T) {
	run := func(prepare bool) (map[string]string, uint64) {
		r := newDiskRig(t, 2)
		eng := r.start()
		var res []*result
		for i := range 12 {
			u := unit([]string{"a", "b"}[i%2], int64(i), int64(i*i))
			if prepare {
				p, err := engine.PrepareUnit(u)
				if err != nil {
					t.Fatal(err)
				}
				u = p
			}
			res = append(res, r.submit(u))
		}
		r.until(func() bool { return allDone(res) }, "acks")
		r.closeEngine()
		objects := map[string]string{}
		for _, k := range r.store.Keys("wal/") {
			b, _ := r.store.Object(k)
			objects[k] = string(b)
		}
		return objects, eng.Marks()[engine.MarkWALPrepared]
	}
	raw, rawMarks := run(false)
	prep, prepMarks := run(true)
	if rawMarks != 0 || prepMarks != 12 {
		t.Fatalf("wal-prepared passed %d times raw, %d prepared; want 0 and 12", rawMarks, prepMarks)
	}
	if len(raw) == 0 || len(raw) != len(prep) {
		t.Fatalf("%d objects raw, %d prepared", len(raw), len(prep))
	}
	for k, v := range raw {
		if prep[k] != v {
			t.Fatalf("object %s differs between a raw and a prepared submission (%d vs %d bytes)", k, len(v), len(prep[k]))
		}
	}
}

// A prepared unit whose batches were replaced afterwards is encoded
// again: what its log entry replays after a crash is the batches it was
// submitted with, not the ones it was prepared with.
func TestDiskPreparedUnitChangedIsEncodedAgain(t *testing.T) {
	r := newDiskRig(t, 1)
	r.start()
	p, err := engine.PrepareUnit(unit("ns", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	p.Batches = unit("ns", 3, 4).Batches
	res := r.submit(p)
	r.until(func() bool { return res.done }, "ack")
	if res.err != nil {
		t.Fatal(res.err)
	}
	r.crash()
	r.start()
	r.closeEngine()
	if got := r.committedValues()["ns"]; !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("replayed %v, want the submitted batches [3 4]", got)
	}
}

// PrepareUnit refuses what Submit would, as ErrInvalidUnit.
func TestPrepareUnitRefusesInvalid(t *testing.T) {
	u := unit("ns", 1)
	u.Schema = nil
	if _, err := engine.PrepareUnit(u); !errors.Is(err, engine.ErrInvalidUnit) || !strings.Contains(err.Error(), "no schema") {
		t.Fatalf("PrepareUnit(no schema) = %v, want ErrInvalidUnit naming it", err)
	}
	u = unit("ns", 1)
	u.Key.Namespace = ""
	if _, err := engine.PrepareUnit(u); !errors.Is(err, engine.ErrInvalidUnit) {
		t.Fatalf("PrepareUnit(no namespace) = %v, want ErrInvalidUnit", err)
	}
}

// Linux may drop the pages of a failed fsync and still return them to
// reads. A process killed right after such an error (before it rolled to
// a new segment) leaves its unit in the page cache only: the next process
// reads it back, but must not take it as committed — a retry of it is
// answered only when its generation commits to the store, never from the
// log entry alone, which a power loss can still take away.
func TestDiskFsyncErrorThenKillRetryWaitsForCommit(t *testing.T) {
	r := newDiskRig(t, 1)
	armed := false
	// Once armed, the second fsync of the log fails: the unit's batch; the
	// first is the new segment's header.
	r.disk.SetFaults(sim.DiskRules(sim.DiskFault(sim.DiskIOError, sim.DiskSync).Suffix(".wal").While(&armed).Nth(2)))
	markersFail := true
	r.failMarkers(&markersFail)
	eng := r.start()
	armed = true
	u := unit("ns", 42)
	u.IdempotencyKey = "k1"
	first := r.submit(u)
	r.until(func() bool { return eng.Stats().WALSyncFailures == 1 }, "the fsync error")
	r.inc.Kill() // the process dies before it rolled past the error; the machine (and its page cache) stays up
	r.inc = nil
	if first.done {
		t.Fatalf("the unit was answered (%v) before the process died", first.err)
	}
	eng = r.start()
	if st := eng.Stats(); st.WALReplayedUnits != 1 {
		t.Fatalf("replayed %d units, want the page-cache-only one", st.WALReplayedUnits)
	}
	retry := r.submit(u)
	r.sched.RunUntil(r.sched.Now() + 10*time.Second)
	if retry.done {
		t.Fatalf("the retry was answered (%v) while the replayed unit's generation cannot commit: its entry may be in the page cache only", retry.err)
	}
	r.crash() // power loss: the entry was never durable
	markersFail = false
	eng = r.start()
	r.closeEngine()
	if got := r.committedValues()["ns"]; len(got) != 0 {
		t.Fatalf("committed %v: the unit was never durable and never acked", got)
	}
}

// After a restart the retry of a replayed unit is answered once its
// generation commits, and the unit is stored once.
func TestDiskReplayedRetryAnsweredAtCommit(t *testing.T) {
	r := newDiskRig(t, 1)
	r.start()
	u := withOffset(unit("ns", 7), "src/0", 1)
	u.IdempotencyKey = "k7"
	res := r.submit(u)
	r.until(func() bool { return res.done }, "ack")
	r.inc.Kill()
	r.inc = nil
	eng := r.start()
	if got, ok := eng.Offset("src/0"); ok {
		t.Fatalf("offset of src/0 is %d right after replay, want none until the replayed unit commits", got)
	}
	retry := r.submit(u)
	r.until(func() bool { return retry.done }, "retry answered")
	if retry.err != nil {
		t.Fatal(retry.err)
	}
	if n := r.markers(); n != 1 {
		t.Fatalf("%d markers when the retry was answered, want the replayed generation's", n)
	}
	if m := eng.Marks()[engine.MarkWALReplayJoined]; m != 1 {
		t.Fatalf("wal-replay-joined passed %d times, want 1", m)
	}
	if st := eng.Stats(); st.UnitsAcked != 1 || st.RowsAcked != 1 {
		t.Fatalf("acked %d units, %d rows; want the retried unit counted once (1, 1)", st.UnitsAcked, st.RowsAcked)
	}
	r.closeEngine()
	if got := r.committedValues()["ns"]; !slices.Equal(got, []int64{7}) {
		t.Fatalf("committed %v, want [7] once", got)
	}
}

// A generation rebuilt from the log logs its seal again before its
// marker is PUT: the seal recovery read may be in the page cache only,
// and a marker the log cannot tie to its units would let the next
// recovery replay them under a new id.
func TestDiskReplayedGenerationLogsItsSealAgain(t *testing.T) {
	r := newDiskRig(t, 1)
	markersFail := true
	r.failMarkers(&markersFail)
	eng := r.start()
	res := r.submit(unit("ns", 5))
	r.until(func() bool { return res.done }, "ack")
	eng.Close(func(error) {}) // seals live: the marker PUT keeps failing
	r.until(func() bool { return len(r.loggedSeals()) > 0 }, "seal logged")
	r.crash()
	r.start()
	r.until(func() bool { return len(r.loggedSeals()) == 2 }, "the seal logged again")
	if s := r.loggedSeals(); s[0] != s[1] {
		t.Fatalf("seal records %v, want the rebuilt generation's id twice", s)
	}
	if n := r.markers(); n != 0 {
		t.Fatalf("%d markers while marker PUTs fail", n)
	}
	markersFail = false
	r.closeEngine()
	if got := r.committedValues()["ns"]; !slices.Equal(got, []int64{5}) {
		t.Fatalf("committed %v, want [5] once", got)
	}
}

// loggedFlushed returns, per partition, the snapshot ids of the flushed
// records in the disk's durable bytes.
func (r *rig) loggedFlushed() map[uint32][]string {
	out := map[uint32][]string{}
	for _, p := range r.disk.Paths() {
		if !strings.HasSuffix(p, ".wal") {
			continue
		}
		var part uint32
		if _, err := fmtSscan(p, &part); err != nil {
			r.t.Fatal(err)
		}
		_, durable := r.disk.File(p)
		for _, ent := range wal.Scan(p, durable).Entries {
			if f, ok := mustRecord(r.t, p, ent.Payload).(*wal.FlushedRecord); ok {
				out[part] = append(out[part], engine.SnapshotID{Epoch: f.Snapshot.Epoch, Seq: f.Snapshot.Seq}.String())
			}
		}
	}
	return out
}

// A generation's flushed record durable in one of its partitions and not
// in the other (power lost between their fsyncs) is logged again in the
// other before its segment is reclaimed: otherwise, once the segment is
// gone and partition 1's log has moved on, the next recovery finds the
// seal alone, with no segment, and replays the units as new — stored
// twice (seed 67 found it).
func TestDiskFlushedInOnePartitionOnly(t *testing.T) {
	r := newDiskRig(t, 2)
	r.cfg.MaxDelay = 10 * time.Millisecond
	dest, _ := withSink(r)
	r.start()
	ns0, ns1 := nsFor(0, 2), nsFor(1, 2)
	a, b := r.submit(unit(ns0, 1)), r.submit(unit(ns1, 2))
	r.until(func() bool { return a.done && b.done && len(r.loggedSeals()) == 2 }, "acks and the seal in both partitions")
	// Partition 0's fsyncs hang from now on: its flushed record never
	// becomes durable; partition 1's does.
	r.disk.SetFaults(sim.DiskRules(sim.DiskFault(sim.DiskOK, sim.DiskSync).Prefix("wal/partition-0/").Delay(time.Hour)))
	r.until(func() bool { return len(r.loggedFlushed()[1]) == 1 }, "partition 1's flushed record")
	r.crash()
	r.disk.SetFaults(nil)
	if f := r.loggedFlushed(); len(f[0]) != 0 || len(f[1]) != 1 {
		t.Fatalf("flushed records %v, want one in partition 1 only", f)
	}
	eng := r.start()
	r.until(func() bool { return len(eng.Segments()) == 0 }, "the segment reclaimed")
	partly := eng.Marks()[engine.MarkWALFlushedPartly]
	// The invariant: a segment goes only once every partition holding
	// its seal holds its flushed record, durably.
	if f := r.loggedFlushed(); len(f[0]) == 0 {
		t.Fatalf("the segment was reclaimed while partition 0 holds its seal and no flushed record: %v", f)
	}
	r.crash()
	r.start()
	r.settle()
	if got := destValues(dest); !slices.Equal(got[ns0], []int64{1}) || !slices.Equal(got[ns1], []int64{2}) {
		t.Fatalf("applied %v, want each unit once", got)
	}
	if partly != 1 {
		t.Fatalf("flushed-partly marks %d, want 1", partly)
	}
}

// A graceful close waits, within its grace, for a segment whose every
// job is applied and whose reclaim only waits for the log's flushed
// record to be durable: with healthy sinks the WAL is empty once Close
// answers, however slow the fsync (seen: a loaded CI box closed first).
func TestCloseWaitsForTheFlushedRecord(t *testing.T) {
	r := newDiskRig(t, 1)
	var lat [sim.NumDiskOps]sim.Latency
	lat[sim.DiskSync] = sim.Latency{Base: 500 * time.Millisecond}
	r.disk = sim.NewDisk(r.sched, r.root.Split("slow-disk"), sim.DiskConfig{Latency: lat})
	closeDrains(t, r, 3)
}

// TestDiskFewerPartitionsRefused: a log written with two partitions does
// not start with one — recovery fails at once (no retry helps) with an
// error that names the partition and the count to set; with two again it
// starts and delivers every acked unit.
func TestDiskFewerPartitionsRefused(t *testing.T) {
	r := newDiskRig(t, 2)
	r.start()
	var units []*result
	for i := range 8 { // namespaces spread over both partitions
		units = append(units, r.submit(unit(fmt.Sprint("ns", i), int64(i))))
	}
	r.until(func() bool { return allDone(units) }, "acks")
	if got := r.loggedUnits(); len(got) != 2 {
		t.Fatalf("units logged in partitions %v; want both", got)
	}
	r.crash()
	r.cfg.Disk.Partitions = 1
	_, startErr := r.tryStart()
	if !errors.Is(startErr, wal.ErrConfig) || !strings.Contains(fmt.Sprint(startErr), "the log has partition 1, WAL_PARTITIONS is 1: set it to at least 2") {
		t.Fatalf("start with 1 partition: %v; want the configuration refused", startErr)
	}
	r.cfg.Disk.Partitions = 2
	r.start()
	r.closeEngine()
	var all []int64
	for _, vals := range r.committedValues() {
		all = append(all, vals...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int64{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("committed %v after starting with the log's partition count; want each of 0..7 once", all)
	}
}

// A cut-only segment never takes the WAL slot admission reserved for a
// unit on its way into live (cutOnlyDue). Here a quiet lane's interval
// runs out while a unit waits for its BATCH_SYNC fsync, one segment
// below LiveSegmentsMax: the unit joins live and carries the cut. Before,
// a cut-only segment filled the WAL, the unit was acked into the backlog,
// and after a power loss its replay committed a segment past the limit
// (seed 5992, swarm: 10 segments owned, limit 9).
func TestDiskCutOnlyLeavesAdmittedUnitsTheirSlot(t *testing.T) {
	const limit, syncEvery = 2, 10 * time.Second
	r := newDiskRig(t, 1)
	r.cfg.Disk.Sync, r.cfg.Disk.BatchSyncInterval = engine.BatchSync, syncEvery
	r.cfg.MaxDelay = 10 * time.Millisecond
	r.cfg.LiveSegmentsMax = limit
	r.cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: 2 * time.Second}
	_, cs := withSink(r)
	eng := r.start()
	cs.down["events"] = true // nothing is applied, nothing reclaimed
	first := r.submit(unit("events", 0))
	r.until(func() bool { return first.done && len(eng.Segments()) == 1 }, "the first unit's segment")
	// The second unit waits a sync interval for its fsync; the open job's
	// flush interval runs out meanwhile.
	second := r.submit(unit("events", 1))
	r.until(func() bool { return second.done }, "the second unit's ack")
	if first.err != nil || second.err != nil {
		t.Fatalf("acks: %v, %v", first.err, second.err)
	}
	r.sched.RunUntil(r.sched.Now() + 2*syncEvery) // its seal record's fsync, its commit
	if n := eng.Marks()[engine.MarkCutOnlySegment]; n != 0 {
		t.Fatalf("%d cut-only segments: one took the slot of the unit in flight, which carries the cut", n)
	}
	if n := len(eng.Segments()); n != limit {
		t.Fatalf("%d segments owned before the crash, want %d (each unit's)", n, limit)
	}
	r.crash()
	eng = r.start()
	r.sched.RunUntil(r.sched.Now() + 3*syncEvery)
	if err := eng.Err(); err != nil {
		t.Fatalf("the engine failed: %v", err)
	}
	if n := len(eng.Segments()); n > limit {
		t.Fatalf("%d segments owned after the restart, limit %d: an acked unit was left without its WAL slot", n, limit)
	}
	if got := r.committedValues()["events"]; !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("committed %v, want 0 and 1 once each", got)
	}
}
