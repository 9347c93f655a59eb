package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/wal"
)

// Checks of the durable log's seam (durable.go), the disk WAL's policy
// and recovery (wal_disk*.go), the store's request checks (counting.go)
// and the config's derived values (config.go), each broken on purpose.

// issuedStore is a store that records the requests that reach it and
// never answers: a refused request must not reach it.
type issuedStore struct{ issued []string }

func (s *issuedStore) PutObject(PutObjectInput, func(string, error)) {
	s.issued = append(s.issued, "put")
}
func (s *issuedStore) GetObject(GetObjectInput, func([]byte, ObjectInfo, error)) {
	s.issued = append(s.issued, "get")
}
func (s *issuedStore) HeadObject(string, func(ObjectInfo, error)) {
	s.issued = append(s.issued, "head")
}
func (s *issuedStore) ListObjects(string, string, func(ListPage, error)) {
	s.issued = append(s.issued, "list")
}
func (s *issuedStore) DeleteObject(string, func(error)) { s.issued = append(s.issued, "delete") }
func (s *issuedStore) CreateMultipartUpload(string, func(string, error)) {
	s.issued = append(s.issued, "create-mpu")
}
func (s *issuedStore) UploadPart(string, string, int32, []byte, func(string, error)) {
	s.issued = append(s.issued, "upload-part")
}
func (s *issuedStore) CompleteMultipartUpload(string, string, []CompletedPart, func(error)) {
	s.issued = append(s.issued, "complete")
}
func (s *issuedStore) AbortMultipartUpload(string, string, func(error)) {
	s.issued = append(s.issued, "abort")
}
func (s *issuedStore) ListMultipartUploads(string, string, string, func(UploadsPage, error)) {
	s.issued = append(s.issued, "list-uploads")
}

// longStore answers every GET with body, whatever its limit.
type longStore struct {
	issuedStore
	body []byte
}

func (s *longStore) GetObject(_ GetObjectInput, done func([]byte, ObjectInfo, error)) {
	done(s.body, ObjectInfo{}, nil)
}

