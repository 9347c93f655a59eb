package engine

import (
	"errors"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// More pre- and postconditions, each broken on purpose on a bare engine:
// the store requests the counting store lets out (countingStore), a
// streamed body's windows, the sweeper's and reclaim's deletes, the
// fence, a segment's registration and its jobs' forming, starting,
// gathering and leaving their lanes, and the ids of jobs.

// recordStore records the requests that reach it and answers none but
// deletes, whose answers it holds for the test.
type recordStore struct {
	ObjectStore
	requests []string
	deletes  []func(error)
}

func (s *recordStore) PutObject(in PutObjectInput, _ func(string, error)) {
	s.requests = append(s.requests, "put "+in.Key)
}

func (s *recordStore) HeadObject(key string, _ func(ObjectInfo, error)) {
	s.requests = append(s.requests, "head "+key)
}

func (s *recordStore) DeleteObject(key string, done func(error)) {
	s.requests = append(s.requests, "delete "+key)
	s.deletes = append(s.deletes, done)
}

func (s *recordStore) CreateMultipartUpload(key string, _ func(string, error)) {
	s.requests = append(s.requests, "create-mpu "+key)
}

// recording gives a bare engine a pipeline's layout, held timers and a
// counting store over a recordStore.
func recording(e *Engine) (*recordStore, *heldTimers) {
	s, h := &recordStore{}, &heldTimers{}
	e.layout = NewLayout("", "pipe")
	e.p.Timers, e.p.Store = h, countingStore{ObjectStore: s, e: e}
	return s, h
}

// spanningSeg is stepSeg of a segment of spanning jobs, with a log's
// identity.
func spanningSeg(seq uint64, parts, bits int) *segState {
	st := stepSeg(seq, parts, bits)
	st.Index.Spanning = true
	st.Index.Origin = segment.Origin{WAL: segment.WALID{1}, Pipeline: "pipe"}
	return st
}

// TestInvariantStoreRequests: a request that breaks a check is not
// issued, and is answered later, on the loop, with the failure.
func TestInvariantStoreRequestsOut(t *testing.T) {
	segKey := func(e *Engine, kind ObjectKind) string {
		return e.layout.Key(e.layout.SegmentsPrefix()+"p_month=01/", SnapshotID{1, 1}, kind)
	}
	put := func(in func(e *Engine) PutObjectInput) func(t *testing.T, e *Engine) {
		return func(t *testing.T, e *Engine) {
			s, h := recording(e)
			var answered error
			e.p.Store.PutObject(in(e), func(_ string, err error) { answered = err })
			wantNotIssued(t, s, h, &answered)
		}
	}
	cases := []breakCase{
		{"put-if-match-and-if-none-match", `a conditional PUT asks for a version or for absence, not both: pipe/_idem/0000000000000000007, If-Match "v1" with If-None-Match`, put(func(e *Engine) PutObjectInput {
			return PutObjectInput{Key: e.layout.IdemBucketKey(7), Body: []byte("m"), IfMatch: "v1", IfNoneMatch: true}
		})},
		{"put-writer-unconditional", "the writer object and _offsets are written only conditionally: pipe/_writer put with no If-Match and no If-None-Match", put(func(e *Engine) PutObjectInput {
			return PutObjectInput{Key: e.layout.WriterKey(), Body: []byte("w")}
		})},
		{"put-offsets-unconditional", "the writer object and _offsets are written only conditionally: pipe/_offsets put", put(func(e *Engine) PutObjectInput {
			return PutObjectInput{Key: e.layout.CheckpointKey(), Body: []byte("o")}
		})},
		{"delete-writer", "the writer object and _offsets are never deleted: delete pipe/_writer", func(t *testing.T, e *Engine) {
			s, h := recording(e)
			var answered error
			e.p.Store.DeleteObject(e.layout.WriterKey(), func(err error) { answered = err })
			wantNotIssued(t, s, h, &answered)
		}},
		{"delete-offsets", "the writer object and _offsets are never deleted: delete pipe/_offsets", func(t *testing.T, e *Engine) {
			s, h := recording(e)
			var answered error
			e.p.Store.DeleteObject(e.layout.CheckpointKey(), func(err error) { answered = err })
			wantNotIssued(t, s, h, &answered)
		}},
		{"multipart-of-a-marker", "a multipart upload is of a segment body: pipe/p_year=p_month=01/000000000001-000000000001.seg.commit, of kind 2", func(t *testing.T, e *Engine) {
			s, h := recording(e)
			var answered error
			e.p.Store.CreateMultipartUpload(segKey(e, KindMarker), func(_ string, err error) { answered = err })
			wantNotIssued(t, s, h, &answered)
		}},
		{"multipart-of-the-writer", "a multipart upload is of a segment body: pipe/_writer, of kind 0", func(t *testing.T, e *Engine) {
			s, h := recording(e)
			var answered error
			e.p.Store.CreateMultipartUpload(e.layout.WriterKey(), func(_ string, err error) { answered = err })
			wantNotIssued(t, s, h, &answered)
		}},
	}
	runBreaks(t, cases)
}

// wantNotIssued: the request did not reach the store, and its answer,
// due on the loop, is the failure.
func wantNotIssued(t *testing.T, s *recordStore, h *heldTimers, answered *error) {
	t.Helper()
	if len(s.requests) != 0 {
		t.Fatalf("issued %q", s.requests)
	}
	if *answered != nil || len(h.fns) != 1 {
		t.Fatalf("answered %v inside the call, %d answers due", *answered, len(h.fns))
	}
	h.fns[0]()
	if !errors.Is(*answered, ErrInvariant) {
		t.Fatalf("answered %v; want the failure", *answered)
	}
}

// TestStoreRequestsThatHold: the requests the engine makes pass the
// checks above.
func TestStoreRequestsThatHold(t *testing.T) {
	e := bare()
	s, _ := recording(e)
	body := e.layout.Key(e.layout.SegmentsPrefix()+"p_month=01/", SnapshotID{1, 1}, KindBody)
	e.p.Store.PutObject(PutObjectInput{Key: e.layout.WriterKey(), Body: []byte("w"), IfMatch: "v1"}, nil)
	e.p.Store.PutObject(PutObjectInput{Key: e.layout.WriterKey(), Body: []byte("w"), IfNoneMatch: true}, nil)
	e.p.Store.PutObject(PutObjectInput{Key: e.layout.CheckpointKey(), Body: []byte("o"), IfMatch: "v2"}, nil)
	e.p.Store.PutObject(PutObjectInput{Key: body, Body: []byte("b")}, nil)
	e.p.Store.DeleteObject(body, nil)
	e.p.Store.DeleteObject(e.layout.IdemBucketKey(3), nil)
	e.p.Store.CreateMultipartUpload(body, nil)
	if e.err != nil || len(s.requests) != 7 {
		t.Fatalf("err %v, issued %q", e.err, s.requests)
	}
}

// TestKeepWindowsInOrder: a chunk that skips bytes of a window not yet
// full breaks keepWindows' REQUIRES.
func TestKeepWindowsInOrder(t *testing.T) {
	windows := []segment.Window{{Off: 2, Bytes: make([]byte, 0, 10)}}
	keepWindows(windows, 0, make([]byte, 6)) // bytes 2..5 of the window's 10
	keepWindows(windows, 6, make([]byte, 2)) // the next chunk, in order
	if len(windows[0].Bytes) != 6 {
		t.Fatalf("window holds %d bytes; want 6", len(windows[0].Bytes))
	}
	wantPanic(t, "a streamed body's chunks come in order, without gaps: window 0 at 2 holds 6 of 10 bytes, next chunk at 9", func() {
		keepWindows(windows, 9, make([]byte, 2)) // byte 8 skipped
	})
}

// TestInvariantSweepAndReclaimDeletes: the sweeper's and reclaim's
// deletes, and the fence before them.
func TestInvariantSweepAndReclaimDeletes(t *testing.T) {
	// reclaiming is a fully applied owned segment whose reclaim began.
	reclaiming := func(e *Engine) *segState {
		st := stepSeg(1, 1, 1)
		st.Dir = e.layout.SegmentsPrefix() + "2024/"
		st.applied.Set(0)
		st.reclaiming = true
		e.segs = []*segState{st}
		return st
	}
	cases := []breakCase{
		{"sweep-before-open", "the sweeper runs once recovery opened ingest: state 1, epoch 0", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			e.state = stateRecovering
			e.sweep([]*listedSegment{{id: SnapshotID{1, 1}, marker: &ObjectInfo{}}}, writerRecord{})
			if len(s.requests) != 0 || e.stats.Sweeps != 0 {
				t.Errorf("swept: %q", s.requests)
			}
		}},
		{"orphan-of-nothing", "an orphan swept has a body or a bitmap listed: 000000000001-000000000001, marker listed false", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			e.sweepOrphan(&listedSegment{id: SnapshotID{1, 1}}, func(error) {})
			if len(s.requests) != 0 {
				t.Errorf("issued %q", s.requests)
			}
		}},
		{"sweep-marker-after-body", "a segment's marker is deleted before its other objects: 000000000001-000000000001, marker at 1 of 2 kinds, after kind 1", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			failed := 0
			e.deleteOnce(&listedSegment{id: SnapshotID{1, 1}, dir: "pipe/p_year=2024/"}, []ObjectKind{KindBody, KindMarker},
				func() { t.Error("swept") }, func() { failed++ })
			if len(s.requests) != 0 || failed != 1 {
				t.Errorf("issued %q, failed %d times", s.requests, failed)
			}
		}},
		{"bitmap-written-over-lost", "a segment whose bitmap recovery could not read is never written over: segment 000000000001-000000000001, keep true, 0 of 1 bits set", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			st := stepSeg(1, 1, 1)
			st.keep, st.bitmapLost = true, true
			e.writeBitmap(st)
			if len(s.requests) != 0 || st.writing {
				t.Errorf("issued %q", s.requests)
			}
		}},
		{"reclaim-not-owned", "a segment reclaimed is owned: segment 000000000001-000000000002, 1 owned", func(t *testing.T, e *Engine) {
			recording(e)
			reclaiming(e)
			st := stepSeg(2, 1, 1)
			st.applied.Set(0)
			e.reclaim(st)
			if st.reclaiming {
				t.Error("its reclaim began")
			}
		}},
		{"pinned-while-deleted", "a reclaimed segment is fully applied: segment 000000000001-000000000001, 0 groups open, 0 of 0 jobs not applied, 1 of 1 bits set, body pinned 1 times", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			st := reclaiming(e)
			e.deleteSegment(st)
			s.deletes[0](nil) // the marker
			e.cache.entries[st.ID] = &cacheEntry{size: 1, pins: 1}
			s.deletes[1](nil) // the body
			s.deletes[2](nil) // the bitmap
			if st.gone || len(e.segs) != 1 {
				t.Errorf("forgotten: gone %t, %d owned", st.gone, len(e.segs))
			}
		}},
		{"forgotten-while-deleted", "a segment's objects are deleted while its reclaim runs: segment 000000000001-000000000001, reclaiming true, gone true, 2 kinds left", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			st := reclaiming(e)
			e.deleteSegment(st)
			st.gone = true // another path forgot it meanwhile
			s.deletes[0](nil)
			if len(s.deletes) != 1 {
				t.Errorf("%d deletes issued", len(s.deletes))
			}
		}},
		{"reclaim-marker-after-body", "a segment's marker is deleted before its other objects: segment 000000000001-000000000001, marker at 1 of 2 kinds, after kind 1", func(t *testing.T, e *Engine) {
			s, _ := recording(e)
			e.deleteInOrder(reclaiming(e), []ObjectKind{KindBody, KindMarker}, func() { t.Error("deleted") })
			if len(s.requests) != 0 {
				t.Errorf("issued %q", s.requests)
			}
		}},
		{"fence-before-open", "deletes are fenced only once recovery opened ingest: state 0, epoch 0, 0 waiting", func(t *testing.T, e *Engine) {
			e.stillOurs(func() { t.Error("fenced") })
			if e.fence.reading || len(e.fence.waiters) != 0 {
				t.Errorf("fence reading %t, %d waiting", e.fence.reading, len(e.fence.waiters))
			}
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantJobForming: a segment registers, and its cuts form jobs,
// as the log says.
func TestInvariantJobForming(t *testing.T) {
	cut := segment.Cut{Group: laneGroup, First: segment.SegmentRef{Epoch: 1, Seq: 1}, Segments: 1, Parts: 1, Reason: segment.CutSize}
	cases := []breakCase{
		{"legacy-outside-recovery", "a segment without spanning jobs is one recovery found: segment 000000000001-000000000001 registered outside recovery", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.register(stepSeg(1, 1, 1))
			if len(e.lanes) != 0 {
				t.Error("its groups joined lanes")
			}
		}},
		{"legacy-with-cuts", "a segment without spanning jobs carries no cuts: segment 000000000001-000000000001, 1 cuts", func(t *testing.T, e *Engine) {
			e.lanes, e.recovered = map[laneKey]*lane{}, true
			st := stepSeg(1, 1, 1)
			st.Index.Cuts = []segment.Cut{cut}
			e.register(st)
		}},
		{"applied-piece-outside-recovery", "a piece joins its lane already applied only during recovery: piece of 000000000001-000000000001 (1 PARTs) joins lake/ns#0000000000000000", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.joinOpen(laneGroup, piece{seg: stepSeg(1, 1, 1), ordinals: []segment.SliceOrdinal{0}, done: true})
			if o := e.lanes[laneOf(laneGroup)].openOf(laneGroup); len(o.done) != 0 {
				t.Error("the piece joined")
			}
		}},
		{"lost-bitmap-not-kept", "a segment whose bitmap recovery could not read stays kept: segment 000000000001-000000000001, lost PARTs settled before 000000000001-000000000002", func(t *testing.T, e *Engine) {
			st := stepSeg(1, 1, 1)
			st.bitmapLost, st.open = true, 1
			o := &openJob{group: laneGroup, pieces: []piece{{seg: st, ordinals: []segment.SliceOrdinal{0}, bytes: 5}}, bytes: 5}
			e.settleLost(o, SnapshotID{1, 2})
		}},
		{"cut-in-legacy-segment", "a cut ends a job only in a segment of spanning jobs: segment 000000000001-000000000001, cut of lake/ns#0000000000000000", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			if j, ok := e.endJob(stepSeg(1, 1, 1), cut); j != nil || ok {
				t.Errorf("formed %v, ok %t", j, ok)
			}
		}},
		{"job-past-its-cut", "a job ends at its cut: job of lake/ns#0000000000000000 cut in segment 000000000001-000000000001 holds PARTs of the later segment 000000000001-000000000002", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			e.joinOpen(laneGroup, piece{seg: stepSeg(2, 1, 1), ordinals: []segment.SliceOrdinal{0}, bytes: 5})
			if j, ok := e.endJob(spanningSeg(1, 1, 1), cut); j != nil || ok {
				t.Errorf("formed %v, ok %t", j, ok)
			}
		}},
		{"open-bytes-drift", "an open job's bytes are its pieces': job of lake/ns#0000000000000000 cut in segment 000000000001-000000000001: the open job counted 7 bytes, its pieces hold 5", func(t *testing.T, e *Engine) {
			e.lanes = map[laneKey]*lane{}
			st := spanningSeg(1, 1, 1)
			e.joinOpen(laneGroup, piece{seg: st, ordinals: []segment.SliceOrdinal{0}, bytes: 5})
			e.lanes[laneOf(laneGroup)].openOf(laneGroup).bytes = 7 // counted wrong
			if j, ok := e.endJob(st, cut); j != nil || ok {
				t.Errorf("formed %v, ok %t", j, ok)
			}
		}},
	}
	runBreaks(t, cases)
}

