package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// Each pre- and postcondition of the writer's steps, recovery's round,
// reclaim, the sweeper and the reporting queues, broken on purpose on a
// bare engine (STYLE.md: every assertion is broken in a test).

// stepSeg is an owned segment of parts PARTs whose bitmap has bits bits.
func stepSeg(seq uint64, parts, bits int) *segState {
	ix := &segment.Index{Entries: make([]segment.IndexEntry, parts)}
	for i := range ix.Entries {
		ix.Entries[i].Ordinal = segment.SliceOrdinal(i)
	}
	return newSegState(Segment{ID: SnapshotID{1, seq}, Index: ix}, segment.NewBitmap(bits))
}

func TestInvariantWriterSteps(t *testing.T) {
	cases := []breakCase{
		{"persist-not-active", "the writer persists its active snapshot only: persist of 000000000001-000000000002, active 000000000001-000000000001", func(t *testing.T, e *Engine) {
			e.active = &snapshot{id: SnapshotID{1, 1}, stage: persistBody, content: newBatchSet()}
			e.persist(&snapshot{id: SnapshotID{1, 2}})
		}},
		{"marker-before-body", "a marker follows its body and promises its size: snapshot 000000000001-000000000001, body 3 bytes, index true says 9", func(t *testing.T, e *Engine) {
			e.origin = segment.Origin{WAL: segment.WALID{1}, Pipeline: "p"}
			s := &snapshot{id: SnapshotID{1, 1}, stage: persistBody, body: []byte("abc"), index: &segment.Index{BodyBytes: 9}, content: newBatchSet()}
			e.active = s
			e.putMarkerOf(s)
		}},
		{"drop-persisted-body", "only a body made ahead for a snapshot never persisted is dropped: snapshot 000000000001-000000000001 in stage marker", func(t *testing.T, e *Engine) {
			e.dropBody(&snapshot{id: SnapshotID{1, 1}, stage: persistMarker, ahead: &bodyAhead{dropped: true}})
		}},
		{"upload-empty-body", "a body is uploaded once, encoded, before its marker: snapshot 000000000001-000000000001 in stage queued, body 0 bytes", func(t *testing.T, e *Engine) {
			e.uploadBody(&snapshot{id: SnapshotID{1, 1}}, func(error) { t.Fatal("an upload refused answered") })
		}},
		{"upload-finish-in-flight", "a multipart upload fails only once no part is in flight: k in stage parts, 1 parts in flight", func(t *testing.T, e *Engine) {
			m := &multipart{e: e, key: "k", stage: uploadParts, inFlight: 1, done: func(error) { t.Fatal("finished with a part in flight") }}
			m.finish(errors.New("part failed"))
		}},
		{"upload-part-out-of-range", "a part lies within its body, in a created upload: k part 2 of 2, body 10 bytes, part size 5", func(t *testing.T, e *Engine) {
			e.cfg.PartBytes = 5
			m := &multipart{e: e, key: "k", s: &snapshot{body: make([]byte, 10), uploadID: "u"}, stage: uploadParts, parts: make([]CompletedPart, 2)}
			m.uploadPart(2)
		}},
		{"upload-part-missing", "a multipart upload completes with every part landed: k part 2 of 2 numbered 0", func(t *testing.T, e *Engine) {
			m := &multipart{e: e, key: "k", parts: []CompletedPart{{Number: 1}, {}}}
			m.checkPartsLanded()
		}},
		{"persist-failed-not-active", "only the active snapshot fails its persist: 000000000001-000000000002 failed, active false", func(t *testing.T, e *Engine) {
			e.persistFailed(&snapshot{id: SnapshotID{1, 2}, stage: persistMarker, content: newBatchSet()}, errors.New("put marker"))
		}},
	}
	runBreaks(t, cases)
}

