package engine_test

import (
	"bytes"
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

// keyStore returns the manifests of the store and, by hash, the keys of
// the runs they list (a listed run that is missing fails the test).
func (r *rig) keyStore() (manifests []string, keys map[segment.KeyHash]uint64) {
	r.t.Helper()
	keys = map[segment.KeyHash]uint64{}
	l := r.eng.Layout()
	for _, k := range r.store.Keys(l.IdemBucketsPrefix()) {
		b, ok := l.ParseIdemBucketKey(k)
		if !ok || k != l.IdemBucketKey(b) {
			continue // a run
		}
		raw, _ := r.store.Object(k)
		_, refs, err := segment.DecodeKeyManifest(k, raw)
		if err != nil {
			r.t.Fatalf("%s: %v", k, err)
		}
		manifests = append(manifests, k)
		for _, ref := range refs {
			key := l.IdemRunKey(b, ref.Epoch, ref.Seq)
			raw, ok := r.store.Object(key)
			if !ok {
				r.t.Fatalf("%s lists %s, which is missing", k, key)
			}
			_, es, err := segment.DecodeKeyRun(key, raw, ref.Count)
			if err != nil {
				r.t.Fatalf("%s: %v", key, err)
			}
			for _, e := range es {
				keys[e.Hash] = max(keys[e.Hash], e.Value)
			}
		}
	}
	return manifests, keys
}

// holds reports whether keys holds every idempotency key named.
func holds(keys map[segment.KeyHash]uint64, names ...string) bool {
	for _, n := range names {
		if _, ok := keys[segment.KeyHashOf(n)]; !ok {
			return false
		}
	}
	return true
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
// in a run its bucket's manifest lists: while key-store writes fail the
// segment stays, and the manifest PUT lands before the marker DELETE.
func TestReclaimWaitsForIdemBucket(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	r.start()
	log := r.recordApplied()
	blocked := true
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpPut).Contains("/_idem/").While(&blocked))
	if err := r.answer(idemUnit("http", 1, "req-1")); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if got := destValues(dest)["http"]; !slices.Equal(got, []int64{1}) || r.markers() != 1 {
		t.Fatalf("bucket writes failing: destination %v, %d markers (want applied, not reclaimed)", got, r.markers())
	}
	blocked = false
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim")
	manifests, held := r.keyStore()
	if len(manifests) != 1 || len(held) != 1 || !holds(held, "req-1") {
		t.Fatalf("manifests %v list runs holding %d keys", manifests, len(held))
	}
	put := slices.Index(*log, "put "+manifests[0])
	del := slices.IndexFunc(*log, func(s string) bool { return strings.HasPrefix(s, "delete ") && strings.HasSuffix(s, ".seg.commit") })
	if put < 0 || del < 0 || put > del {
		t.Fatalf("bucket put at %d, marker delete at %d: %v", put, del, *log)
	}
}