// TestInvariantStoreRequests breaks each request check of countingStore:
// the engine fails closed naming it, the request never reaches the store,
// and its caller is answered with the failure later, on the loop — not
// inside the call.
func TestInvariantStoreRequests(t *testing.T) {
	const in, out = "pre/pipe/p_year=2024/x.seg", "pre/other/p_year=2024/x.seg"
	part := []byte("part")
	parts := []CompletedPart{{Number: 1, ETag: "e"}}
	type request func(c countingStore, answered func(error))
	cases := []struct {
		name, want string
		call       request
	}{
		{"put-outside-root", `a store request names a key under the pipeline's root: put "pre/other/p_year=2024/x.seg", root "pre/pipe/"`, func(c countingStore, a func(error)) {
			c.PutObject(PutObjectInput{Key: out}, func(_ string, err error) { a(err) })
		}},
		{"get-outside-root", `a store request names a key under the pipeline's root: get "pre/other/`, func(c countingStore, a func(error)) {
			c.GetObject(GetObjectInput{Key: out, Limit: 1}, func(_ []byte, _ ObjectInfo, err error) { a(err) })
		}},
		{"head-outside-root", `a store request names a key under the pipeline's root: head "pre/other/`, func(c countingStore, a func(error)) {
			c.HeadObject(out, func(_ ObjectInfo, err error) { a(err) })
		}},
		{"list-outside-root", `a store request names a key under the pipeline's root: list "pre/"`, func(c countingStore, a func(error)) {
			c.ListObjects("pre/", "", func(_ ListPage, err error) { a(err) })
		}},
		{"delete-outside-root", `a store request names a key under the pipeline's root: delete "pre/other/`, func(c countingStore, a func(error)) {
			c.DeleteObject(out, a)
		}},
		{"create-upload-outside-root", `a store request names a key under the pipeline's root: create-mpu "pre/other/`, func(c countingStore, a func(error)) {
			c.CreateMultipartUpload(out, func(_ string, err error) { a(err) })
		}},
		{"upload-part-outside-root", `a store request names a key under the pipeline's root: upload-part "pre/other/`, func(c countingStore, a func(error)) {
			c.UploadPart(out, "u", 1, part, func(_ string, err error) { a(err) })
		}},
		{"complete-outside-root", `a store request names a key under the pipeline's root: complete "pre/other/`, func(c countingStore, a func(error)) {
			c.CompleteMultipartUpload(out, "u", parts, a)
		}},
		{"abort-outside-root", `a store request names a key under the pipeline's root: abort "pre/other/`, func(c countingStore, a func(error)) {
			c.AbortMultipartUpload(out, "u", a)
		}},
		{"list-uploads-outside-root", `a store request names a key under the pipeline's root: list-uploads ""`, func(c countingStore, a func(error)) {
			c.ListMultipartUploads("", "", "", func(_ UploadsPage, err error) { a(err) })
		}},
		{"get-unbounded", "a GET is bounded, its range within its limit: pre/pipe/p_year=2024/x.seg, limit 0, range from -1 length -1", func(c countingStore, a func(error)) {
			c.GetObject(GetObjectInput{Key: in}, func(_ []byte, _ ObjectInfo, err error) { a(err) })
		}},
		{"get-range-past-limit", "a GET is bounded, its range within its limit: pre/pipe/p_year=2024/x.seg, limit 10, range from 5 length 11", func(c countingStore, a func(error)) {
			c.GetObject(GetObjectInput{Key: in, Range: &ByteRange{Start: 5, Length: 11}, Limit: 10}, func(_ []byte, _ ObjectInfo, err error) { a(err) })
		}},
		{"upload-part-zero", `an uploaded part is a created upload's, numbered 1..10000, not empty: pre/pipe/p_year=2024/x.seg, upload id "u", part 0, 4 bytes`, func(c countingStore, a func(error)) {
			c.UploadPart(in, "u", 0, part, func(_ string, err error) { a(err) })
		}},
		{"upload-part-without-upload", `an uploaded part is a created upload's, numbered 1..10000, not empty: pre/pipe/p_year=2024/x.seg, upload id "", part 1`, func(c countingStore, a func(error)) {
			c.UploadPart(in, "", 1, part, func(_ string, err error) { a(err) })
		}},
		{"complete-without-parts", `a multipart upload completes a created upload with 1..10000 parts: pre/pipe/p_year=2024/x.seg, upload id "u", 0 parts`, func(c countingStore, a func(error)) {
			c.CompleteMultipartUpload(in, "u", nil, a)
		}},
		{"abort-without-upload", "an aborted upload is one that was created, with its id: pre/pipe/p_year=2024/x.seg, upload id empty", func(c countingStore, a func(error)) {
			c.AbortMultipartUpload(in, "", a)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := bare()
			e.layout = NewLayout("pre", "pipe")
			timers := &heldTimers{}
			e.p.Timers = timers
			store := &issuedStore{}
			c := countingStore{ObjectStore: store, e: e}
			answers := 0
			var answer error
			tc.call(c, func(err error) { answers, answer = answers+1, err })
			wantFailed(t, e, tc.want)
			if len(store.issued) != 0 || e.stats.Requests != 0 {
				t.Fatalf("issued %v, %d requests counted: a refused request reaches no store", store.issued, e.stats.Requests)
			}
			if answers != 0 || len(timers.fns) != 1 {
				t.Fatalf("%d answers in the call, %d timers: a refused request is answered later, once", answers, len(timers.fns))
			}
			timers.fns[0]()
			if answers != 1 || !errors.Is(answer, ErrInvariant) {
				t.Fatalf("%d answers, error %v; want one, the engine's failure", answers, answer)
			}
		})
	}

	// What the engine asks for passes: a key and a prefix under its root,
	// bounded reads, numbered parts.
	t.Run("requests-that-hold", func(t *testing.T) {
		e := bare()
		e.layout = NewLayout("pre", "pipe")
		e.p.Timers = &heldTimers{}
		store := &issuedStore{}
		c := countingStore{ObjectStore: store, e: e, quiet: true}
		c.PutObject(PutObjectInput{Key: in}, func(string, error) {})
		c.GetObject(GetObjectInput{Key: in, Range: &ByteRange{Start: 0, Length: 10}, Limit: 10}, func([]byte, ObjectInfo, error) {})
		c.HeadObject(in, func(ObjectInfo, error) {})
		c.ListObjects(e.layout.SegmentsPrefix(), "", func(ListPage, error) {})
		c.DeleteObject(in, func(error) {})
		c.CreateMultipartUpload(in, func(string, error) {})
		c.UploadPart(in, "u", s3PartsMax, part, func(string, error) {})
		c.CompleteMultipartUpload(in, "u", parts, func(error) {})
		c.AbortMultipartUpload(in, "u", func(error) {})
		c.ListMultipartUploads(e.layout.Root(), "", "", func(UploadsPage, error) {})
		if e.state == stateFailed || len(store.issued) != 10 || e.stats.Requests != 10 {
			t.Fatalf("err %v, issued %v, %d counted; want all 10 issued", e.err, store.issued, e.stats.Requests)
		}
	})

	runBreaks(t, []breakCase{
		{"answer-past-limit", "a GET's answer is within its limit: pre/pipe/x, 11 bytes, limit 10", func(t *testing.T, e *Engine) {
			e.layout = NewLayout("pre", "pipe")
			var got []byte
			var gotErr error
			c := countingStore{ObjectStore: &longStore{body: make([]byte, 11)}, e: e}
			c.GetObject(GetObjectInput{Key: "pre/pipe/x", Limit: 10}, func(b []byte, _ ObjectInfo, err error) { got, gotErr = b, err })
			if got != nil || !errors.Is(gotErr, ErrInvariant) {
				t.Errorf("answered %d bytes, error %v: an answer past its limit is not used", len(got), gotErr)
			}
		}},
		{"refused-without-a-failure", "a store request is refused only by a failed check: state 0", func(t *testing.T, e *Engine) {
			timers := &heldTimers{}
			e.p.Timers = timers
			var got error
			countingStore{e: e}.refused(func(err error) { got = err })
			timers.fns[0]()
			if !errors.Is(got, ErrInvariant) {
				t.Errorf("answered %v: a refused request is answered with the failure, never nil", got)
			}
		}},
	})
}