// TestJobFormedAtItsCut: the checks above hold for a job cut where its
// open pieces end.
func TestJobFormedAtItsCut(t *testing.T) {
	e := bare()
	e.lanes = map[laneKey]*lane{}
	st := spanningSeg(1, 1, 1)
	e.joinOpen(laneGroup, piece{seg: st, ordinals: []segment.SliceOrdinal{0}, bytes: 5})
	j, ok := e.endJob(st, segment.Cut{Group: laneGroup, First: segment.SegmentRef{Epoch: 1, Seq: 1}, Segments: 1, Parts: 1, Reason: segment.CutSize})
	if e.err != nil || !ok || j == nil || j.bytes != 5 {
		t.Fatalf("err %v, ok %t, job %v", e.err, ok, j)
	}
}

// TestInvariantJobRunning: a job starts on live segments, holds what its
// pieces need while it runs, and leaves its lane applied.
func TestInvariantJobRunning(t *testing.T) {
	// spanning is a job of two segments in state s, holding 10 bytes.
	spanning := func(s jobState) *job {
		a, b := stepSeg(1, 1, 1), stepSeg(2, 1, 1)
		j := laneJob("j", b, s)
		j.pieces = []piece{{seg: a, ordinals: []segment.SliceOrdinal{0}, bytes: 4}, {seg: b, ordinals: []segment.SliceOrdinal{0}, bytes: 6}}
		j.bytes = 10
		return j
	}
	cases := []breakCase{
		{"start-on-reclaiming-cut", "a job starts on live segments only: job j (cut in segment 000000000001-000000000001) holds segment 000000000001-000000000001, reclaiming true, gone false", func(t *testing.T, e *Engine) {
			j := laneJob("j", stepSeg(1, 1, 1), jobPending)
			j.cut.reclaiming = true
			e.startJob(j)
			if j.state != jobPending || e.running != 0 {
				t.Errorf("state %d, running %d: the job started", j.state, e.running)
			}
		}},
		{"start-on-gone-piece", "a job starts on live segments only: job j (cut in segment 000000000001-000000000002) holds segment 000000000001-000000000001, reclaiming false, gone true", func(t *testing.T, e *Engine) {
			j := spanning(jobPending)
			j.pieces[0].seg.gone = true
			e.startJob(j)
			if j.state != jobPending || e.running != 0 {
				t.Errorf("state %d, running %d: the job started", j.state, e.running)
			}
		}},
		{"gathered-without-its-body", "a job holds one body per piece read in place, none when it copies: job j (cut in segment 000000000001-000000000001), 1 pieces, spans false, 0 bodies held", func(t *testing.T, e *Engine) {
			e.gather(laneJob("j", stepSeg(1, 1, 1), jobRunning), 1, nil, nil)
		}},
		{"spanning-job-holds-a-body", "none when it copies: job j (cut in segment 000000000001-000000000002), 2 pieces, spans true, 1 bodies held", func(t *testing.T, e *Engine) {
			released := 0
			e.cache.reserved = 10
			e.gather(spanning(jobRunning), 2, nil, []func(){func() { released++ }})
			if released != 1 || e.cache.reserved != 0 {
				t.Errorf("released %d bodies, %d bytes reserved", released, e.cache.reserved)
			}
		}},
		{"reservation-ended-after-the-job", "a spanning job's reservation ends while it runs: job j (cut in segment 000000000001-000000000002) in state 2, 10 bytes, 10 reserved", func(t *testing.T, e *Engine) {
			e.cache.reserved = 10
			e.unreserve(spanning(jobApplied))
			if e.cache.reserved != 10 {
				t.Errorf("%d bytes reserved", e.cache.reserved)
			}
		}},
		{"left-its-lane-unapplied", "a job leaves its lane once applied: job j (cut in segment 000000000001-000000000001, lake/ns#0000000000000000) left in state 1", func(t *testing.T, e *Engine) {
			j := laneJob("j", stepSeg(1, 1, 1), jobRunning)
			withLane(e, j)
			e.popLane(j)
		}},
	}
	runBreaks(t, cases)
}

