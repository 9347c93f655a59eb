package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
)

// answerAll answers n idempotent units one at a time, each reclaimed
// before the next (a checkpoint round, so a run, each), and returns their
// keys.
func (r *rig) answerAll(n int, prefix string) []string {
	r.t.Helper()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("%s-%04d", prefix, i)
		if err := r.answer(idemUnit("http", int64(i), k)); err != nil {
			r.t.Fatalf("%s: %v", k, err)
		}
		r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim "+k)
		keys = append(keys, k)
	}
	return keys
}

// A round per unit would add a run per unit; merging keeps a bucket's
// runs few (size-tiered: a handful per tier), deletes what it merged,
// and loses no key: after a restart every retry is found in a run and
// answered as a duplicate.
func TestKeyRunsMergeAndStayFew(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CheckpointDelay = 0
	dest, _ := withSink(r)
	r.start()
	keys := r.answerAll(200, "req")
	r.settle()
	st := r.eng.Stats()
	if st.KeyRuns > 2*8 || r.eng.Marks()[engine.MarkIdemRunsMerged] == 0 {
		t.Fatalf("%d runs listed after 200 rounds, %d merges", st.KeyRuns, r.eng.Marks()[engine.MarkIdemRunsMerged])
	}
	_, held := r.keyStore()
	if len(held) != 200 || !holds(held, keys...) {
		t.Fatalf("runs hold %d keys, want the 200", len(held))
	}
	if objs := len(r.store.Keys(r.eng.Layout().IdemBucketsPrefix())); objs != st.KeyRuns+1 {
		t.Fatalf("%d key objects in the store for %d runs and a manifest: merged runs were not deleted", objs, st.KeyRuns)
	}
	r.start()
	for _, k := range keys {
		if err := r.answer(idemUnit("http", 999, k)); err != nil {
			t.Fatal(err)
		}
	}
	r.settle()
	st = r.eng.Stats()
	if st.UnitsDuplicate != 200 || st.KeyLookups != 200 || len(destValues(dest)["http"]) != 200 {
		t.Fatalf("200 retries after a restart: %d duplicates, %d lookups, %d rows in the sink", st.UnitsDuplicate, st.KeyLookups, len(destValues(dest)["http"]))
	}
	t.Logf("200 rounds: %d runs; 200 lookups read %d blocks (%d false hits)", st.KeyRuns, st.KeyBlockReads, st.KeyFalseHits)
}

// A retry that arrives while its key's lookup is in flight waits on it:
// both are answered as duplicates, one block read serves them.
func TestRetryDuringLookupJoinsIt(t *testing.T) {
	r := newRig(t, sim.StoreConfig{Latency: [sim.NumOps]sim.Latency{sim.OpGet: sim.Constant(time.Second)}})
	withSink(r)
	r.start()
	r.answerAll(1, "req")
	r.start()
	a, b := r.submit(idemUnit("http", 1, "req-0000")), r.submit(idemUnit("http", 1, "req-0000"))
	r.until(func() bool { return a.done && b.done }, "answers")
	if st := r.eng.Stats(); a.err != nil || b.err != nil || st.UnitsDuplicate != 2 || st.KeyLookups != 1 {
		t.Fatalf("answers %v, %v; %d duplicates, %d lookups", a.err, b.err, st.UnitsDuplicate, st.KeyLookups)
	}
}

// A run block that fails its checksum on every read halts the engine
// with an alert: a key store that cannot answer must not admit a retry.
func TestCorruptKeyBlockHalts(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	r.start()
	r.answerAll(1, "req")
	r.start()
	run := r.eng.Layout().IdemBucketsPrefix()
	r.corrupt = func(key string) (int64, bool) {
		return 3, strings.HasPrefix(key, run) && strings.Count(key[len(run):], "/") == 1
	}
	res := r.submit(idemUnit("http", 1, "req-0000"))
	r.until(func() bool { return res.done }, "answer")
	if err := r.eng.Err(); !errors.Is(err, engine.ErrCorrupt) || res.err == nil {
		t.Fatalf("engine error %v, answer %v; want failed closed on a corrupt block", err, res.err)
	}
	if got := destValues(dest)["http"]; len(got) != 1 {
		t.Fatalf("destination %v: the retry was stored", got)
	}
}

