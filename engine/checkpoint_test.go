package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

func idemUnit(ns string, v int64, key string) engine.Unit {
	u := unit(ns, v)
	u.IdempotencyKey = key
	return u
}

// answer submits u and steps until it is answered.
func (r *rig) answer(u engine.Unit) error {
	r.t.Helper()
	res := r.submit(u)
	r.until(func() bool { return res.done }, "answer")
	return res.err
}

// checkpointObject decodes a checkpoint object of the store.
func (r *rig) checkpointObject(key string) (segment.Offsets, bool) {
	r.t.Helper()
	raw, ok := r.store.Object(key)
	if !ok {
		return nil, false
	}
	_, o, err := segment.DecodeCheckpoint(key, raw)
	if err != nil {
		r.t.Fatalf("%s: %v", key, err)
	}
	return o, true
}

// idemBuckets returns the bucket objects' keys and, merged, what they
// hold.
func (r *rig) idemBuckets() ([]string, segment.Offsets) {
	var all segment.Offsets
	keys := r.store.Keys(r.eng.Layout().IdemBucketsPrefix())
	for _, k := range keys {
		o, _ := r.checkpointObject(k)
		all = segment.MaxMerge(all, o)
	}
	return keys, all
}

// recordApplied logs every mutation that lands in the store, in order.
func (r *rig) recordApplied() *[]string {
	var log []string
	r.store.OnApply = func(op sim.Op, key string) { log = append(log, op.String()+" "+key) }
	return &log
}

func hasIdemKeys(o segment.Offsets) bool {
	return slices.ContainsFunc(o, func(e segment.Offset) bool { return strings.HasPrefix(e.Key, "idem/") })
}

// A reclaim deletes a segment only once its idempotency key is durable
// in its bucket object: while bucket writes fail the segment stays, and
// the bucket PUT lands before the marker DELETE.
func TestReclaimWaitsForIdemBucket(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	r.start()
	log := r.recordApplied()
	blocked := true
	r.faults = func(op sim.Op, key string) sim.Outcome {
		if op == sim.OpPut && blocked && strings.Contains(key, "/_idem/") {
			return sim.Fail
		}
		return sim.OK
	}
	if err := r.answer(idemUnit("http", 1, "req-1")); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if got := destValues(dest)["http"]; !slices.Equal(got, []int64{1}) || r.markers() != 1 {
		t.Fatalf("bucket writes failing: destination %v, %d markers (want applied, not reclaimed)", got, r.markers())
	}
	blocked = false
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim")
	keys, held := r.idemBuckets()
	if len(keys) != 1 || !slices.ContainsFunc(held, func(e segment.Offset) bool { return e.Key == "idem/req-1" }) {
		t.Fatalf("bucket objects %v hold %v", keys, held)
	}
	put := slices.Index(*log, "put "+keys[0])
	del := slices.IndexFunc(*log, func(s string) bool { return strings.HasPrefix(s, "delete ") && strings.HasSuffix(s, ".seg.commit") })
	if put < 0 || del < 0 || put > del {
		t.Fatalf("bucket put at %d, marker delete at %d: %v", put, del, *log)
	}
}

