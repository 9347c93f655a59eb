package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// The checks of admission, the accumulator, apply, the body cache, the
// checkpoint round and the key store, each broken on purpose.

// heldStore keeps the callbacks of the PUTs and GETs it is asked for, to
// be answered by the test; the engine's other requests are not expected.
type heldStore struct {
	ObjectStore
	puts []func(string, error)
	gets []func([]byte, ObjectInfo, error)
}

func (s *heldStore) PutObject(_ PutObjectInput, done func(string, error)) {
	s.puts = append(s.puts, done)
}

func (s *heldStore) GetObject(_ GetObjectInput, done func([]byte, ObjectInfo, error)) {
	s.gets = append(s.gets, done)
}

// inlineExec runs work and its completion at once.
type inlineExec struct{}

func (inlineExec) Go(work, done func()) { work(); done() }

// withPorts gives a bare engine held timers and store and an inline
// executor, for paths that make requests.
func withPorts(e *Engine) *heldStore {
	s := &heldStore{}
	e.p.Timers, e.p.Store, e.p.Exec = &heldTimers{}, s, inlineExec{}
	e.cfg.RecoveryConcurrency = 2
	return s
}

// backClock is a wall clock that goes back by a day at every read.
type backClock struct{ stepClock }

func (c *backClock) WallUnixMs() int64 {
	c.t -= 24 * time.Hour
	return c.t.Milliseconds()
}

// rowsDropped is a durable log whose canonical form loses the rows.
type rowsDropped struct{ s3Log }

func (rowsDropped) canonical(in Unit) (Unit, error) {
	in.Batches = nil
	return in, nil
}

func int64Batch(t *testing.T, n int) (*arrow.Schema, arrow.RecordBatch) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range n {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	return schema, array.NewRecordBatch(schema, []arrow.Array{col}, int64(n))
}

func TestInvariantAdmission(t *testing.T) {
	answered := func(t *testing.T, e *Engine) {
		t.Helper()
		if len(e.answers) != 1 {
			t.Errorf("%d answers due; the unit must be answered", len(e.answers))
		}
	}
	cases := []breakCase{
		{"fingerprint-cache-past-bound", "the fingerprint cache holds at most schemasCached schemas: 18 cached, limit 16", func(t *testing.T, e *Engine) {
			e.schemas = make([]schemaFP, schemasCached+1)
			schema, b := int64Batch(t, 1)
			defer b.Release()
			e.fingerprint(schema)
		}},
		{"idem-pending-under-another-key", `idemPending maps a key to the unanswered unit holding it: key "k", unit holds "other"`, func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.idemPending = map[string]*unit{"k": {idem: "other", dones: []func(error){func(error) {}}}}
			e.joinDuplicate(Unit{IdempotencyKey: "k"}, func(error) {})
			answered(t, e)
		}},
		{"idem-pending-answered", `idemPending maps a key to the unanswered unit holding it: key "k", unit holds "k", 0 waiting, replayed false`, func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.idemPending = map[string]*unit{"k": {idem: "k"}}
			e.joinDuplicate(Unit{IdempotencyKey: "k"}, func(error) {})
			answered(t, e)
		}},
		{"append-while-not-open", "a unit is appended only while ingest is open (admit): state 0", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.append(Unit{}, func(error) {})
			answered(t, e)
		}},
		{"canonical-loses-rows", "the canonical form of a unit is the unit: 3 rows submitted, 0 kept", func(t *testing.T, e *Engine) {
			e.p.Timers, e.state, e.dlog = &heldTimers{}, stateReady, rowsDropped{s3Log{e}}
			e.offsetPending, e.idemPending = map[string]*unit{}, map[string]*unit{}
			schema, b := int64Batch(t, 3)
			defer b.Release()
			e.append(Unit{Schema: schema, Batches: []arrow.RecordBatch{b}}, func(error) {})
			answered(t, e)
			if e.held != 0 || len(e.offsetPending)+len(e.idemPending) != 0 {
				t.Errorf("held %d, %d keys pending: the refused unit must not be held", e.held, len(e.offsetPending)+len(e.idemPending))
			}
		}},
		{"append-past-unit-limit", "an appended unit fits its limit (validateUnit): ", func(t *testing.T, e *Engine) {
			e.p.Timers, e.state = &heldTimers{}, stateReady
			// Offsets are counted at their keys' length: many of one
			// long key cost the count, not the memory.
			key, big := strings.Repeat("k", 1<<20), make(segment.Offsets, unitBytesMax>>20+1)
			for i := range big {
				big[i] = segment.Offset{Key: key, Value: 1}
			}
			e.append(Unit{Offsets: big}, func(error) {})
			answered(t, e)
		}},
		{"hold-nothing", "a held unit costs bytes: unit 4 of partition 1 holds 0 bytes", func(t *testing.T, e *Engine) {
			e.hold(&unit{part: 1, seq: 4})
		}},
		{"answer-unheld-below-zero", "held bytes ≥ 0: -10 after answering unit 2 of partition 0 (10 bytes) unheld", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			e.answerUnheld(&unit{seq: 2, bytes: 10, dones: []func(error){func(error) {}}}, ErrUnknownOutcome)
			answered(t, e) // its submitter is still answered
		}},
		{"release-live", "only a sealed set is released: the live accumulator", func(t *testing.T, e *Engine) {
			e.releaseOffLoop(e.live)
		}},
		{"acked-negative-rows", "an acked unit counts bytes and rows ≥ 0: unit 0 of partition 0, 5 bytes, -1 rows", func(t *testing.T, e *Engine) {
			e.countAcked(&unit{bytes: 5, rows: -1})
			if e.stats.UnitsAcked != 0 {
				t.Errorf("%d units counted acked", e.stats.UnitsAcked)
			}
		}},
		{"ack-before-append", "submit-to-ack time ≥ 0 (the monotonic clock never goes back)", func(t *testing.T, e *Engine) {
			e.observeAckDelay(&unit{since: time.Hour})
		}},
	}
	runBreaks(t, cases)
}