// TestConcatBatchesColumns: a batch that lacks its schema's columns is
// refused before any column is read from it.
func TestConcatBatchesColumns(t *testing.T) {
	two := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1}, nil)
	col := b.NewArray()
	defer col.Release()
	one := array.NewRecordBatch(testSchema, []arrow.Array{col}, 1)
	defer one.Release()
	_, err := concatBatches(two, []arrow.RecordBatch{one, one})
	if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "a part's batches have its schema's columns: batch 0 of 2 has 1 columns, schema 2") {
		t.Fatalf("got %v; want the invariant on the columns", err)
	}
}

func TestInvariantRecoveryRound(t *testing.T) {
	round := func(e *Engine, stage recoveryStage) *recovery {
		return &recovery{e: e, stage: stage, done: func(error) {}}
	}
	cases := []breakCase{
		{"claim-epoch-zero", "a claimed epoch is a writer's, at or above its floor: epoch 0, floor 0", func(t *testing.T, e *Engine) {
			round(e, recoveryClaiming).claimed(writerRecord{}, "", nil)
		}},
		{"listing-order", "a listing in ascending id order: 000000000001-000000000001 at 1 after 000000000001-000000000002", func(t *testing.T, e *Engine) {
			r := round(e, recoveryListing)
			r.listed([]*listedSegment{{id: SnapshotID{1, 2}, body: &ObjectInfo{}}, {id: SnapshotID{1, 1}, body: &ObjectInfo{}}}, nil)
		}},
		{"listing-no-key", "a listed snapshot id has a key: 000000000001-000000000001 at 0 of 1 has none", func(t *testing.T, e *Engine) {
			round(e, recoveryListing).listed([]*listedSegment{{id: SnapshotID{1, 1}}}, nil)
		}},
		{"seals-change-claim", "the seals keep the claim: sealed epoch 2 nonce 9, claimed epoch 2 nonce 1", func(t *testing.T, e *Engine) {
			r := round(e, recoverySealing)
			r.claim = writerRecord{epoch: 2, nonce: 1}
			r.sealedEpochs(writerRecord{epoch: 2, nonce: 9}, nil)
		}},
		{"owned-order", "owned segments in ascending id order: 000000000001-000000000001 at 1 after 000000000001-000000000003", func(t *testing.T, e *Engine) {
			r := round(e, recoveryReadingMarkers)
			r.listing = make([]*listedSegment, 2)
			r.markersRead([]Segment{{ID: SnapshotID{1, 3}, Index: &segment.Index{}}, {ID: SnapshotID{1, 1}, Index: &segment.Index{}}}, nil)
		}},
		{"owned-unlisted", "owned segments are listed ones: 1 owned, 0 listed", func(t *testing.T, e *Engine) {
			round(e, recoveryReadingMarkers).markersRead([]Segment{{ID: SnapshotID{1, 1}, Index: &segment.Index{}}}, nil)
		}},
		{"bitmap-length", "a segment's bitmap has one bit per PART: segment 000000000001-000000000001, 3 bits, 2 parts", func(t *testing.T, e *Engine) {
			r := round(e, recoveryReadingBitmaps)
			r.owned = []Segment{stepSeg(1, 2, 2).Segment}
			r.bitmapsRead([]*segment.Bitmap{segment.NewBitmap(3)}, []string{""}, nil)
		}},
		{"checkpoint-unwired", "a checkpoint read gives the offsets view and the key store, each failing closed on a broken invariant: view false, keys true", func(t *testing.T, e *Engine) {
			keys := newKeyStore(0)
			keys.inv = e.failClosed
			round(e, recoveryReadingCheckpoint).checkpointRead(newOffsetsView(), keys, nil)
		}},
		{"finish-other-epoch", "recovery finishes under the epoch it claimed: sealed epoch 3 nonce 1, engine epoch 2 nonce 1", func(t *testing.T, e *Engine) {
			e.state, e.epoch, e.writerNonce = stateRecovering, 2, 1
			e.finishRecovery(recovered{}, nil, writerRecord{epoch: 3, nonce: 1}, 0, func(error) {})
		}},
	}
	runBreaks(t, cases)
}

