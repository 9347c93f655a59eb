package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// The key store's, the offsets view's and the disk log's pre- and
// postconditions added for the assertion density (keystore*.go,
// offsets_view.go, wal_disk*.go), each broken on purpose: a bucket held
// by a lookup's read where a write or a merge believes it holds it, keys
// left in flight, a port that answers twice, a step on a state it
// excludes.

// TestInvariantKeyStoreFlight: keys in flight only while a write holds
// their bucket — where a round picks buckets, and where a committed key
// is judged not durable yet.
func TestInvariantKeyStoreFlight(t *testing.T) {
	h1, h2 := segment.KeyHashOf("k1"), segment.KeyHashOf("k2")
	for name, c := range map[string]struct {
		do   func(t *testing.T, s *keyStore)
		want string
	}{
		"dirty-with-a-stale-flight": {func(t *testing.T, s *keyStore) {
			b := s.bucket(0)
			b.flight[h1] = 1 // left in flight by a write that ended
			b.recent[h2] = 2
			if got := s.dirty(); got != nil {
				t.Errorf("the round picked %d buckets", len(got))
			}
		}, "key store keys in flight only while a write holds their bucket: bucket 0 not busy with 1 keys in flight, 1 recent, at a round"},
		"durable-in-a-stale-flight": {func(t *testing.T, s *keyStore) {
			s.bucket(0).flight[h1] = 5
			if s.durable(h1, 5, 0) {
				t.Error("a key in flight is durable")
			}
		}, "=5 asked for in bucket 0, not busy with 1 keys in flight"},
	} {
		t.Run(name, func(t *testing.T) {
			var got capture
			s := newKeyStore(time.Hour)
			s.inv = got.hook()
			c.do(t, s)
			got.want(t, c.want)
		})
	}
}

// TestKeyStoreFlightWhileBusy: keys in flight under a write that holds
// their bucket pass both checks: the bucket is not picked, the key not
// durable yet.
func TestKeyStoreFlightWhileBusy(t *testing.T) {
	h := segment.KeyHashOf("k")
	var got capture
	s := newKeyStore(time.Hour)
	s.inv = got.hook()
	b := s.bucket(0)
	b.busy, b.flight[h] = true, 5
	b.recent[segment.KeyHashOf("k2")] = 6
	if d := s.dirty(); len(d) != 0 || s.durable(h, 5, 0) || got.err != nil {
		t.Fatalf("dirty %d, durable %t, err %v; want a held bucket skipped, its key not durable, nothing broken", len(d), s.durable(h, 5, 0), got.err)
	}
}