// TestInvariantDiskLogSeam breaks the checks the seam's methods and the
// disk WAL's hooks make of what they are handed.
func TestInvariantDiskLogSeam(t *testing.T) {
	fresh := func() *unit { return &unit{dones: []func(error){func(error) {}}, bytes: 10} }
	runBreaks(t, []breakCase{
		// durable.go.
		{"refused-without-a-failure", "a unit is refused only by a failed check: state 0, 1 answers due, partition 0", func(t *testing.T, e *Engine) {
			e.p.Timers = &heldTimers{}
			u := fresh()
			e.answerRefused(u)
			if len(u.dones) != 0 || len(e.answers) != 1 || !errors.Is(e.answers[0].err, ErrClosed) {
				t.Errorf("%d answers due, %d given: the unit is still answered ErrClosed", len(u.dones), len(e.answers))
			}
		}},

		// wal_disk.go.
		{"durable-with-nobody-waiting", "a unit made durable is a fresh one its submitters wait for: partition 0, sequence 1, 0 waiting, replayed false", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.unitDurable(&wal.Write[logJoin]{Unit: logJoin{u: &unit{bytes: 10}}}, 1, &wal.Segment{})
			if l.durableSeq[0] != 0 {
				t.Errorf("durable sequence %d: the refused unit was counted", l.durableSeq[0])
			}
		}},
		{"durable-replayed", "a unit made durable is a fresh one its submitters wait for: partition 0, sequence 1, 1 waiting, replayed true", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			u := fresh()
			u.replayed = true
			l.unitDurable(&wal.Write[logJoin]{Unit: logJoin{u: u}}, 1, &wal.Segment{})
		}},
		{"join-live-not-durable", "a unit joins live once durable: partition 0, sequence 0, segment false", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen, l.inFlight = 1, 1
			l.joinLive(fresh(), Unit{})
			if l.inFlight != 1 || len(e.live.units) != 0 {
				t.Errorf("%d in flight, %d live: the refused unit moved", l.inFlight, len(e.live.units))
			}
		}},
		{"seal-undated", "a generation's seal carries its snapshot's date, stamped at the seal: snapshot 000000000001-000000000002, created 0", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet()}
			s.content.gen = 1
			s.content.units = []*unit{{seq: 1, seg: &wal.Segment{}}}
			persisted := false
			l.beforePersist(s, func() { persisted = true })
			if persisted {
				t.Error("persisted")
			}
		}},
		{"committed-other-segment", "a committed snapshot's segment is its own: snapshot 000000000001-000000000002, segment 000000000001-000000000001 (nil false)", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			s := &snapshot{id: SnapshotID{1, 2}, content: newBatchSet(), stage: persistCommitted}
			st := &segState{Segment: Segment{ID: SnapshotID{1, 1}}}
			l.committed(s, st)
			if st.logPending {
				t.Error("the other segment is held back")
			}
		}},
		{"committed-no-segment", "a committed snapshot's segment is its own: snapshot 000000000001-000000000002, segment 000000000000-000000000000 (nil true)", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.committed(&snapshot{id: SnapshotID{1, 2}, content: newBatchSet(), stage: persistCommitted}, nil)
		}},
		{"stamp-twice", "a snapshot is dated once, fresh from its seal: snapshot 000000000001-000000000002, created 5, replayed false, stage queued", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			s := &snapshot{id: SnapshotID{1, 2}, created: 5}
			l.stamp(s)
			if s.created != 5 {
				t.Errorf("created %d: redated", s.created)
			}
		}},
		{"stamp-replayed", "a snapshot is dated once, fresh from its seal: snapshot 000000000001-000000000002, created 0, replayed true, stage queued", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.stamp(&snapshot{id: SnapshotID{1, 2}, replayed: true})
		}},

		// wal_disk_hooks.go.
		{"opened-past-partitions", "a created segment is one of the log's partitions': partition 3 of 2", func(t *testing.T, e *Engine) {
			logHooks{testDiskLog(e, 2)}.Opened(3)
		}},
		{"backoff-attempt-zero", "a log retry's attempt number is ≥ 1: 0", func(t *testing.T, e *Engine) {
			e.cfg.RetryMax = 7
			if d := (logHooks{testDiskLog(e, 1)}).Backoff(0); d != 7 {
				t.Errorf("backoff %v; want RetryMax", d)
			}
		}},
		{"unknown-nobody-waiting", "a unit of a failed batch is answered once, with the failure, to its waiting submitters: partition 0, 0 waiting, replayed false", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.inFlight, l.queuedBytes = 1, 10
			logHooks{l}.Unknown(&wal.Write[logJoin]{Unit: logJoin{u: &unit{bytes: 10}}}, errors.New("fsync"))
		}},
		{"unknown-without-error", "a unit of a failed batch is answered once, with the failure, to its waiting submitters: partition 0, 1 waiting, replayed false, error <nil>", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.inFlight, l.queuedBytes = 1, 10
			u := fresh()
			logHooks{l}.Unknown(&wal.Write[logJoin]{Unit: logJoin{u: u}}, nil)
			if len(u.dones) != 1 {
				t.Error("answered")
			}
		}},

		// wal_disk_recover.go.
		{"log-ids-without-scan", "the log's sealed generations are asked for between reading the log and replaying it: no scan", func(t *testing.T, e *Engine) {
			testDiskLog(e, 1).logIDs()
		}},
		{"holds-without-scan", "an owned segment asks the log about its generation between reading the log and replaying it: segment 000000000001-000000000002, no scan", func(t *testing.T, e *Engine) {
			if testDiskLog(e, 1).holds(SnapshotID{1, 2}) {
				t.Error("held")
			}
		}},
		{"seal-without-ranges", "a seal record names units of its partition: snapshot 000000000001-000000000002 read in partition 0 with no range", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
			l.addSeal(0, &wal.Segment{}, wal.SealRecord{Snapshot: wal.SnapshotRef{Epoch: 1, Seq: 2}, Partitions: 1})
			if len(l.scan.seals) != 0 {
				t.Error("the seal was kept")
			}
		}},

		// wal_disk_replay.go.
		{"replay-without-scan", "replay runs once, on the log recovery read: no scan, 0 owned segments", func(t *testing.T, e *Engine) {
			testDiskLog(e, 1).replay(nil)
		}},
		{"claim-past-the-log", "a seal's range names units logged before it in its partition: snapshot 000000000001-000000000002, partition 0, range 3-18446744073709551615, next sequence 5", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			id := SnapshotID{1, 2}
			scan := wal.NewPartitionScan(0)
			scan.NextSeq = 5
			l.scan = &logScan{
				seals:   map[SnapshotID]*sealScan{id: {id: id, mask: 1, ranges: map[uint32][]wal.SeqRange{0: {{Lo: 3, Hi: ^uint64(0)}}}}},
				flushed: map[SnapshotID]uint64{id: 1},
				parts:   []*partScan{{p: l.log.Partition(0), scan: scan, units: map[uint64]*unitScan{}}},
			}
			l.replay(nil) // flushed everywhere: only claimed
		}},
	})
}