// TestCheckSealed: sealing keeps the claim, and a seal never moves.
func TestCheckSealed(t *testing.T) {
	rec := writerRecord{epoch: 5, nonce: 7, floor: 3, seals: []seal{{1, 4}, {2, 9}}}
	ok := writerRecord{epoch: 5, nonce: 7, floor: 5, seals: []seal{{2, 9}, {3, 1}, {4, 2}}}
	if err := checkSealed(rec, ok); err != nil {
		t.Fatalf("a legal sealing: %v", err)
	}
	for _, c := range []struct {
		sealed writerRecord
		want   string
	}{
		{writerRecord{epoch: 5, nonce: 7, floor: 5, seals: []seal{{2, 8}}}, "a seal never moves: epoch 2 sealed at 9, resealed at 8"},
		{writerRecord{epoch: 5, nonce: 7, floor: 2}, "sealing keeps the claim and raises the floor: epoch 5→5, nonce 7→7, wal changed false, floor 3→2"},
		{writerRecord{epoch: 6, nonce: 7, floor: 6}, "sealing keeps the claim and raises the floor: epoch 5→6"},
	} {
		if err := checkSealed(rec, c.sealed); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sealed %+v: got %v; want %q", c.sealed, err, c.want)
		}
	}
}

func TestInvariantReclaimAndSweep(t *testing.T) {
	cases := []breakCase{
		{"bitmap-write-length", "a bitmap written has one bit per PART: segment 000000000001-000000000001, 3 bits, 2 parts", func(t *testing.T, e *Engine) {
			e.writeBitmap(stepSeg(1, 2, 3))
		}},
		{"delete-unreclaimed", "a segment's objects are deleted only once its reclaim began: segment 000000000001-000000000001, 0 pending, 0 of 2 bits set", func(t *testing.T, e *Engine) {
			e.deleteSegment(stepSeg(1, 2, 2))
		}},
		{"sweep-other-claim", "the sweeper judges markers by our own claim: writer record epoch 3 nonce 0, ours epoch 2 nonce 0", func(t *testing.T, e *Engine) {
			e.epoch = 2
			e.sweep(nil, writerRecord{epoch: 3})
		}},
		{"sweep-valid-marker", "the sweeper deletes only markers that do not count: 000000000002-000000000001, marker listed true, floor 2", func(t *testing.T, e *Engine) {
			e.writer = writerRecord{epoch: 2, floor: 2}
			e.sweepFenced(&listedSegment{id: SnapshotID{2, 1}, marker: &ObjectInfo{}}, func(error) {})
		}},
		{"body-missing-foreign", "a running job misses a body of its own: job j (cut in segment 000000000001-000000000001, state 1) missing segment 000000000001-000000000002", func(t *testing.T, e *Engine) {
			a, b := stepSeg(1, 1, 1), stepSeg(2, 1, 1)
			j := &job{id: "j", cut: a, state: jobRunning, pieces: []piece{{seg: a, ordinals: []segment.SliceOrdinal{0}}}}
			e.bodyMissing(j, b, errors.New("no body"))
		}},
		{"tape-bitmap-length", "an owned segment's bitmap has one bit per PART: segment 000000000001-000000000001, 1 bits, 2 parts", func(t *testing.T, e *Engine) {
			e.segs = []*segState{stepSeg(1, 2, 1)}
			e.Tape()
		}},
		{"stream-short-pass", "a whole pass reads each chunk of its body once: k, 2 reads, 3 chunks", func(t *testing.T, e *Engine) {
			e.checkStreamed("k", nil, 2, 3)
		}},
		{"stream-window-short", "a whole pass fills every PART window: k window 0 at 4 holds 1 of 2 bytes", func(t *testing.T, e *Engine) {
			e.checkStreamed("k", []segment.Window{{Off: 4, Bytes: make([]byte, 1, 2)}}, 1, 1)
		}},
	}
	runBreaks(t, cases)
}