// TestInvariantKeyStoreHolds: a bucket's hold is its write's (a round's
// or a merge's) or a lookup's read's, never both; every async answer
// finds it held by what it answers; a port answers once.
func TestInvariantKeyStoreHolds(t *testing.T) {
	h, runOf := oneKeyRun(t)
	run := func(seq uint64) *keyRun { return runOf(seq, 1) }
	cases := []breakCase{
		// keystore_io.go.
		{"run-encoded-answered-twice", "the executor answers a key run's encoding once: 1 entries of bucket 3 answered again", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.p.Exec = twiceExec{}
			e.putRun(3, func() []segment.KeyEntry { return []segment.KeyEntry{{Hash: h, Value: 1}} }, func(*keyRun, error) {})
			if len(s.puts) != 1 || e.keySeq != 1 {
				t.Errorf("%d PUTs, key seq %d: the second answer named and wrote another run", len(s.puts), e.keySeq)
			}
		}},
		{"bucket-write-ends-under-a-read", "a key bucket write ends while it, not a read, holds its bucket: bucket 0 ends (landed false) with 1 keys in flight while a read holds it", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.keys.add(h, 1)
			b := e.keys.bucket(0)
			e.writeBucket(b, func(bool) {})
			b.reading = true // the write's hold ended early and a read took the bucket
			s.puts[0]("", ErrTooLarge)
			if !b.busy || len(b.flight) != 1 {
				t.Errorf("busy %t, %d in flight: the refused end freed the read's hold", b.busy, len(b.flight))
			}
		}},
		{"manifest-written-under-a-read", "a manifest is written by the write that holds its bucket, not under a read: bucket 1 with 0 runs written while a read holds it", func(t *testing.T, e *Engine) {
			e.putManifest(&keyBucket{num: 1, busy: true, reading: true}, nil, func(ok bool) {
				if ok {
					t.Error("the refused write landed")
				}
			})
		}},
		{"manifest-answered-twice", "the store answers a manifest write once: bucket 1 with 0 runs answered again (<nil>)", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := &keyBucket{num: 1, busy: true}
			landed := 0
			e.putManifest(b, nil, func(ok bool) {
				if ok {
					landed++
				}
			})
			s.puts[0]("v1", nil)
			s.puts[0]("v2", nil)
			if b.etag != "v1" || landed != 1 {
				t.Errorf("version %q, %d landings: the second answer was taken", b.etag, landed)
			}
		}},
		{"manifest-answered-under-a-read", "a bucket stays held by its write until the manifest write answers: bucket 1 answered (<nil>) while a read holds it", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := &keyBucket{num: 1, busy: true}
			e.putManifest(b, nil, func(bool) {})
			b.reading = true // busy is now a lookup's read
			s.puts[0]("etag", nil)
			if b.etag != "" {
				t.Errorf("the bucket took the write's version %q under the read", b.etag)
			}
		}},
		{"manifest-read-answered-unheld", "a bucket stays held while its manifest is read: bucket 2 answered (attempt 0, ", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := e.keys.bucket(2)
			b.busy, b.etag, b.runs = true, "v1", []*keyRun{run(1)}
			e.readBucket(e.keys, b, func(error) {})
			b.busy = false
			s.gets[0](nil, ObjectInfo{}, ErrNotFound)
			if b.etag != "v1" || b.rewrite {
				t.Errorf("version %q, rewrite %t: the unheld answer went into the bucket", b.etag, b.rewrite)
			}
		}},
		{"manifest-runs-answered-unheld", "a bucket stays held while its manifest's runs are read: bucket 2, 1 runs listed, answered (attempt 0), not busy", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := e.keys.bucket(2)
			b.busy = true
			e.readBucket(e.keys, b, func(error) {})
			body, err := segment.EncodeKeyManifest(1, []segment.KeyRunRef{run(1).ref})
			if err != nil {
				t.Fatal(err)
			}
			s.gets[0](body, ObjectInfo{ETag: "m1"}, nil) // held: its run's meta is read next
			b.busy = false
			s.gets[1](nil, ObjectInfo{}, ErrNotFound)
			if b.etag != "" || b.runs != nil {
				t.Errorf("version %q, %d runs: the unheld answer went into the bucket", b.etag, len(b.runs))
			}
		}},

		// keystore_lookup.go.
		{"read-takes-a-bucket-with-keys-in-flight", "a key bucket is held by a read only while busy, with no keys in flight: bucket 0 taken by a read with 1 keys in flight", func(t *testing.T, e *Engine) {
			b := e.keys.bucket(0)
			b.flight[h] = 1 // left by a write that ended
			called := false
			e.refreshBucket(b, 0, func() { called = true })
			if b.busy || b.reading || !called {
				t.Errorf("busy %t, reading %t, answered %t: the refused read took the bucket", b.busy, b.reading, called)
			}
		}},
		{"read-answered-with-keys-in-flight", "a key bucket is held by a read only while busy, with no keys in flight: bucket 0 answered (<nil>) with 1 keys in flight", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			b := e.keys.bucket(0)
			e.refreshBucket(b, 0, func() {})
			b.flight[h] = 1 // a write took keys under the read
			s.gets[0](nil, ObjectInfo{}, ErrNotFound)
			if !b.busy || !b.reading {
				t.Errorf("busy %t, reading %t: the read freed the bucket under keys in flight", b.busy, b.reading)
			}
		}},

		// keystore_merge.go.
		{"merge-inputs-read-under-a-read", "a merge holds its bucket while it reads its inputs, not a read: bucket 0, 2 runs read while a read holds it", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.p.Clock = &stepClock{t: 1000 * time.Hour} // bucket 0 takes no more keys
			b := e.keys.bucket(0)
			b.runs = []*keyRun{run(1), run(2)}
			e.mergeKeys(func() {})
			b.reading = true // the merge's hold ended early and a read took the bucket
			for _, g := range s.gets {
				g(nil, ObjectInfo{}, ErrNotFound)
			}
			if !b.busy {
				t.Error("the refused merge freed the read's hold")
			}
		}},
		{"merge-run-fails-under-a-read", "a merge frees its bucket while it, not a read, holds it: bucket 0, run write failed (", func(t *testing.T, e *Engine) {
			s := withPorts(e)
			e.p.Clock = &stepClock{t: 1000 * time.Hour}
			var bodies [][]byte
			b := e.keys.bucket(0)
			for i, k := range []string{"k1", "k2"} {
				body, m, err := segment.EncodeKeyRun([]segment.KeyEntry{{Hash: segment.KeyHashOf(k), Value: 1}})
				if err != nil {
					t.Fatal(err)
				}
				bodies = append(bodies, body)
				b.runs = append(b.runs, &keyRun{ref: segment.KeyRunRef{Seq: uint64(i + 1), Count: 1, MinValue: 1, Value: 1}, meta: m})
			}
			e.mergeKeys(func() {})
			for i, g := range s.gets {
				g(bodies[i], ObjectInfo{}, nil) // both inputs read whole: the merged run is written
			}
			if len(s.puts) != 1 {
				t.Fatalf("%d PUTs; want the merged run's", len(s.puts))
			}
			b.reading = true // the merge's hold ended early and a read took the bucket
			s.puts[0]("", ErrTooLarge)
			if !b.busy {
				t.Error("the refused merge freed the read's hold")
			}
		}},
		{"merge-replaces-under-a-read", "a merge replaces runs while it, not a read, holds its bucket: bucket 4, 2 runs replaced while a read holds it", func(t *testing.T, e *Engine) {
			b := &keyBucket{num: 4, busy: true, reading: true, runs: []*keyRun{run(1), run(2)}}
			e.replaceRuns(b, []*keyRun{run(1), run(2)}, run(3), func() {}) // no store: a delete or a PUT would panic
			if !b.busy {
				t.Error("the refused merge freed the read's hold")
			}
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantOffsetsViewMore: the view's floors and its reads of
// _offsets — a floor drops only what it covers, a family's floor is held
// while it is the family's, what is read merges with no write in flight.
func TestInvariantOffsetsViewMore(t *testing.T) {
	floor := func(mark string) segment.Offsets {
		return segment.Offsets{{Key: segment.FloorKey("src/", mark), Value: 1}}
	}
	written := func(v *offsetsView) {
		v.merge(segment.Offsets{{Key: "src/1", Value: 1}})
		v.beginWrite() // src/1 in flight
	}
	for name, c := range map[string]struct {
		do   func(t *testing.T, v *offsetsView)
		want string
	}{
		"floor-drops-an-uncovered-key": {func(t *testing.T, v *offsetsView) {
			// An order out of order (sorted keeps it sorted): the family's
			// range from "src/" to "src/5" takes in "src/9".
			v.vals, v.order = map[string]uint64{"src/9": 1, "src/0": 1}, []string{"src/9", "src/0"}
			v.merge(floor("5"))
			if _, ok := v.get("src/9"); !ok {
				t.Error("the uncovered key was dropped")
			}
		}, `a floor drops only the keys it covers: "src/9" dropped by family "src/" at mark "5" (0..2 of 2 keys)`},
		"floor-replaced-without-its-entry": {func(t *testing.T, v *offsetsView) {
			v.merge(floor("5"))
			delete(v.vals, segment.FloorKey("src/", "5")) // as a family prefixing FloorPrefix would drop it
			v.merge(floor("7"))
			if v.floors["src/"] != "5" {
				t.Errorf("family's floor %q: the refused floor replaced it", v.floors["src/"])
			}
		}, fmt.Sprintf("a family's floor is held while it is the family's: %q (family %q) missing when %q replaces it, 0 keys held",
			segment.FloorKey("src/", "5"), "src/", segment.FloorKey("src/", "7"))},
		"offsets-merged-over-a-write": {func(t *testing.T, v *offsetsView) {
			written(v)
			v.mergeObject(segment.Offsets{{Key: "src/2", Value: 3}})
			if _, ok := v.get("src/2"); ok {
				t.Error("the read merged under the write")
			}
		}, "_offsets merges into a view with no write in flight: 1 entries read while 1 keys are in flight"},
		"offsets-lost-over-a-write": {func(t *testing.T, v *offsetsView) {
			written(v)
			v.objectLost()
			if len(v.unsynced) != 0 {
				t.Errorf("%d keys unsynced: the loss was taken under the write", len(v.unsynced))
			}
		}, "_offsets is found lost by a view with no write in flight: 1 keys held, 1 in flight"},
	} {
		t.Run(name, func(t *testing.T) {
			var got capture
			v := newOffsetsView()
			v.inv = got.hook()
			c.do(t, v)
			got.want(t, c.want)
		})
	}
}

// TestOffsetsFloorDropsItsRange: a floor over a sorted view drops its
// family's keys at or below the mark, and nothing else, without a check
// firing.
func TestOffsetsFloorDropsItsRange(t *testing.T) {
	var got capture
	v := newOffsetsView()
	v.inv = got.hook()
	v.merge(segment.Offsets{{Key: "src/1", Value: 1}, {Key: "src/5", Value: 1}, {Key: "src/9", Value: 1}, {Key: "srd/0", Value: 1}})
	v.sorted()
	v.merge(segment.Offsets{{Key: segment.FloorKey("src/", "5"), Value: 1}})
	v.merge(segment.Offsets{{Key: segment.FloorKey("src/", "7"), Value: 1}})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if err := v.check(); err != nil {
		t.Fatal(err)
	}
	want := segment.Offsets{{Key: segment.FloorKey("src/", "7"), Value: 1}, {Key: "src/9", Value: 1}, {Key: "srd/0", Value: 1}}
	if o := v.sorted(); fmt.Sprint(o) != fmt.Sprint(want) {
		t.Fatalf("view %v; want %v", o, want)
	}
}

// listDisk is a Disk whose ReadDir answers its errors in turn, each call
// answered once per error listed (twice: a port that answers again).
type listDisk struct {
	wal.Disk
	errs []error
}

func (d listDisk) ReadDir(_ string, done func([]string, error)) {
	for _, err := range d.errs {
		done(nil, err)
	}
}

// TestInvariantDiskLogMore: the disk log's steps on a state they exclude,
// and its log's ports answering twice.
func TestInvariantDiskLogMore(t *testing.T) {
	key := segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Partition: "p"}
	withDisk := func(e *Engine, d wal.Disk) *diskLog {
		l := testDiskLog(e, 1)
		l.log = wal.New(wal.Config{Partitions: 1, SegmentBytes: 1 << 20, BatchBytes: 1 << 16, AttemptsMax: AttemptsMax}, d, e.p.Timers, logHooks{l})
		return l
	}
	halted := func(part uint32) *wal.PartitionScan {
		scan := wal.NewPartitionScan(part)
		scan.Halted = errors.New("bit flip")
		return scan
	}
	cases := []breakCase{
		// wal_disk.go.
		{"accept-on-a-halted-partition", "a unit the disk log accepts goes to a partition that takes writes: unit of ns/p to partition 0, halted on bit flip", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			l := testDiskLog(e, 1)
			l.log.Partition(0).Resume(halted(0))
			l.accept(&unit{dones: []func(error){func(error) {}}}, Unit{Key: key, arrow: []byte{1}})
			if len(e.answers) != 1 || l.inFlight != 0 || e.held != 0 {
				t.Errorf("%d answers, %d in flight, %d held: the refused unit is answered and not held", len(e.answers), l.inFlight, e.held)
			}
		}},
		{"flushed-generation-live", "a flushed generation is never live's: snapshot 000000000001-000000000001, generation 1 is live's (0 units)", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen = 1
			l.recordFlushed(SnapshotID{1, 1}, 1, 1, nil)
		}},

		// wal_disk_hooks.go.
		{"unknown-without-unit", "an entry answered unknown is a held unit's: record true, error fsync", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			logHooks{l}.Unknown(&wal.Write[logJoin]{Record: wal.FlushedRecord{}}, errors.New("fsync"))
		}},

		// wal_disk_recover.go.
		{"log-read-answered-twice", "the log's read answers once: round 0 answered again (<nil>)", func(t *testing.T, e *Engine) {
			l := withDisk(e, listDisk{errs: []error{ErrNotFound, ErrNotFound}})
			reads := 0
			l.recoverLog(0, func(error) { reads++ })
			if reads != 1 {
				t.Errorf("recovery went on %d times", reads)
			}
		}},
		{"log-read-retry-fires-twice", "the log read's retry timer fires once: round 1 fired again", func(t *testing.T, e *Engine) {
			timers := &heldTimers{}
			e.p.Timers, e.p.Rand = timers, fixedRand(0)
			e.cfg.RetryBase, e.cfg.RetryMax = time.Millisecond, time.Second
			l := withDisk(e, listDisk{errs: []error{errors.New("EIO")}})
			l.recoverLog(0, func(error) { t.Error("recovery went on") })
			timers.fns[0]() // round 1 reads, fails and waits again
			timers.fns[0]()
			if len(timers.fns) != 2 {
				t.Errorf("%d timers: the second firing read the log again", len(timers.fns))
			}
		}},
		{"segment-read-without-scan", "recovery reads the log's segments while it holds its scan: partition 0 segment 3 read with none", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.readSegment(l.log.Partition(0), &wal.Segment{Num: 3}, nil)
		}},
		{"segment-scanned-after-halt", "a halted partition's segments are scanned no more: partition 0 segment 2 read after its halt on bit flip", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			ps := &partScan{p: l.log.Partition(0), scan: halted(0), units: map[uint64]*unitScan{}}
			l.scanSegment(ps, &wal.Segment{Num: 2, Path: wal.SegmentPath(0, 2)}, nil)
			if e.stats.WALCorruptions != 0 {
				t.Errorf("%d corruptions counted: the halt was counted again", e.stats.WALCorruptions)
			}
		}},
		{"unit-delivered-twice", "recovery holds each logged unit once: partition 0 sequence 1 delivered again (segment 1) without its drop", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			hdr, err := wal.AppendHeader(nil, wal.Header{Partition: 0, Segment: 1, FirstSeq: 1, SegmentBytes: 8192})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := unitPayload(Unit{Key: key, arrow: []byte("stream")})
			if err != nil {
				t.Fatal(err)
			}
			wal.PutUnitSeq(rec, 1)
			image := append(wal.AppendEntry(wal.AppendEntry(nil, hdr), rec), make([]byte, 4096)...)
			held := &unitScan{}
			ps := &partScan{p: l.log.Partition(0), scan: wal.NewPartitionScan(0), units: map[uint64]*unitScan{1: held}}
			l.scanSegment(ps, &wal.Segment{Num: 1, Path: wal.SegmentPath(0, 1)}, image)
			if ps.units[1] != held {
				t.Error("the unit held was replaced")
			}
		}},

		// wal_disk_replay.go.
		{"owned-segment-not-waiting", "an owned segment of a generation the log holds waits for the log until replay: segment 000000000001-000000000002 not waiting", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			id := SnapshotID{1, 2}
			l.scan = &logScan{
				seals:   map[SnapshotID]*sealScan{id: {id: id, mask: 1, ranges: map[uint32][]wal.SeqRange{0: {{Lo: 1, Hi: 1}}}}},
				flushed: map[SnapshotID]uint64{},
			}
			l.replay(map[SnapshotID]*segState{id: {Segment: Segment{ID: id}}}) // registered waiting, let go since
		}},
	}
	runBreaks(t, cases)
}
