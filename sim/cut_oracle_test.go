package sim

import (
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

var cutGroup = segment.Group{SinkRef: "lake", Namespace: "ns0", Schema: 7}

// spanMarker is a valid version 3 marker of segment 1-seq holding one
// PART of cutGroup of the given bytes, created at ms.
func spanMarker(seq uint64, bytes, ms int64, cuts ...segment.Cut) *markerInfo {
	k := keyOf(cutGroup)
	return &markerInfo{id: engine.SnapshotID{Epoch: 1, Seq: seq}, spanning: true, validity: validityValid, created: ms, landed: ms,
		groups: map[jobKey]groupParts{k: {parts: 1, bytes: bytes}}, jobs: map[jobKey]RowDigest{k: {Rows: 1, Words: 1, Sum: seq}}, cuts: cuts}
}

func cutOf(first uint64, segs, parts uint32, r segment.CutReason) segment.Cut {
	return segment.Cut{Group: cutGroup, First: segment.SegmentRef{Epoch: 1, Seq: first}, Segments: segs, Parts: parts, Reason: r}
}

// Cuts follow their lanes' limits: by size once full and not before, by
// interval once waited, at every segment only for a sink without limits.
func TestOracleCutReasons(t *testing.T) {
	cases := []struct {
		name   string
		cut    segment.Cut
		bytes  int64 // of the cutting segment's PART; the first holds 60
		ms     int64 // the cutting segment's created_at; the first's is 1000
		wantOK bool
	}{
		{"size, full now", cutOf(1, 2, 2, segment.CutSize), 50, 1100, true},
		{"size, not full", cutOf(1, 2, 2, segment.CutSize), 30, 1100, false},
		{"size, full before", cutOf(2, 1, 1, segment.CutSize), 150, 1100, true},
		{"interval, waited", cutOf(1, 2, 2, segment.CutInterval), 10, 2000, true},
		{"interval, early", cutOf(1, 2, 2, segment.CutInterval), 10, 1500, false},
		{"every, with limits", cutOf(1, 2, 2, segment.CutEvery), 10, 1100, false},
		{"close", cutOf(1, 2, 2, segment.CutClose), 10, 1100, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			w.engCfg.DefaultLanes = engine.LaneLimits{FileBytes: 100, FlushInterval: time.Second}
			m1, m2 := spanMarker(1, 60, 1000), spanMarker(2, c.bytes, c.ms, c.cut)
			w.oracle.order = []*markerInfo{m1, m2}
			w.oracle.checkCutReasons(m2)
			if got := len(w.oracle.Violations()) == 0; got != c.wantOK {
				t.Fatalf("clean %v, want %v: %q", got, c.wantOK, w.oracle.Violations())
			}
		})
	}
}

// After convergence every PART of a spanning segment is in exactly one
// cut's job, and each cut counts what it holds.
func TestOracleCutClaims(t *testing.T) {
	run := func(markers ...*markerInfo) *World {
		w := testWorld(t)
		w.oracle.order = markers
		want, _ := w.oracle.committedJobs("lake", false)
		if len(want) == 0 {
			t.Fatal("no job expected")
		}
		return w
	}
	w := run(spanMarker(1, 10, 0), spanMarker(2, 10, 0, cutOf(1, 2, 2, segment.CutSize)))
	wantClean(t, w)
	if want, _ := w.oracle.committedJobs("lake", false); len(want) != 1 {
		t.Fatalf("%d jobs, want the one spanning both", len(want))
	}
	w = run(spanMarker(1, 10, 0), spanMarker(2, 10, 0, cutOf(1, 2, 2, segment.CutSize)), spanMarker(3, 10, 0))
	wantViolation(t, w, "segment 000000000001-000000000003 are in 0 jobs")
	w = run(spanMarker(1, 10, 0, cutOf(1, 1, 1, segment.CutSize)), spanMarker(2, 10, 0, cutOf(1, 2, 2, segment.CutSize)))
	wantViolation(t, w, "are in 2 jobs")
	w = run(spanMarker(1, 10, 0), spanMarker(2, 10, 0, cutOf(1, 3, 3, segment.CutSize)))
	wantViolation(t, w, "counts 3 parts in 3 segments")
}