// TestJobIDsRequire: the ids of jobs name their log, and a legacy job's
// ordinals in index order.
func TestJobIDsRequire(t *testing.T) {
	wantPanic(t, "a spanning job's id names its log: cut of lake/ns#0000000000000000 in segment 000000000001-000000000002, origin WAL zero true", func() {
		compactionID(segment.Origin{}, SnapshotID{1, 2}, segment.Cut{Group: laneGroup})
	})
	wantPanic(t, `origin WAL zero false, pipeline ""`, func() {
		compactionID(segment.Origin{WAL: segment.WALID{1}}, SnapshotID{1, 2}, segment.Cut{Group: laneGroup})
	})
	wantPanic(t, "a legacy job's id lists its ordinals ascending: segment 000000000001-000000000001, sink lake, ordinal 1 at 2 after 2", func() {
		legacyCompactionID(segment.Origin{}, SnapshotID{1, 1}, []segment.SliceOrdinal{0, 2, 1}, "lake")
	})
	wantPanic(t, "ordinal 2 at 2 after 2", func() {
		legacyCompactionID(segment.Origin{}, SnapshotID{1, 1}, []segment.SliceOrdinal{0, 2, 2}, "lake")
	})
	if a, b := legacyCompactionID(segment.Origin{}, SnapshotID{1, 1}, []segment.SliceOrdinal{0, 2}, "lake"),
		compactionID(segment.Origin{WAL: segment.WALID{1}, Pipeline: "p"}, SnapshotID{1, 2}, segment.Cut{Group: laneGroup}); a == "" || b == "" {
		t.Fatalf("ids %q, %q", a, b)
	}
}