// Idempotency keys use at most a quarter of the memory pool: past it a
// unit with a new key is refused (ErrResourceExhausted, nothing lost)
// while units without keys and retries of known keys still ack; once
// keys expire, new keys are taken again.
func TestKeyMemoryIsBounded(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.memory = 64 << 10 // a pool of 44 KiB: 11 KiB for keys
	r.cfg.IdempotencyWindow = time.Minute
	r.cfg.LiveSegmentsMax = 10_000 // no sink: keys stay recent, 64 bytes each
	r.start()
	n := 0
	var err error
	for ; n < 1000 && err == nil; n++ {
		err = r.answer(idemUnit("http", int64(n), fmt.Sprintf("req-%d", n)))
	}
	if !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), "idempotency keys use") || n < 100 {
		t.Fatalf("after %d keys: %v", n, err)
	}
	if r.eng.Marks()[engine.MarkBackpressureKeys] == 0 {
		t.Fatal("backpressure-keys not marked")
	}
	if err := r.answer(idemUnit("http", 1, "req-1")); err != nil {
		t.Fatalf("retry of a known key: %v", err)
	}
	if err := r.answer(unit("log", 1)); err != nil {
		t.Fatalf("a unit without a key: %v", err)
	}
	r.sched.RunUntil(r.sched.Now() + 3*time.Minute)
	if err := r.answer(idemUnit("http", 1, "late")); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// A manifest write whose answer is lost but which landed (ambiguous) is
// settled by the re-read: a merge whose manifest landed so keeps its
// output — the manifest lists it — and every key stays findable.
func TestAmbiguousManifestWritesLoseNoKey(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CheckpointDelay = 0
	dest, _ := withSink(r)
	r.start()
	l := r.eng.Layout()
	bucket := func(key string) bool { b, ok := l.ParseIdemBucketKey(key); return ok && key == l.IdemBucketKey(b) }
	r.faults = sim.StoreRules(sim.StoreFault(sim.AmbiguousApplied, sim.OpPut).Key(bucket).Every(2)) // the 1st, 3rd, … bucket PUT
	keys := r.answerAll(40, "req")
	r.faults = nil
	r.settle()
	if r.eng.Marks()[engine.MarkIdemRunsMerged] == 0 {
		t.Fatal("no merge: the test did not reach its case")
	}
	r.retryAfterRestart(dest, keys)
}

// A manifest deleted under the writer (another incarnation expiring the
// bucket early, with a clock far ahead) is written again listing the
// runs the writer knows, at its next write: their keys stay findable.
func TestLostManifestIsWrittenAgain(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CheckpointDelay = 0
	dest, _ := withSink(r)
	r.start()
	keys := r.answerAll(3, "req")
	manifests, _ := r.keyStore()
	if len(manifests) != 1 {
		t.Fatalf("manifests %v", manifests)
	}
	r.deleteObject(manifests[0])
	keys = append(keys, r.answerAll(1, "more")...)
	if r.eng.Marks()[engine.MarkIdemManifestLost] == 0 {
		t.Fatal("idem-manifest-lost not marked")
	}
	r.retryAfterRestart(dest, keys)
}

// With every merge failing (whole-run reads refused), a bucket's runs
// pile up to the manifest's limit; its keys then wait (the segments are
// not reclaimed), and the first merge that can run makes room — even
// though no round succeeds meanwhile.
func TestFullManifestWaitsForAMerge(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CheckpointDelay = 0
	withSink(r)
	r.start()
	l := r.eng.Layout()
	failReads := true
	isRun := func(key string) bool { b, ok := l.ParseIdemBucketKey(key); return ok && key != l.IdemBucketKey(b) }
	r.faults = sim.StoreRules(sim.StoreFault(sim.Fail, sim.OpGet).Key(isRun).While(&failReads))
	keys := r.answerAll(segment.KeyManifestRunsMax, "req")
	if st := r.eng.Stats(); st.KeyRuns != segment.KeyManifestRunsMax {
		t.Fatalf("%d runs listed, want the limit %d", st.KeyRuns, segment.KeyManifestRunsMax)
	}
	more := r.submit(idemUnit("http", 1, "one-more"))
	r.until(func() bool { return more.done }, "answer")
	r.settle()
	if r.eng.Marks()[engine.MarkIdemManifestFull] == 0 || r.markers() == 0 {
		t.Fatalf("manifest-full marked %d times, %d markers left", r.eng.Marks()[engine.MarkIdemManifestFull], r.markers())
	}
	failReads = false
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim after a merge")
	if _, held := r.keyStore(); !holds(held, append(keys, "one-more")...) {
		t.Fatalf("runs hold %d keys", len(held))
	}
}

// deleteObject deletes key from the store, as another writer would.
func (r *rig) deleteObject(key string) {
	r.t.Helper()
	done := false
	r.store.Client(r.sched.NewIncarnation()).DeleteObject(key, func(err error) {
		if err != nil {
			r.t.Fatal(err)
		}
		done = true
	})
	r.until(func() bool { return done }, "delete "+key)
}