// Idempotency keys outlive their reclaimed segments in key runs, not in
// _offsets: a new incarnation recovers the runs' filters, finds a retry's
// key in a run block, and answers it as a duplicate without storing it.
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
	if _, held := r.keyStore(); len(held) != 3 || !holds(held, "req-1", "req-2", "req-3") {
		t.Fatalf("runs hold %d keys, want the 3", len(held))
	}
	r.start()
	if err := r.answer(idemUnit("http", 1, "req-2")); err != nil {
		t.Fatal(err)
	}
	r.settle()
	if st := r.eng.Stats(); st.UnitsDuplicate != 1 || r.markers() != 0 || st.KeyLookups != 1 || st.KeyBlockReads == 0 {
		t.Fatalf("retry after restart: %d duplicates, %d markers, %d lookups, %d block reads", st.UnitsDuplicate, r.markers(), st.KeyLookups, st.KeyBlockReads)
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

// A bucket past the window is dropped and its manifest and runs deleted:
// its keys are forgotten (a retry is a new unit). The sweeper deletes old
// key objects a crashed incarnation left, and leaves recent ones.
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
	first := r.store.Keys(r.eng.Layout().IdemBucketsPrefix())
	if len(first) != 2 {
		t.Fatalf("key objects %v, want a manifest and a run", first)
	}
	r.sched.RunUntil(r.sched.Now() + 2*time.Minute)
	if err := r.answer(idemUnit("http", 2, "req-2")); err != nil { // its reclaim runs a round: expiry
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	r.settle()
	for _, k := range first {
		if _, ok := r.store.Object(k); ok {
			t.Fatalf("%s of an expired bucket still exists", k)
		}
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
	stale := []string{l.IdemBucketKey(now - 20), l.IdemRunKey(now-20, 1, 1)}
	young := []string{l.IdemBucketKey(now + 40), l.IdemRunKey(now+40, 1, 1)} // current when the sweep runs
	body, _ := segment.EncodeKeyManifest(0, nil)
	for _, k := range append(slices.Clone(stale), young...) {
		r.putObject(k, body)
	}
	r.sched.RunUntil(r.sched.Now() + 30*time.Second)
	for _, k := range stale {
		if _, ok := r.store.Object(k); !ok {
			t.Fatalf("the sweeper deleted %s, written 30 s ago (it may hold keys of a bucket width other than ours)", k)
		}
	}
	r.sched.RunUntil(r.sched.Now() + 90*time.Second) // last written more than window + a bucket ago
	for _, k := range stale {
		if _, ok := r.store.Object(k); ok || r.eng.Marks()[engine.MarkIdemBucketSwept] < 2 {
			t.Fatalf("the sweeper left %s", k)
		}
	}
	for _, k := range young {
		if _, ok := r.store.Object(k); !ok {
			t.Fatalf("the sweeper deleted %s, a bucket that is not old", k)
		}
	}
}

// Two writers of one bucket only ever add runs: a manifest write refused
// because the object exists (If-None-Match) or changed (If-Match)
// re-reads it — loading the other writer's runs — and lists both
// writers' runs; the engine then answers the other writer's keys as
// duplicates.
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
	bucket := now / width
	seq := uint64(0)
	other := func(keys ...string) { // the other writer: a run, then the manifest listing it too
		var es []segment.KeyEntry
		for _, k := range keys {
			es = append(es, segment.KeyEntry{Hash: segment.KeyHashOf(k), Value: uint64(now)})
		}
		slices.SortFunc(es, func(a, b segment.KeyEntry) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
		body, m, err := segment.EncodeKeyRun(es)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		ref := segment.KeyRunRef{Epoch: 1 << 40, Seq: seq, Count: m.Count, MinValue: m.MinValue, Value: m.Value}
		r.putObject(l.IdemRunKey(bucket, ref.Epoch, ref.Seq), body)
		var refs []segment.KeyRunRef
		if raw, ok := r.store.Object(l.IdemBucketKey(bucket)); ok {
			_, refs, _ = segment.DecodeKeyManifest("m", raw)
		}
		manifest, err := segment.EncodeKeyManifest(1<<40, append(refs, ref))
		if err != nil {
			t.Fatal(err)
		}
		r.putObject(l.IdemBucketKey(bucket), manifest)
	}
	other("other") // created while this engine's bucket had no version: If-None-Match refused
	cs.down["http"] = false
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	if _, held := r.keyStore(); len(held) != 2 || !holds(held, "other", "req-1") {
		t.Fatalf("runs hold %d keys, want both writers'", len(held))
	}
	other("third") // the other writer adds a run again: our version is old
	if err := r.answer(idemUnit("http", 2, "req-2")); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { return r.eng.Drained() }, "reclaim")
	if _, held := r.keyStore(); len(held) != 4 || !holds(held, "other", "req-1", "req-2", "third") {
		t.Fatalf("runs hold %d keys, want 4", len(held))
	}
	if n := r.eng.Marks()[engine.MarkCheckpointConflict]; n < 2 {
		t.Fatalf("%d conflicts marked, want 2", n)
	}
	for i, k := range []string{"other", "third"} {
		if err := r.answer(idemUnit("http", 3, k)); err != nil || r.eng.Stats().UnitsDuplicate != uint64(i+1) {
			t.Fatalf("the other writer's key %s: %v, %d duplicates", k, err, r.eng.Stats().UnitsDuplicate)
		}
	}
}

// Old formats are honoured: an _offsets holding idempotency keys, and a
// bucket object holding them as an offsets checkpoint. Their keys answer
// retries and move to runs; _offsets is rewritten without them only
// after (never while a key-store write fails), and the bucket object is
// replaced by a manifest.
func TestOldFormatCheckpointIsHonoured(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	now := uint64(r.sched.WallUnixMs())
	old := segment.Offsets{{Key: "idem/legacy-1", Value: now - 1000}, {Key: "idem/legacy-2", Value: now - 2000}, {Key: "src/a", Value: 7}}
	body, err := segment.EncodeCheckpoint(0, old)
	if err != nil {
		t.Fatal(err)
	}
	r.putObject("wal/test/_offsets", body)
	width := engine.IdemBucketWidth(r.cfg.IdempotencyWindow).Milliseconds()
	legacyBucket, err := segment.EncodeCheckpoint(0, segment.Offsets{{Key: "idem/legacy-3", Value: now - 3000}})
	if err != nil {
		t.Fatal(err)
	}
	r.putObject(engine.NewLayout("wal", "test").IdemBucketKey(int64(now-3000)/width), legacyBucket)
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
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpPut).Contains("/_idem/").While(&blocked))
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
	if _, held := r.keyStore(); len(held) != 3 || !holds(held, "legacy-1", "legacy-2", "legacy-3") {
		t.Fatalf("runs hold %d keys, want the 3 legacy ones", len(held))
	}
	if r.eng.Marks()[engine.MarkCheckpointOldFormat] == 0 {
		t.Fatal("checkpoint-old-format mark not passed")
	}
	r.start()
	for i, k := range []string{"legacy-2", "legacy-3"} {
		if err := r.answer(idemUnit("http", 2, k)); err != nil || r.eng.Stats().UnitsDuplicate != uint64(i+1) {
			t.Fatalf("retry of %s after the move: %v, %d duplicates", k, err, r.eng.Stats().UnitsDuplicate)
		}
	}
	if got := destValues(dest); len(got["http"]) != 0 || !slices.Equal(got["log"], []int64{1}) {
		t.Fatalf("destination %v", got)
	}
}