func TestInvariantAccumulatorAdd(t *testing.T) {
	schema, b := int64Batch(t, 2)
	defer b.Release()
	key := segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Schema: segment.FingerprintOf(schema)}
	other := segment.PartitionKey{SinkRef: "lake", Namespace: "other", Schema: key.Schema}
	plain := func(k segment.PartitionKey) Unit {
		return Unit{Key: k, Schema: schema, Batches: []arrow.RecordBatch{b}}
	}
	cdc := Unit{Key: key, Schema: schema, Batches: []arrow.RecordBatch{b}, Sidecar: &segment.Sidecar{Rows: make([]segment.CDCRow, 2)}}
	for name, c := range map[string]struct {
		first   Unit
		breakIt func(*batchSet)
		then    Unit
		want    string
	}{
		"index-points-elsewhere": {plain(key), func(s *batchSet) {
			s.parts = append(s.parts, &livePart{key: other})
			s.index[other] = 0 // other's position is key's part
		}, plain(other), "index[p.key] is p's position: unit for lake/other/"},
		"sidecar-short": {cdc, func(s *batchSet) { s.parts[0].rows++ }, cdc, "a CDC part's sidecar has a row per row: part lake/ns/"},
	} {
		s := newBatchSet()
		if err := s.add(&unit{bytes: 10}, c.first); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.breakIt(s)
		if err := s.add(&unit{bytes: 10}, c.then); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
	}
	s := newBatchSet()
	if err := s.add(&unit{bytes: 10}, plain(key)); err != nil {
		t.Fatal(err)
	}
	if err := s.prepend(s); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "1 units prepended to themselves") {
		t.Errorf("prepend to itself: %v", err)
	}
}

func TestInvariantApply(t *testing.T) {
	seg := &segState{Segment: Segment{ID: SnapshotID{1, 1}, Index: &segment.Index{BodyBytes: 10}}}
	cases := []breakCase{
		{"start-running-job", "a job starts only while pending, with pieces: job j (cut in segment 000000000001-000000000001) in state 1, 1 pieces, 0 running", func(t *testing.T, e *Engine) {
			j := &job{id: "j", cut: seg, state: jobRunning, pieces: []piece{{seg: seg}}}
			e.startJob(j)
			if e.running != 0 {
				t.Errorf("running %d: a refused start must not count", e.running)
			}
		}},
		{"gather-a-job-not-running", "a job gathers its pieces while it runs: job j (cut in segment 000000000001-000000000001) in state 2 at piece 0 of 1", func(t *testing.T, e *Engine) {
			e.gather(&job{id: "j", cut: seg, state: jobApplied, pieces: []piece{{seg: seg}}}, 0, nil, nil)
		}},
		{"apply-missing-slices", "a job applies one slice per PART it holds: job j (cut in segment 000000000001-000000000001), 0 slices, 2 PARTs in 1 pieces", func(t *testing.T, e *Engine) {
			released := false
			j := &job{id: "j", cut: seg, state: jobRunning, pieces: []piece{{seg: seg, ordinals: []segment.SliceOrdinal{0, 1}}}}
			e.apply(nil, j, nil, func() { released = true })
			if !released {
				t.Error("the refused apply kept its slices")
			}
		}},
		{"fetch-reserved-negative", "body cache reserved bytes ≥ 0: -5 after the fetch of segment 000000000001-000000000001 (10 bytes) answered", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.cache.budget = 100
			e.withBody(&job{}, piece{seg: seg}, func(*segment.Body, func(), error) { t.Error("answered after failing") })
			e.cache.reserved -= 5 // someone took back what this fetch reserved
			s.gets[0](nil, ObjectInfo{}, ErrNotFound)
		}},
	}
	runBreaks(t, cases)
}