// retryAfterRestart checks that the store's runs hold every key, then
// restarts the engine and retries each (all answered once before): each
// is answered as a duplicate, and the sink holds each unit once.
func (r *rig) retryAfterRestart(dest *sinks.Memory, keys []string) {
	r.t.Helper()
	if _, held := r.keyStore(); !holds(held, keys...) {
		r.t.Fatalf("runs hold %d keys, want the %d", len(held), len(keys))
	}
	r.start()
	for _, k := range keys {
		if err := r.answer(idemUnit("http", 999, k)); err != nil {
			r.t.Fatal(err)
		}
	}
	if st := r.eng.Stats(); st.UnitsDuplicate != uint64(len(keys)) || len(destValues(dest)["http"]) != len(keys) {
		r.t.Fatalf("%d retries: %d duplicates, %d rows", len(keys), st.UnitsDuplicate, len(destValues(dest)["http"]))
	}
}

// A lookup whose run was merged away by another writer (its block is
// gone) reads the manifest again and finds the key in the merged run.
func TestLookupFollowsAMergedRun(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	dest, _ := withSink(r)
	r.start()
	keys := r.answerAll(2, "req")
	r.start() // the keys are in runs only
	manifests, held := r.keyStore()
	b, _ := r.eng.Layout().ParseIdemBucketKey(manifests[0])
	r.mergeRunsAsAnotherWriter(b, held)
	if err := r.answer(idemUnit("http", 9, keys[1])); err != nil || r.eng.Stats().UnitsDuplicate != 1 {
		t.Fatalf("retry: %v, %d duplicates", err, r.eng.Stats().UnitsDuplicate)
	}
	if r.eng.Marks()[engine.MarkIdemBlockGone] == 0 || len(destValues(dest)["http"]) != 2 {
		t.Fatalf("idem-block-gone %d, %d rows", r.eng.Marks()[engine.MarkIdemBlockGone], len(destValues(dest)["http"]))
	}
}

// A manifest that lists a run whose object is missing — merged away
// since the manifest was read, or lost — is read again; a run still
// missing after every read is dropped and the manifest written again
// without it, so the bucket's other runs stay listed and their keys
// findable.
func TestMissingRunIsDropped(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CheckpointDelay = 0
	withSink(r)
	r.start()
	keys := r.answerAll(3, "req")
	manifests, _ := r.keyStore()
	if len(manifests) != 1 {
		t.Fatalf("manifests %v", manifests)
	}
	runs := r.store.Keys(manifests[0] + "/")
	if len(runs) < 2 {
		t.Fatalf("runs %v: the test needs two", runs)
	}
	r.deleteObject(runs[0])
	r.start() // recovery reads the bucket
	more := r.answerAll(1, "more")
	if r.eng.Marks()[engine.MarkIdemRunLost] == 0 {
		t.Fatal("idem-run-lost not marked")
	}
	_, held := r.keyStore() // fails if the manifest still lists the missing run
	kept := 0
	for _, k := range keys {
		if holds(held, k) {
			kept++
		}
	}
	if !holds(held, more...) || kept != len(keys)-1 {
		t.Fatalf("after dropping one of %d runs: %d of the %d keys kept, the new one held %v", len(runs), kept, len(keys), holds(held, more...))
	}
}