// The cost of a checkpoint write round, and of recovery, does not grow
// with the keys the window holds: with 10 000 or 100 000 keys in runs of
// older buckets, a round after a few new keys writes the same bytes (a
// run of the new keys, its manifest and _offsets), and recovery issues
// the same requests (a GET per manifest and per run's meta). Before runs,
// a round wrote every key: about 2 MB for the 100 000.
func TestCheckpointRoundCostIsFlat(t *testing.T) {
	var bytes []int
	var ops []uint64
	for _, keys := range []int{10_000, 100_000} {
		b, o := roundBytes(t, keys)
		bytes, ops = append(bytes, b), append(ops, o)
	}
	t.Logf("checkpoint bytes PUT for 5 new keys: %d with 10k keys in the window, %d with 100k; recovery requests %d and %d", bytes[0], bytes[1], ops[0], ops[1])
	if bytes[0] == 0 || bytes[1] != bytes[0] || ops[0] != ops[1] {
		t.Fatalf("bytes PUT per round: %d with 10k keys, %d with 100k; recovery requests %d and %d", bytes[0], bytes[1], ops[0], ops[1])
	}
	if bytes[1] > 10_000 {
		t.Fatalf("a round after 5 new keys wrote %d bytes", bytes[1])
	}
}

// roundBytes plants keys in runs of the window's older buckets, starts
// an engine (which recovers them), commits five new keys and a source
// offset, and returns the checkpoint bytes PUT until they are reclaimed
// and the requests recovery took.
func roundBytes(t *testing.T, keys int) (int, uint64) {
	r := newRig(t, sim.StoreConfig{})
	l := engine.NewLayout("wal", "test")
	width := engine.IdemBucketWidth(r.cfg.IdempotencyWindow).Milliseconds()
	current := r.sched.WallUnixMs() / width
	per := keys / (engine.IdemBucketsPerWindow - 1)
	for b := current - engine.IdemBucketsPerWindow + 1; b < current; b++ {
		es := make([]segment.KeyEntry, per)
		for i := range es {
			es[i] = segment.KeyEntry{Hash: segment.KeyHashOf(fmt.Sprintf("%d-%06d", b, i)), Value: uint64(b*width) + uint64(i)%uint64(width)}
		}
		slices.SortFunc(es, func(a, b segment.KeyEntry) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
		body, m, err := segment.EncodeKeyRun(es)
		if err != nil {
			t.Fatal(err)
		}
		ref := segment.KeyRunRef{Epoch: 0, Seq: 1, Count: m.Count, MinValue: m.MinValue, Value: m.Value}
		r.putObject(l.IdemRunKey(b, 0, 1), body)
		manifest, err := segment.EncodeKeyManifest(0, []segment.KeyRunRef{ref})
		if err != nil {
			t.Fatal(err)
		}
		r.putObject(l.IdemBucketKey(b), manifest)
	}
	withSink(r)
	r.start()
	st := r.eng.Stats()
	if st.KeyRuns != engine.IdemBucketsPerWindow-1 {
		t.Fatalf("recovered %d runs, planted %d", st.KeyRuns, engine.IdemBucketsPerWindow-1)
	}
	if !r.eng.IdempotencyKeyKnown(fmt.Sprintf("%d-%06d", current-3, 7)) {
		t.Fatal("a planted key is unknown after recovery")
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
	return written, st.RecoveryOps
}