func TestInvariantCacheOnce(t *testing.T) {
	var marks Marks
	for name, c := range map[string]struct {
		do   func(*bodyCache)
		want string
	}{
		"two-sizes": {func(c *bodyCache) {
			c.put(SnapshotID{1, 1}, nil, 10, false)
			if c.put(SnapshotID{1, 1}, nil, 20, true) {
				panic("cached at another size")
			}
		}, "a segment's body has one size: 000000000001-000000000001 cached at 10 bytes, put again at 20"},
		"negative-size": {func(c *bodyCache) { c.put(SnapshotID{1, 2}, nil, -1, false) }, "a cached body's size ≥ 0: 000000000001-000000000002 put at -1 bytes"},
		"unpinned-twice": {func(c *bodyCache) {
			c.put(SnapshotID{1, 3}, nil, 10, true)
			c.unpin(SnapshotID{1, 3})
			c.unpin(SnapshotID{1, 3})
		}, "a body is unpinned once per pin: 000000000001-000000000003 unpinned with 0 pins"},
	} {
		var got capture
		cache := newBodyCache(100, &marks)
		cache.inv = got.hook()
		c.do(cache)
		t.Run(name, func(t *testing.T) { got.want(t, c.want) })
	}
}

func TestInvariantCheckpointSteps(t *testing.T) {
	cases := []breakCase{
		{"scheduled-round-fires-twice", "a scheduled checkpoint round fires once: fired with none scheduled", func(t *testing.T, e *Engine) {
			timers := &heldTimers{}
			e.p.Timers = timers
			e.scheduleCheckpoint()
			e.ckptScheduled = false // as if it had fired already
			timers.fns[0]()
		}},
		{"buckets-written-outside-a-round", "key buckets are written inside a checkpoint round: 1 buckets dirty, no round running", func(t *testing.T, e *Engine) {
			e.keys.add(segment.KeyHashOf("k"), 1)
			e.writeKeyBuckets(func(bool) { t.Error("answered after failing") })
		}},
		{"offsets-written-outside-a-round", "_offsets is written inside a checkpoint round: _offsets written with no round running", func(t *testing.T, e *Engine) {
			e.writeSources(func(bool) { t.Error("answered after failing") })
		}},
		{"round-ends-without-one", "a checkpoint round ends while it runs: attempt 0, round running false", func(t *testing.T, e *Engine) {
			e.roundDone(0, true)
		}},
		{"round-ends-twice", "a checkpoint round ends once: attempt 0 ended with no round running", func(t *testing.T, e *Engine) {
			e.ckptWriting = true
			// The waiter's answer ends the round under the running one.
			e.ckptWaiters = []checkpointWaiter{{done: func() { e.ckptWriting = false }}}
			e.roundDone(0, true)
		}},
		{"buckets-land-after-the-round", "a round's key buckets land while the round runs: attempt 0", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.keys.add(segment.KeyHashOf("k"), 1)
			e.writeCheckpoint(0)
			s.puts[0]("", nil) // the run
			e.ckptWriting = false
			s.puts[1]("etag", nil) // the manifest
		}},
	}
	runBreaks(t, cases)
}