// A lookup whose block is gone re-reads its bucket's manifest, holding
// the bucket, while a checkpoint round has that bucket queued behind a
// slow write of an older one (RecoveryConcurrency 1). When the round
// reaches it, its write waits for the read to end — a read is not a
// second write — and then lands: the engine does not halt on "one write
// per key bucket at a time", the retry is found in the merged run, and
// every key ends up durable.
func TestRoundWriteWaitsForALookupsRead(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.cfg.CheckpointDelay = 0
	r.cfg.RecoveryConcurrency = 1
	r.cfg.IdempotencyWindow = 16 * time.Minute // buckets of a minute
	dest, _ := withSink(r)
	r.start()
	l := r.eng.Layout()
	widthMs := engine.IdemBucketWidth(r.cfg.IdempotencyWindow).Milliseconds()

	// Bucket a is the current minute, 5 s before its end; b the next.
	toEnd := widthMs - r.sched.WallUnixMs()%widthMs
	if toEnd < 5_000 {
		toEnd += widthMs
	}
	r.sched.RunUntil(r.sched.Now() + time.Duration(toEnd-5_000)*time.Millisecond)
	a := r.sched.WallUnixMs() / widthMs
	b := a + 1
	runOf := func(n int64) func(string) bool {
		return func(key string) bool { return strings.HasPrefix(key, l.IdemBucketKey(n)+"/") }
	}
	merged := l.IdemRunKey(b, 1<<40, 1) // the other writer's run
	var failA, slowA, failB, slowRead bool
	failRunA := sim.StoreFault(sim.Fail, sim.OpPut).Key(runOf(a)).While(&failA)
	slowRunA := sim.StoreFault(sim.OK, sim.OpPut).Key(runOf(a)).Delay(10 * time.Second).While(&slowA)
	failRunB := sim.StoreFault(sim.Fail, sim.OpPut).Key(runOf(b)).Key(func(key string) bool { return key != merged }).While(&failB)
	slowManifestB := sim.StoreFault(sim.OK, sim.OpGet).Key(func(key string) bool { return key == l.IdemBucketKey(b) }).Delay(20 * time.Second).While(&slowRead)
	r.store.SetFaults(sim.StoreRulesFaults(failRunA, slowRunA, failRunB, slowManifestB))

	// Bucket a's keys stay dirty: every round fails to write them.
	failA = true
	if err := r.answer(idemUnit("http", 1, "a-1")); err != nil {
		t.Fatal(err)
	}
	// Bucket b gets a run (its write lands in a round that fails on a).
	r.sched.RunUntil(r.sched.Now() + 10*time.Second)
	if got := r.sched.WallUnixMs() / widthMs; got != b {
		t.Fatalf("now in bucket %d, want %d", got, b)
	}
	if err := r.answer(idemUnit("http", 2, "b-1")); err != nil {
		t.Fatal(err)
	}
	r.until(func() bool { _, ok := r.store.Object(l.IdemBucketKey(b)); return ok }, "bucket b's manifest")
	// From now on b's writes fail too, so b stays dirty with a new key.
	failB = true
	if err := r.answer(idemUnit("http", 3, "b-2")); err != nil {
		t.Fatal(err)
	}

	// Another writer merges b's run away: a lookup of b-1 finds its
	// block gone and re-reads b's manifest.
	manifests, held := r.keyStore()
	if len(manifests) != 1 || manifests[0] != l.IdemBucketKey(b) || !holds(held, "b-1") {
		t.Fatalf("manifests %v holding %d keys: want bucket %d's, holding b-1", manifests, len(held), b)
	}
	r.mergeRunsAsAnotherWriter(b, held)

	// Two failed writes of a later: the round now running began after
	// b-2 was committed, so it has both buckets dirty, a first. The next
	// write of a is slow: b waits its turn in that round.
	n := failRunA.Fired()
	r.until(func() bool { return failRunA.Fired() >= n+2 }, "two more rounds")
	failA, slowA, slowRead = false, true, true
	r.until(func() bool { return slowRunA.Fired() > 0 }, "a slow write of bucket a")
	retry := r.submit(idemUnit("http", 9, "b-1"))
	r.until(func() bool { return retry.done }, "the retry's answer")
	if err := r.eng.Err(); err != nil {
		t.Fatalf("engine failed: %v", err)
	}
	if r.eng.Marks()[engine.MarkIdemWriteWaitsRead] == 0 {
		t.Fatal("idem-write-waits-read not marked: the test did not reach its case")
	}
	if retry.err != nil || r.eng.Stats().UnitsDuplicate != 1 || r.eng.Marks()[engine.MarkIdemBlockGone] == 0 {
		t.Fatalf("retry of b-1: %v, %d duplicates, idem-block-gone %d", retry.err, r.eng.Stats().UnitsDuplicate, r.eng.Marks()[engine.MarkIdemBlockGone])
	}
	slowA, failB, slowRead = false, false, false
	r.until(func() bool { return r.eng.Drained() && r.markers() == 0 }, "reclaim")
	if err := r.eng.Err(); err != nil {
		t.Fatalf("engine failed: %v", err)
	}
	r.retryAfterRestart(dest, []string{"a-1", "b-1", "b-2"})
}

// mergeRunsAsAnotherWriter does what another writer's merge of key bucket
// b does: one run of held (the keys b's runs hold) under that writer's
// epoch, b's manifest listing only it, and the inputs deleted.
func (r *rig) mergeRunsAsAnotherWriter(b int64, held map[segment.KeyHash]uint64) {
	r.t.Helper()
	l := r.eng.Layout()
	var es []segment.KeyEntry
	for h, v := range held {
		es = append(es, segment.KeyEntry{Hash: h, Value: v})
	}
	slices.SortFunc(es, func(x, y segment.KeyEntry) int { return bytes.Compare(x.Hash[:], y.Hash[:]) })
	body, m, err := segment.EncodeKeyRun(es)
	if err != nil {
		r.t.Fatal(err)
	}
	ref := segment.KeyRunRef{Epoch: 1 << 40, Seq: 1, Count: m.Count, MinValue: m.MinValue, Value: m.Value}
	merged := l.IdemRunKey(b, ref.Epoch, ref.Seq)
	r.putObject(merged, body)
	manifest, _ := segment.EncodeKeyManifest(ref.Epoch, []segment.KeyRunRef{ref})
	r.putObject(l.IdemBucketKey(b), manifest)
	for _, k := range r.store.Keys(l.IdemBucketKey(b) + "/") {
		if k != merged {
			r.deleteObject(k) // the other writer's merge deleted its inputs
		}
	}
}