// TestClaimHolds: a flushed generation's units, logged before its seal,
// are claimed without a failure.
func TestClaimHolds(t *testing.T) {
	e := bare()
	l := testDiskLog(e, 1)
	scan := wal.NewPartitionScan(0)
	scan.NextSeq = 5
	ps := &partScan{p: l.log.Partition(0), scan: scan, units: map[uint64]*unitScan{3: {}, 4: {}}}
	s := &sealScan{id: SnapshotID{1, 2}, mask: 1, ranges: map[uint32][]wal.SeqRange{0: {{Lo: 1, Hi: 4}}}}
	if !l.claim(s, map[uint32]*partScan{0: ps}) || !ps.units[3].used || !ps.units[4].used || e.state == stateFailed {
		t.Fatalf("claim of 1-4 below next sequence 5: err %v", e.err)
	}
}

// TestInvariantValve: the valve's thresholds, derived from a config New
// did not validate, break its bound and panic with the values.
func TestInvariantValve(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no-live-segments", Config{TargetBytes: 1}, "1 segments (set 0, live segments max 0)"},
		{"past-the-bound", Config{LiveSegmentsMax: 4, ValveSegments: 5, TargetBytes: 1}, "5 segments (set 5, live segments max 4)"},
		{"no-bytes", Config{LiveSegmentsMax: 4}, "0 bytes (set 0, target 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "the valve opens within the WAL's bound, at a positive size") || !strings.Contains(msg, tc.want) {
					t.Fatalf("recovered %q; want the valve's bound and %q", msg, tc.want)
				}
			}()
			tc.cfg.Valve()
		})
	}
	valid := Config{LiveSegmentsMax: 4, TargetBytes: 8}
	if s, b := valid.Valve(); s != 2 || b != 16 {
		t.Fatalf("valve %d segments, %d bytes; want 2 and 16", s, b)
	}
}