func TestInvariantKeyStoreIO(t *testing.T) {
	h, runOf := oneKeyRun(t)
	run := func(seq uint64) *keyRun { return runOf(seq, 1) }
	cases := []breakCase{
		{"manifest-written-unheld", "a manifest is written while its bucket is held: bucket 1 with 0 runs written, not busy", func(t *testing.T, e *Engine) {
			e.putManifest(&keyBucket{num: 1}, nil, func(ok bool) {})
		}},
		{"manifest-answered-unheld", "a bucket stays held until its manifest write answers: bucket 1 answered (<nil>), not busy", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := &keyBucket{num: 1, busy: true}
			e.putManifest(b, nil, func(ok bool) {})
			b.busy = false
			s.puts[0]("etag", nil)
			if b.etag != "" {
				t.Errorf("the bucket took the write's version %q", b.etag)
			}
		}},
		{"new-run-listed-already", "a new key run is not listed yet: bucket 0 already lists run 0-0", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.keys.add(h, 1)
			b := e.keys.bucket(0)
			b.runs = []*keyRun{run(0)} // this incarnation's next ref, listed
			e.writeBucket(b, func(bool) {})
			s.puts[0]("", nil)
			if len(s.puts) != 1 || b.busy || len(b.recent) != 1 {
				t.Errorf("%d puts, busy %t, %d recent: the run must not be listed, its key recent again", len(s.puts), b.busy, len(b.recent))
			}
		}},
		{"run-without-meta", "a listed key run carries its meta: bucket 3, run 0 of 1 (0-7) counts 1 keys, its meta -1", func(t *testing.T, e *Engine) {
			timers := &heldTimers{}
			e.p.Timers = timers
			r := &keyRun{ref: segment.KeyRunRef{Seq: 7, Count: 1, MinValue: 1, Value: 1}}
			var got error
			e.loadRuns(&keyBucket{num: 3, runs: []*keyRun{r}}, []segment.KeyRunRef{r.ref}, func(_ []*keyRun, _ bool, err error) { got = err })
			timers.fns[0]() // nothing to read: forEach answers later
			if !errors.Is(got, ErrInvariant) {
				t.Errorf("loadRuns answered %v", got)
			}
		}},
		{"recovery-reads-unbounded", "recovery reads at most ⌈window / width⌉ + 3 key buckets", func(t *testing.T, e *Engine) {
			e.cfg.IdempotencyWindow = time.Hour
			e.p.Clock = &backClock{stepClock{t: 1000 * time.Hour}} // the cutoff read a day before now
			e.readKeyStore(newKeyStore(time.Hour), func(error) {})
		}},
		{"lookup-without-key", "a key lookup is for a unit with an idempotency key: unit for", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			if !e.lookupKey(Unit{}, func(error) {}) || len(e.answers) != 1 {
				t.Errorf("the unit must be taken and answered: %d answers", len(e.answers))
			}
		}},
		{"lookup-ends-twice", "one lookup per key, ended once: the lookup of", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.lookups = map[segment.KeyHash]*keyLookup{}
			e.keys.bucket(0).runs = []*keyRun{run(1)}
			if !e.lookupKey(Unit{IdempotencyKey: "k"}, func(error) {}) {
				t.Fatal("no lookup started")
			}
			e.lookups[h] = &keyLookup{} // another lookup took the key
			s.gets[0](nil, ObjectInfo{}, ErrTooLarge)
			if len(e.answers) != 1 || e.lookups[h] == nil {
				t.Errorf("%d answers, lookup in flight %v: the waiter is answered, the other lookup kept", len(e.answers), e.lookups[h])
			}
		}},
		{"lookup-block-out-of-run", "a lookup reads a block of its run: block 5 of 1, run 0-1 of bucket 2", func(t *testing.T, e *Engine) {
			e.searchBlocks(h, []blockRef{{bucket: &keyBucket{num: 2}, run: run(1), block: 5}}, 0, func(bool, error) {})
		}},
		{"refresh-answered-unheld", "a bucket stays held while its manifest is read: bucket 0 answered", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := e.keys.bucket(0)
			e.refreshBucket(b, 0, func() {})
			b.busy = false
			s.gets[0](nil, ObjectInfo{}, ErrNotFound)
		}},
		{"merge-inputs-unheld", "a merge holds its bucket while it reads its inputs: bucket 0, 2 runs read, not busy", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.p.Clock = &stepClock{t: 1000 * time.Hour} // bucket 0 takes no more keys
			b := e.keys.bucket(0)
			b.runs = []*keyRun{run(1), run(2)}
			e.mergeKeys(func() {})
			b.busy = false
			for _, g := range s.gets {
				g(nil, ObjectInfo{}, ErrNotFound)
			}
		}},
		{"merge-input-short", "a merge reads its input runs whole: bucket 0, run 0-2 counts 1 keys, 0 read", func(t *testing.T, e *Engine) {
			e.checkMergeInputs(&keyBucket{}, []*keyRun{run(1), run(2)}, [][]segment.KeyEntry{{{Hash: h}}, nil})
		}},
		{"merge-inputs-past-a-run", "a merge's inputs fit one run: bucket 0, 2 runs of 1048577 keys", func(t *testing.T, e *Engine) {
			big := &keyRun{ref: segment.KeyRunRef{Count: segment.KeyRunEntriesMax}}
			e.checkMergeInputs(&keyBucket{}, []*keyRun{big, run(1)}, [][]segment.KeyEntry{make([]segment.KeyEntry, segment.KeyRunEntriesMax), {{Hash: h}}})
		}},
		{"listed-run-dropped", "a key run is deleted only once no manifest lists it: bucket 4 lists run 0-2 (1 keys), 2 runs dropped", func(t *testing.T, e *Engine) {
			b := &keyBucket{num: 4, runs: []*keyRun{run(2)}}
			e.dropRuns(b, []*keyRun{run(1), run(2)}) // no store: a delete would panic
		}},
		{"merge-of-one-run", "a merge replaces two runs or more: bucket 4, 1 runs replaced", func(t *testing.T, e *Engine) {
			b := &keyBucket{num: 4, busy: true}
			e.replaceRuns(b, []*keyRun{run(1)}, run(2), func() {})
			if b.busy {
				t.Error("the refused merge kept its bucket")
			}
		}},
	}
	runBreaks(t, cases)
}