// Idempotency keys outlive their reclaimed segments in bucket objects,
// not in _offsets: a new incarnation recovers them and answers a retry
// as a duplicate without storing it.
func TestIdemKeysSurviveReclaimAndRestart(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	r.start()
	for i, k := range []string{"req-1", "req-2", "req-3"} {
		if err := r.answer(idemUnit("http", int64(i), k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.answer(withOffset(unit("log", 9), "src/log", 9)); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim")
	if o, ok := r.checkpointObject("wal/test/_offsets"); !ok || hasIdemKeys(o) || len(o) != 1 {
		t.Fatalf("_offsets holds %v (exists %v); want only src/log", o, ok)
	}
	if _, held := r.idemBuckets(); len(held) != 3 {
		t.Fatalf("buckets hold %v, want the 3 keys", held)
	}
	r.start()
	if err := r.answer(idemUnit("http", 1, "req-2")); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if st := r.eng.Stats(); st.UnitsDuplicate != 1 || r.markers() != 0 {
		t.Fatalf("retry after restart: %d duplicates, %d markers", st.UnitsDuplicate, r.markers())
	}
	if got := destValues(dest)["http"]; !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("destination %v, want each unit once", got)
	}
}

// A reclaim whose segment's idempotency key expired while it waited (a
// sink down longer than the window) needs nothing from the checkpoint.
// Before buckets, the checkpoint was rewritten every CheckpointDelay
// forever and the segment never reclaimed.
func TestReclaimOfAnExpiredKeyFinishes(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.IdempotencyWindow = time.Minute
	_, cs := withSink(r)
	r.start()
	cs.down["http"] = true
	if err := r.answer(idemUnit("http", 1, "req-1")); err != nil {
		t.Fatal(err)
	}
	r.sched.RunUntil(r.sched.Now() + 3*time.Minute)
	cs.down["http"] = false
	puts := r.store.Counts(sim.OpPut).Issued
	r.settle()
	if !r.eng.Drained() || r.markers() != 0 {
		t.Fatalf("not reclaimed: %d segments owned, %d PUTs meanwhile", len(r.eng.Segments()), r.store.Counts(sim.OpPut).Issued-puts)
	}
}

// A bucket past the window is dropped and its object deleted: its keys
// are forgotten (a retry is a new unit). The sweeper deletes old bucket
// objects a crashed incarnation left, and leaves recent ones.
func TestExpiredIdemBucketsAreDeleted(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.IdempotencyWindow = time.Minute
	r.cfg.SweepInterval = time.Hour // expiry alone must delete the bucket
	dest, _ := withSink(r)
	r.start()
	if err := r.answer(idemUnit("http", 1, "req-1")); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	first, _ := r.idemBuckets()
	if len(first) != 1 {
		t.Fatalf("bucket objects %v", first)
	}
	r.sched.RunUntil(r.sched.Now() + 2*time.Minute)
	if err := r.answer(idemUnit("http", 2, "req-2")); err != nil { // its reclaim runs a round: expiry
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	r.settle()
	if _, ok := r.store.Object(first[0]); ok {
		t.Fatalf("expired bucket %s still exists", first[0])
	}
	if r.eng.Marks()[engine.MarkIdempotencyExpired] == 0 {
		t.Fatal("no expiry marked")
	}
	if err := r.answer(idemUnit("http", 3, "req-1")); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	if got := destValues(dest)["http"]; !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("destination %v: a retry after the window is a new unit", got)
	}

	r.cfg.SweepInterval = 10 * time.Second
	r.start()
	l := r.eng.Layout()
	width := engine.IdemBucketWidth(r.cfg.IdempotencyWindow).Milliseconds()
	now := r.sched.WallUnixMs() / width
	stale, young := l.IdemBucketKey(now-20), l.IdemBucketKey(now+40) // young: current when the sweep runs
	body, _ := segment.EncodeCheckpoint(0, segment.Offsets{{Key: "idem/zombie", Value: 1}})
	r.putObject(stale, body)
	r.putObject(young, body)
	r.sched.RunUntil(r.sched.Now() + 30*time.Second)
	if _, ok := r.store.Object(stale); !ok {
		t.Fatalf("the sweeper deleted %s, written 30 s ago (it may hold keys of a bucket width other than ours)", stale)
	}
	r.sched.RunUntil(r.sched.Now() + 90*time.Second) // last written more than window + a bucket ago
	if _, ok := r.store.Object(stale); ok || r.eng.Marks()[engine.MarkIdemBucketSwept] == 0 {
		t.Fatalf("the sweeper left %s", stale)
	}
	if _, ok := r.store.Object(young); !ok {
		t.Fatalf("the sweeper deleted %s, a bucket that is not old", young)
	}
}

// Two writers of one bucket only ever add: a write refused because the
// object exists (If-None-Match) or changed (If-Match) re-reads it, merges,
// and writes the union; the engine then knows the other writer's keys.
func TestConcurrentIdemBucketWritesMerge(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	_, cs := withSink(r)
	r.start()
	cs.down["http"] = true
	if err := r.answer(idemUnit("http", 1, "req-1")); err != nil {
		t.Fatal(err)
	}
	l := r.eng.Layout()
	width := engine.IdemBucketWidth(r.cfg.IdempotencyWindow).Milliseconds()
	now := r.sched.WallUnixMs()
	key := l.IdemBucketKey(now / width)
	other := func(keys ...string) {
		var o segment.Offsets
		for _, k := range keys {
			o = append(o, segment.Offset{Key: k, Value: uint64(now)})
		}
		body, err := segment.EncodeCheckpoint(0, o)
		if err != nil {
			t.Fatal(err)
		}
		r.putObject(key, body)
	}
	other("idem/other") // created while this engine's part had no version: If-None-Match refused
	cs.down["http"] = false
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	held, _ := r.checkpointObject(key)
	if len(held) != 2 || held[0].Key != "idem/other" || held[1].Key != "idem/req-1" {
		t.Fatalf("bucket holds %v, want both writers' keys", held)
	}
	other("idem/other", "idem/req-1", "idem/third") // the other writer's read-merge-write: our version is old
	if err := r.answer(idemUnit("http", 2, "req-2")); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	held, _ = r.checkpointObject(key)
	want := []string{"idem/other", "idem/req-1", "idem/req-2", "idem/third"}
	if got := keysOf(held); !slices.Equal(got, want) {
		t.Fatalf("bucket holds %v, want %v", got, want)
	}
	if n := r.eng.Marks()[engine.MarkCheckpointConflict]; n < 2 {
		t.Fatalf("%d conflicts marked, want 2", n)
	}
	if err := r.answer(idemUnit("http", 3, "other")); err != nil || r.eng.Stats().UnitsDuplicate != 1 {
		t.Fatalf("the other writer's key: %v, %d duplicates", err, r.eng.Stats().UnitsDuplicate)
	}
}

func keysOf(o segment.Offsets) []string {
	var out []string
	for _, e := range o {
		out = append(out, e.Key)
	}
	return out
}

// An old-format _offsets holding idempotency keys is honoured: its keys
// answer retries, and they move to bucket objects before _offsets is
// rewritten without them (never while a bucket write fails).
func TestOldFormatCheckpointIsHonoured(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	now := uint64(r.sched.WallUnixMs())
	old := segment.Offsets{{Key: "idem/legacy-1", Value: now - 1000}, {Key: "idem/legacy-2", Value: now - 2000}, {Key: "src/a", Value: 7}}
	body, err := segment.EncodeCheckpoint(0, old)
	if err != nil {
		t.Fatal(err)
	}
	r.putObject("wal/test/_offsets", body)
	dest, _ := withSink(r)
	r.start()
	if r.eng.Marks()[engine.MarkCheckpointOldFormat] == 0 {
		t.Fatal("old format not noticed")
	}
	if err := r.answer(idemUnit("http", 1, "legacy-1")); err != nil || r.eng.Stats().UnitsDuplicate != 1 {
		t.Fatalf("retry of a key from the old _offsets: %v, %d duplicates", err, r.eng.Stats().UnitsDuplicate)
	}
	log := r.recordApplied()
	blocked := true
	r.faults = func(op sim.Op, key string) sim.Outcome {
		if op == sim.OpPut && blocked && strings.Contains(key, "/_idem/") {
			return sim.Fail
		}
		return sim.OK
	}
	if err := r.answer(withOffset(unit("log", 1), "src/a", 8)); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if slices.Contains(*log, "put wal/test/_offsets") {
		t.Fatalf("_offsets rewritten while its idempotency keys had no bucket: %v", *log)
	}
	blocked = false
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim")
	ckpt, _ := r.checkpointObject("wal/test/_offsets")
	if !slices.Equal(ckpt, segment.Offsets{{Key: "src/a", Value: 8}}) {
		t.Fatalf("_offsets holds %v, want src/a=8 only", ckpt)
	}
	if _, held := r.idemBuckets(); !slices.Equal(keysOf(held), []string{"idem/legacy-1", "idem/legacy-2"}) {
		t.Fatalf("buckets hold %v", held)
	}
	if r.eng.Marks()[engine.MarkCheckpointOldFormat] == 0 {
		t.Fatal("checkpoint-old-format mark not passed")
	}
	r.start()
	if err := r.answer(idemUnit("http", 2, "legacy-2")); err != nil || r.eng.Stats().UnitsDuplicate != 1 {
		t.Fatalf("retry after the move: %v, %d duplicates", err, r.eng.Stats().UnitsDuplicate)
	}
	if got := destValues(dest); len(got["http"]) != 0 || !slices.Equal(got["log"], []int64{1}) {
		t.Fatalf("destination %v", got)
	}
}

// The cost of a checkpoint write round does not grow with the keys the
// window holds: with 10 000 or 100 000 keys in older buckets, a round
// after a few new keys writes the same bytes (the newest bucket and
// _offsets). Before buckets a round wrote every key: about 2 MB for the
// 100 000.
func TestCheckpointRoundCostIsFlat(t *testing.T) {
	var bytes []int
	for _, keys := range []int{10_000, 100_000} {
		bytes = append(bytes, roundBytes(t, keys))
	}
	t.Logf("checkpoint bytes PUT for 5 new keys: %d with 10k keys in the window, %d with 100k", bytes[0], bytes[1])
	if bytes[0] == 0 || bytes[1] != bytes[0] {
		t.Fatalf("bytes PUT per round: %d with 10k keys, %d with 100k", bytes[0], bytes[1])
	}
	if bytes[1] > 10_000 {
		t.Fatalf("a round after 5 new keys wrote %d bytes", bytes[1])
	}
}

// roundBytes plants keys spread over the window's older buckets, starts
// an engine (which recovers them), commits five new keys and a source
// offset, and returns the checkpoint bytes PUT until they are reclaimed.
func roundBytes(t *testing.T, keys int) int {
	r := newRig(t, sim.StoreConfig{})
	l := engine.NewLayout("wal", "test")
	width := engine.IdemBucketWidth(r.cfg.IdempotencyWindow).Milliseconds()
	current := r.sched.WallUnixMs() / width
	per := keys / (engine.IdemBucketsPerWindow - 1)
	for b := current - engine.IdemBucketsPerWindow + 1; b < current; b++ {
		o := make(segment.Offsets, per)
		for i := range o {
			o[i] = segment.Offset{Key: fmt.Sprintf("idem/%d-%06d", b, i), Value: uint64(b*width) + uint64(i)%uint64(width)}
		}
		body, err := segment.EncodeCheckpoint(0, o)
		if err != nil {
			t.Fatal(err)
		}
		r.putObject(l.IdemBucketKey(b), body)
	}
	withSink(r)
	r.start()
	if n := len(r.eng.Offsets()); n != per*(engine.IdemBucketsPerWindow-1) {
		t.Fatalf("recovered %d keys, planted %d", n, per*(engine.IdemBucketsPerWindow-1))
	}
	written := 0
	r.store.OnApply = func(op sim.Op, key string) {
		if raw, ok := r.store.Object(key); ok && op == sim.OpPut && (strings.Contains(key, "/_idem/") || strings.HasSuffix(key, "/_offsets")) {
			written += len(raw)
		}
	}
	for i := range 5 {
		if err := r.answer(idemUnit("http", int64(i), fmt.Sprintf("new-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.answer(withOffset(unit("log", 1), "src/a", 1)); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim")
	return written
}