// TestInvariantLanesOf: limits that no lane can follow — a config changed
// after New validated it — panic with the values.
func TestInvariantLanesOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"sink-without-interval", Config{Lanes: map[string]LaneLimits{"s": {FileBytes: 5}}}, `follow validated limits (was Config.Lanes changed after New?): engine: config: lanes of s: file bytes 5 need a flush interval`},
		{"default-negative", Config{DefaultLanes: LaneLimits{FileBytes: -1, FlushInterval: 1}}, `follow validated limits (was Config.Lanes changed after New?): engine: config: lanes of t: file bytes -1 and flush interval 1ns must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, tc.want) {
					t.Fatalf("recovered %q; want %q", msg, tc.want)
				}
			}()
			ref := "s"
			if tc.cfg.Lanes == nil {
				ref = "t"
			}
			tc.cfg.LanesOf(ref)
		})
	}
	cfg := Config{Lanes: map[string]LaneLimits{"s": {FileBytes: 5, FlushInterval: 1}}}
	if l := cfg.LanesOf("s"); l.FileBytes != 5 {
		t.Fatalf("lanes %+v", l)
	}
	if l := cfg.LanesOf("other"); l != (LaneLimits{}) {
		t.Fatalf("default lanes %+v", l)
	}
}

// TestInvariantS3LogSeam: where the disk log acts on an event, the S3
// log checks the state that event implies in S3 mode (bare() runs the
// S3 log).
func TestInvariantS3LogSeam(t *testing.T) {
	l := func(e *Engine) s3Log { return e.dlog.(s3Log) }
	runBreaks(t, []breakCase{
		{"committed-replayed", "an S3 WAL commit is a fresh snapshot's and waits for no log: snapshot 000000000001-000000000002, replayed true, log pending false", func(t *testing.T, e *Engine) {
			l(e).committed(&snapshot{id: SnapshotID{1, 2}, replayed: true}, &segState{})
		}},
		{"committed-held-for-a-log", "an S3 WAL commit is a fresh snapshot's and waits for no log: snapshot 000000000001-000000000002, replayed false, log pending true", func(t *testing.T, e *Engine) {
			l(e).committed(&snapshot{id: SnapshotID{1, 2}}, &segState{logPending: true})
		}},
		{"merged-a-generation", "the S3 WAL numbers no generations: generation 3 merged into 0 (1 merged)", func(t *testing.T, e *Engine) {
			b := newBatchSet()
			b.gen = 3
			l(e).merged([]*batchSet{b}, e.live)
		}},
		{"sealed-into-a-non-empty-live", "an S3 WAL seal starts an empty live accumulator: 1 units, generation 0", func(t *testing.T, e *Engine) {
			e.live.units = []*unit{{bytes: 1}}
			l(e).sealed()
		}},
		{"stamped-twice", "an S3 WAL snapshot is sealed fresh and undated: snapshot 000000000001-000000000002, created 5, replayed false", func(t *testing.T, e *Engine) {
			l(e).stamp(&snapshot{id: SnapshotID{1, 2}, created: 5})
		}},
		{"recovered-holding-units", "an S3 WAL recovery ends with an empty writer: live 0 units, 1 queued, active false, 0 replayed", func(t *testing.T, e *Engine) {
			e.queue = []*snapshot{{id: SnapshotID{1, 2}, content: newBatchSet()}}
			l(e).replay(nil)
		}},
	})
	t.Run("holds", func(t *testing.T) {
		e := bare()
		sl := l(e)
		sl.committed(&snapshot{id: SnapshotID{1, 2}}, &segState{})
		sl.merged([]*batchSet{newBatchSet()}, e.live)
		sl.sealed()
		sl.stamp(&snapshot{id: SnapshotID{1, 2}})
		sl.replay(nil)
		if e.err != nil {
			t.Fatalf("the S3 log's checks fail on a state that holds them: %v", e.err)
		}
	})
}

// TestSealRangesRequiresLogOrder: a generation's units are, per
// partition, in the order the log wrote them; otherwise no seal is
// formed (and its callers fail closed).
func TestSealRangesRequiresLogOrder(t *testing.T) {
	u := func(part uint32, seq uint64) *unit { return &unit{part: part, seq: seq} }
	got, mask, err := sealRanges([]*unit{u(0, 1), u(1, 7), u(0, 2), u(0, 4), u(1, 8)})
	if err != nil || mask != 0b11 || len(got) != 2 || !slices.Equal(got[0].ranges, []wal.SeqRange{{Lo: 1, Hi: 2}, {Lo: 4, Hi: 4}}) ||
		!slices.Equal(got[1].ranges, []wal.SeqRange{{Lo: 7, Hi: 8}}) {
		t.Fatalf("sealRanges = %+v, mask %b, %v", got, mask, err)
	}
	for name, c := range map[string]struct {
		units []*unit
		want  string
	}{
		"back to 0": {[]*unit{u(0, 1), u(0, 0)}, "partition 0, sequence 0 after 1"},
		"backwards": {[]*unit{u(2, 5), u(2, 3)}, "partition 2, sequence 3 after 5"},
		"twice":     {[]*unit{u(1, 4), u(1, 4)}, "partition 1, sequence 4 after 4"},
	} {
		if _, _, err := sealRanges(c.units); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "a generation's units are in their partition's sequence order: "+c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
