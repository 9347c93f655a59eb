package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// A failed persist takes every snapshot it held back, in order, ahead of
// newer units — but never into one set past a segment's limits. Here
// each snapshot is full of offsets entries (segment.OffsetsEntriesMax),
// the queue is full and live is filling when the marker PUTs fail: the
// snapshots must be sealed again apart, not merged into one live set
// that no segment can hold (before, its seal failed to encode and the
// engine failed closed on a store outage). Every acked unit is then
// committed once, in order — on the disk WAL also across a power loss
// after the snapshots sealed again logged their seals and failed too,
// where replay finds more unsealed units in the log than a segment
// holds, and must seal them apart too (before, the engine failed closed
// at every start).
func TestFailedPersistKeepsSegmentLimits(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "s3-wal", true: "disk-wal"}[disk], func(t *testing.T) {
			r := newRig(t, sim.StoreConfig{})
			if disk {
				r = newDiskRig(t, 2)
			}
			r.cfg.QueueCapacity = 1
			r.cfg.TargetBytes = 64 << 20 // the entries limit seals, not the bytes
			r.memory = 256 << 20         // nor does admission's budget refuse
			failing := true
			r.failMarkers(&failing)
			r.start()
			results := submitFullOfOffsets(r, 3*segment.OffsetsEntriesMax/offsetsPerUnit+4)
			failures := uint64(1)
			if disk {
				failures = 2 // the snapshots sealed again have logged their seals
			}
			r.until(func() bool { return r.eng.Stats().PersistFailures >= failures }, "the failed persists")
			if n := r.eng.Marks()[engine.MarkPersistFailedResealed]; n == 0 {
				t.Fatalf("mark %s not reached: the failed persist's sets were not sealed again apart", engine.MarkPersistFailedResealed)
			}
			var want []int64
			if disk {
				want = ackedValues(t, r, results) // acked at their fsyncs
				r.crash()
				failing = false
				r.start()
				if n := r.eng.Marks()[engine.MarkWALReplaySealed]; n == 0 {
					t.Fatalf("mark %s not reached: the log's unsealed units, more than a segment holds, replayed into one live set", engine.MarkWALReplaySealed)
				}
			} else {
				failing = false
				want = ackedValues(t, r, results) // acked at their commits
			}
			r.sched.RunUntil(r.sched.Now() + 2*r.cfg.MaxDelay) // live's last units seal within MaxDelay
			if err := r.eng.Err(); err != nil {
				t.Fatalf("the engine failed: %v", err)
			}
			if got := r.committedValues()["ns"]; !slices.Equal(got, want) {
				t.Fatalf("committed %d values %v…; want the %d acked units' once, in order", len(got), got[:min(8, len(got))], len(want))
			}
		})
	}
}

// offsetsPerUnit: the offsets entries each unit of submitFullOfOffsets
// carries; OffsetsEntriesMax/offsetsPerUnit units fill a segment.
const offsetsPerUnit = 4096

// submitFullOfOffsets submits n units of one row each (value i), each
// with offsetsPerUnit offsets of its own.
func submitFullOfOffsets(r *rig, n int) []*result {
	var results []*result
	for i := range n {
		u := unit("ns", int64(i))
		for k := range offsetsPerUnit {
			u.Offsets = append(u.Offsets, segment.Offset{Key: fmt.Sprintf("src/%06d/%04d", i, k), Value: 1})
		}
		results = append(results, r.submit(u))
	}
	return results
}

// ackedValues waits for every answer and returns the values of the
// units acked, in order; the others must have been refused with
// backpressure.
func ackedValues(t *testing.T, r *rig, results []*result) []int64 {
	t.Helper()
	r.until(func() bool {
		return !slices.ContainsFunc(results, func(res *result) bool { return !res.done })
	}, "every unit answered")
	var want []int64
	for i, res := range results {
		switch {
		case res.err == nil:
			want = append(want, int64(i))
		case !errors.Is(res.err, engine.ErrResourceExhausted):
			t.Fatalf("unit %d of %d: %v; want it acked, or refused with backpressure", i, len(results), res.err)
		}
	}
	if min := 2*segment.OffsetsEntriesMax/offsetsPerUnit + 1; len(want) < min {
		t.Fatalf("%d of %d units acked; want more than two segments' worth (%d), which no one segment can hold", len(want), len(results), min)
	}
	return want
}