func TestInvariantKeyStoreExpiry(t *testing.T) {
	var got capture
	s := newKeyStore(time.Hour)
	s.inv = got.hook()
	s.nums = []int64{1} // a number without its bucket
	if dropped := s.expire(int64(10 * time.Hour / time.Millisecond)); len(dropped) != 0 {
		t.Errorf("dropped %d buckets", len(dropped))
	}
	got.want(t, "key store bucket numbers one per bucket: number 1 expires without its bucket (1 numbers, 0 buckets)")

	got = capture{}
	s = newKeyStore(time.Hour)
	s.inv = got.hook()
	s.bucket(5)
	s.buckets[9] = &keyBucket{num: 9} // a bucket without its number
	s.expire(0)
	got.want(t, "key store bucket numbers one per bucket: 1 numbers, 2 buckets after expiring 0 before bucket 0")
}

// oneSink configures the sink "lake" only.
type oneSink struct{}

func (oneSink) Sink(ref string) (Sink, bool) { return nil, ref == "lake" }

// TestRefusedHeadStartsNoJobTwice: a lane head that can never start (no
// sink of its ref) is refused inside compact, and refuseJob runs compact
// again, which starts the later heads; the outer compact must not start
// them a second time from its own list of heads.
//
// compact's loop kept the heads it listed before the refusal and started
// them again: running 4 for 2 jobs, each gathered and applied twice at
// once (with startJob's precondition, the second start fails closed). It
// now skips a head that is no longer pending.
func TestRefusedHeadStartsNoJobTwice(t *testing.T) {
	e := bare()
	withPorts(e)
	e.state, e.p.Sinks = stateReady, oneSink{}
	e.cfg.CompactionConcurrency = 4
	e.cache.budget = 1 << 20
	e.lanes = map[laneKey]*lane{}
	for i, ref := range []string{"gone", "lake", "lake"} {
		st := &segState{Segment: Segment{ID: SnapshotID{1, uint64(i + 1)}, Index: &segment.Index{BodyBytes: 10}}}
		g := segment.Group{SinkRef: ref, Namespace: fmt.Sprint("ns", i)}
		j := &job{id: fmt.Sprint("j", i), group: g, cut: st, pieces: []piece{{seg: st, ordinals: []segment.SliceOrdinal{0}}}}
		ln := &lane{key: laneOf(g), jobs: []*job{j}}
		e.lanes[ln.key], e.laneOrder = ln, append(e.laneOrder, ln)
	}
	e.compact()
	if e.err != nil || e.running != 2 {
		t.Fatalf("running %d, err %v; want the two startable heads started once each", e.running, e.err)
	}
}
