package engine

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// The checks of the key store, the offsets view, the writer record, the
// epoch claim, floors and the body cache, each broken on purpose.

// TestInvariantKeyStorePieces breaks the key store's own checks (no
// engine: its hook).
func TestInvariantKeyStorePieces(t *testing.T) {
	h1, h2 := segment.KeyHashOf("k1"), segment.KeyHashOf("k2")
	for name, c := range map[string]struct {
		do   func(s *keyStore)
		want string
	}{
		"bucket-negative": {func(s *keyStore) { s.bucket(-1) },
			"key store bucket numbers ≥ 0 (they name objects): bucket -1 created, 0 buckets"},
		"key-added-to-a-stale-flight": {func(s *keyStore) {
			s.bucket(0).flight[h1] = 1 // left in flight by a write that ended
			s.add(h2, 5)
		}, "key store keys in flight only while a write holds their bucket: bucket 0 not busy with 1 keys in flight, adding"},
	} {
		t.Run(name, func(t *testing.T) {
			var got capture
			s := newKeyStore(time.Hour)
			s.inv = got.hook()
			c.do(s)
			got.want(t, c.want)
		})
	}
}

// oneKeyRun is key "k"'s hash, and a run of it (count entries named,
// one encoded) for a bucket's manifest at seq.
func oneKeyRun(t *testing.T) (segment.KeyHash, func(seq uint64, count int) *keyRun) {
	t.Helper()
	h := segment.KeyHashOf("k")
	_, meta, err := segment.EncodeKeyRun([]segment.KeyEntry{{Hash: h, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return h, func(seq uint64, count int) *keyRun {
		return &keyRun{ref: segment.KeyRunRef{Seq: seq, Count: count, MinValue: 1, Value: 1}, meta: meta}
	}
}

// TestInvariantKeyStoreSteps breaks the key store's I/O steps' checks on
// a bare engine.
func TestInvariantKeyStoreSteps(t *testing.T) {
	h, run := oneKeyRun(t)
	cases := []breakCase{
		{"bucket-write-ends-twice", "a key bucket write ends once, while it holds its bucket: bucket 0 ends (landed false) with 0 keys in flight, not busy", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.keys.add(h, 1)
			b := e.keys.bucket(0)
			ends := 0
			e.writeBucket(b, func(bool) { ends++ })
			s.puts[0]("", ErrTooLarge) // the run's PUT fails…
			s.puts[0]("", ErrTooLarge) // …and its answer arrives again
			if ends != 2 || len(b.recent) != 1 {
				t.Errorf("%d ends, %d recent: the refused end answers, the key stays recent", ends, len(b.recent))
			}
		}},
		{"bucket-written-for-nothing", "a key bucket is written for its recent keys or a rewrite: bucket 0 with no recent key, no rewrite (0 runs)", func(t *testing.T, e *Engine) {
			b := e.keys.bucket(0) // neither recent keys nor a rewrite: dirty would not pick it
			landed := true
			e.writeBucket(b, func(ok bool) { landed = ok })
			if landed || b.busy {
				t.Errorf("landed %t, busy %t: the write must fail and free its bucket", landed, b.busy)
			}
		}},
		{"manifest-lands-a-run-without-meta", "a listed key run carries its meta: bucket 1, run 0 of 1 (0-7) counts 1 keys, its meta -1", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := &keyBucket{num: 1, busy: true}
			landed := true
			e.putManifest(b, []*keyRun{{ref: segment.KeyRunRef{Seq: 7, Count: 1, MinValue: 1, Value: 1}}}, func(ok bool) { landed = ok })
			s.puts[0]("etag", nil)
			if landed {
				t.Error("the write answered landed")
			}
		}},
		{"manifest-read-unheld", "a manifest of the key store is read while its bucket is held: bucket 0 read, not busy (0 runs)", func(t *testing.T, e *Engine) {
			var got error
			e.readBucket(e.keys, e.keys.bucket(0), func(err error) { got = err })
			if !errors.Is(got, ErrInvariant) {
				t.Errorf("readBucket answered %v", got)
			}
		}},
		{"run-meta-read-unbounded", "a run's count is bounded before its meta is read: bucket 2, run 0-3 of 0 keys, limit 1..1048576", func(t *testing.T, e *Engine) {
			e.readRunMeta(2, segment.KeyRunRef{Seq: 3}, func(m *segment.KeyRunMeta, err error) {
				if m != nil || !errors.Is(err, ErrInvariant) {
					t.Errorf("readRunMeta answered %v, %v", m, err)
				}
			})
		}},
		{"run-read-unbounded", "a run's count is bounded before the run is read: bucket 2, run 0-3 of 1048577 keys, limit 1..1048576", func(t *testing.T, e *Engine) {
			e.readRun(2, segment.KeyRunRef{Seq: 3, Count: segment.KeyRunEntriesMax + 1}, func(es []segment.KeyEntry, err error) {
				if es != nil || !errors.Is(err, ErrInvariant) {
					t.Errorf("readRun answered %d entries, %v", len(es), err)
				}
			})
		}},
		{"merged-run-short", "a merged run holds every key of its inputs, once: bucket 4, run 0-9 of 2 keys, 2 inputs, largest 3, sum 4", func(t *testing.T, e *Engine) {
			b := &keyBucket{num: 4, busy: true}
			ins := []*keyRun{run(1, 1), run(2, 3)}
			b.runs = ins
			e.replaceRuns(b, ins, run(9, 2), func() {}) // no store: a manifest write would panic
			if b.busy {
				t.Error("the refused merge kept its bucket")
			}
		}},
		{"merged-run-long", "a merged run holds every key of its inputs, once: bucket 4, run 0-9 of 5 keys, 2 inputs, largest 3, sum 4", func(t *testing.T, e *Engine) {
			b := &keyBucket{num: 4, busy: true}
			ins := []*keyRun{run(1, 1), run(2, 3)}
			b.runs = ins
			e.replaceRuns(b, ins, run(9, 5), func() {})
		}},
		{"wal-id-never-drawn", "a log identity is drawn non-zero: 4 draws of the Rand port gave zero", func(t *testing.T, e *Engine) {
			e.p.Rand = fixedRand(0)
			if id := e.newWALID(); !id.IsZero() {
				t.Errorf("drew %s", id)
			}
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantClaimRounds: a claim round past ClaimRoundsMax answers
// ErrInvariant (the claim's caller fails recovery with it) and reads
// nothing.
func TestInvariantClaimRounds(t *testing.T) {
	e := bare()
	var got error
	e.claimRound(1, ClaimRoundsMax, func(_ writerRecord, _ string, err error) { got = err }) // no store: a read would panic
	if !errors.Is(got, ErrInvariant) || !strings.Contains(got.Error(), "a claim makes at most ClaimRoundsMax rounds: round 8, limit 8") {
		t.Fatalf("got %v; want the claim's round bound broken", got)
	}
}

// TestInvariantPiecesPanic breaks the REQUIRES of helpers without a hook:
// each panics with its values.
func TestInvariantPiecesPanic(t *testing.T) {
	h := segment.KeyHashOf("k")
	seals := func(n int, base, seq uint64) []seal {
		out := make([]seal, n)
		for i := range out {
			out[i] = seal{base + uint64(i), seq}
		}
		return out
	}
	for name, c := range map[string]struct {
		do   func()
		want string
	}{
		"recent-keys-taken-unheld": {func() {
			b := newKeyStore(time.Hour).bucket(0)
			b.recent[h] = 1
			b.takeRecent()
		}, "a run write takes recent keys while it holds their bucket: bucket 0, 1 recent, not busy"},
		"run-inserted-twice": {func() {
			r := &keyRun{ref: segment.KeyRunRef{Epoch: 2, Seq: 5, Count: 1}}
			insertRun([]*keyRun{r}, &keyRun{ref: r.ref})
		}, "a run is inserted once: run 2-5 (1 keys) listed already at 0 of 1 runs"},
		"writer-seals-past-the-parser": {func() {
			writerRecord{epoch: 5000, floor: 5000, seals: seals(sealsMax+1, 1, 1)}.encode()
		}, "a writer record holds at most sealsMax seals: 4097 seals, limit 4096 (epoch 5000, floor 5000)"},
		"writer-object-past-the-read-limit": {func() {
			// Every seal at its longest: sealsMax of them outgrow the limit.
			writerRecord{epoch: math.MaxUint64, floor: math.MaxUint64, seals: seals(sealsMax, math.MaxUint64-sealsMax, math.MaxUint64)}.encode()
		}, "a writer object fits what readWriter reads: 200870 bytes, limit 131072 (4096 seals)"},
		"writer-object-breaks-its-promise": {func() { EncodeWriterObject(1, 7, 2, nil) },
			"writer record floor ≤ epoch: floor 2, epoch 1"},
		"unit-of-floors-only": {func() {
			pendingKeys(segment.Offsets{{Key: segment.FloorKey("src/", "5"), Value: 1}})
		}, "a unit with floors holds a plain offset too: 1 offsets, all floors"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if err, ok := r.(error); ok {
					msg = err.Error()
				}
				if !strings.Contains(msg, c.want) {
					t.Fatalf("recovered %v; want a panic naming %q", r, c.want)
				}
			}()
			c.do()
		})
	}
}

// TestInvariantViewAndCachePieces breaks the offsets view's and the body
// cache's new checks (their hooks).
func TestInvariantViewAndCachePieces(t *testing.T) {
	t.Run("family-listed-without-floor", func(t *testing.T) {
		var got capture
		v := newOffsetsView()
		v.inv = got.hook()
		v.fams = []string{"src/"} // floors out of step
		if _, ok := v.floorOf("src/1"); ok {
			t.Error("a family without a floor covered a key")
		}
		got.want(t, `offsets view families each have their floor: family "src/" listed without one (1 families, 0 floors)`)
	})
	t.Run("key-held-unlisted", func(t *testing.T) {
		var got capture
		v := newOffsetsView()
		v.inv = got.hook()
		v.vals["a"] = 1 // held, in neither order nor fresh
		v.merge(segment.Offsets{{Key: "b", Value: 1}})
		got.want(t, "offsets view lists every key it holds: 2 held, 0 in order, 1 fresh, after merging b=1")
	})
	t.Run("pinned-past-used", func(t *testing.T) {
		var got capture
		var marks Marks
		c := newBodyCache(100, &marks)
		c.inv = got.hook()
		c.put(SnapshotID{1, 1}, nil, 10, true)
		c.used = 5 // drifted below Σ sizes
		c.pinnedBytes()
		got.want(t, "body cache pinned bytes ≤ used: pinned 10, used 5, 1 entries")
	})
	t.Run("negative-size-asked", func(t *testing.T) {
		var got capture
		var marks Marks
		c := newBodyCache(100, &marks)
		c.inv = got.hook()
		if c.canHold(-1) {
			t.Error("a negative size fits")
		}
		got.want(t, "a body's size asked of the cache ≥ 0: -1 bytes, budget 100")
	})
}

// TestInvariantViewCheck breaks each rule of the offsets view's whole
// check (O(keys), run by tests): each fails with ErrInvariant naming it.
func TestInvariantViewCheck(t *testing.T) {
	floor := segment.FloorKey("src/", "5")
	withFloor := func() *offsetsView {
		v := newOffsetsView()
		v.merge(segment.Offsets{{Key: floor, Value: 1}, {Key: "x", Value: 1}})
		v.sorted()
		return v
	}
	for name, c := range map[string]struct {
		break_ func(v *offsetsView)
		want   string
	}{
		"order-unsorted":  {func(v *offsetsView) { v.order = []string{"x", floor} }, `offsets view order sorted: "x" then "floor/src/\x005"`},
		"key-unlisted":    {func(v *offsetsView) { v.vals["y"] = 2 }, `offsets view lists every key it holds: "y"=2 not listed`},
		"key-under-floor": {func(v *offsetsView) { v.vals["src/1"], v.fresh = 3, []string{"src/1"} }, `offsets view holds no key under a floor: "src/1"=3 held under floor "floor/src/\x005"`},
		"families-unsorted": {func(v *offsetsView) { v.fams, v.floors["a/"] = []string{"src/", "a/"}, "1" },
			`offsets view families sorted, one per floor: families ["src/" "a/"] for 2 floors`},
		"floor-entry-not-its-familys": {func(v *offsetsView) { v.floors["src/"] = "6" }, `offsets view floor entries are their families' floors: "floor/src/\x005" held, family's floor "6"`},
		"floor-without-entry":         {func(v *offsetsView) { delete(v.vals, floor) }, "offsets view holds one entry per floor: 0 floor entries held, 1 floors"},
	} {
		t.Run(name, func(t *testing.T) {
			v := withFloor()
			if err := v.check(); err != nil {
				t.Fatalf("before breaking: %v", err)
			}
			c.break_(v)
			if err := v.check(); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want the invariant %q broken", err, c.want)
			}
		})
	}
}