func TestInvariantReportingQueues(t *testing.T) {
	cases := []breakCase{
		{"trouble-without-failure", "a trouble has failed since it started: x, 0 attempts, error false", func(t *testing.T, e *Engine) {
			e.trouble.now = map[string]*Trouble{"x": {Op: "x"}}
			e.succeeded("x")
		}},
		{"trouble-events-numbered", "trouble events numbered one by one, newest last: event 2 (y) queued after event 7, 2 queued", func(t *testing.T, e *Engine) {
			e.trouble.events, e.trouble.seq = []TroubleEvent{{Seq: 7}}, 1
			e.troubleEvent(TroubleEvent{Op: "y"})
		}},
		{"alerts-numbered", "alerts queued numbered one by one, newest last: alert 2 (corruption) queued after alert 7, 2 queued", func(t *testing.T, e *Engine) {
			e.alerts, e.stats.Alerts = []Alert{{Seq: 7}}, 1
			e.alert(AlertCorruption, errors.New("bad"))
		}},
	}
	runBreaks(t, cases)
}

// TestInvariantFloorHeld: a floor whose family is a prefix of FloorPrefix
// covers its own key: the view's check stops the floor (and the keys it
// dropped) from silently missing from _offsets. Submit refuses such a
// family first (TestFloorFamilyCoveringFloorsRefused).
func TestInvariantFloorHeld(t *testing.T) {
	var got capture
	v := newOffsetsView()
	v.inv = got.hook()
	v.merge(segment.Offsets{{Key: "a", Value: 1}, {Key: segment.FloorKey("fam", "zz"), Value: 1}})
	if got.err != nil {
		t.Fatalf("a floor of another family: %v", got.err)
	}
	v.merge(segment.Offsets{{Key: segment.FloorKey("f", "zz"), Value: 1}})
	got.want(t, `a family's floor is held once merged: "floor/f\x00zz" (family "f", mark "zz") dropped by what it covers`)
}

// TestFloorFamilyCoveringFloorsRefused: a floor whose family would cover
// floor keys (a prefix of FloorPrefix) is refused with a message naming
// it; a family under FloorPrefix is no floor at all; a source's family
// passes.
func TestFloorFamilyCoveringFloorsRefused(t *testing.T) {
	for _, fam := range []string{"floor/", "floor/a"} {
		if err := checkOffsetKeys(segment.Offsets{{Key: "k", Value: 1}, {Key: segment.FloorKey(fam, "zz"), Value: 1}}); err == nil || !strings.Contains(err.Error(), "is no floor") {
			t.Errorf("family %q: %v; want it refused as no floor", fam, err)
		}
	}
	for _, fam := range []string{"f", "fl", "floor"} {
		err := checkOffsetKeys(segment.Offsets{{Key: "k", Value: 1}, {Key: segment.FloorKey(fam, "zz"), Value: 1}})
		if err == nil || !strings.Contains(err.Error(), "would cover floors") || !strings.Contains(err.Error(), fmt.Sprintf("family %q", fam)) {
			t.Errorf("family %q: %v; want it refused as covering floors", fam, err)
		}
	}
	if err := checkOffsetKeys(segment.Offsets{{Key: "k", Value: 1}, {Key: segment.FloorKey("objects/b", "zz"), Value: 1}}); err != nil {
		t.Errorf("a source's family: %v", err)
	}
}

// TestInvariantLoggedEpochs: a generation the disk log sealed at or above
// the claimed epoch is refused before any seal is written; earlier ones
// pass.
func TestInvariantLoggedEpochs(t *testing.T) {
	rec := writerRecord{epoch: 3}
	if err := checkLoggedEpochs(rec, []SnapshotID{{1, 4}, {2, 9}}); err != nil {
		t.Fatalf("earlier epochs: %v", err)
	}
	err := checkLoggedEpochs(rec, []SnapshotID{{2, 9}, {3, 1}})
	if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "earlier epochs than the claim: generation 000000000003-000000000001, claimed epoch 3 (2 logged)") {
		t.Fatalf("%v; want the logged generation of our epoch refused", err)
	}
}
