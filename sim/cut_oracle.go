package sim

import (
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// The cut oracle: a marker's cuts follow its lanes' limits. A job cut by
// size holds its sink's file bytes — or a quarter of the smallest body
// cache the engine had, which bounds a job by memory — and did not hold
// them before the
// cutting segment (the writer cuts as soon as a lane is full — files of
// the size asked for, not smaller, not later); a job cut by its interval
// waited it — by the time its cut landed, from its first segment's
// created_at (the cut is decided between the two); a job a segment is
// only cut that way for a sink without limits. Computed from the markers (the job's bytes and ages), not from
// the engine's lanes.

// intervalSlack absorbs the millisecond rounding of created_at.
const intervalSlack = 2 * time.Millisecond

// checkCutReasons checks marker m's cuts as it lands.
func (o *Oracle) checkCutReasons(m *markerInfo) {
	for _, c := range m.cuts {
		l := o.w.engCfg.LanesOf(c.Group.SinkRef)
		bytes, before, first := o.cutBytes(m, c)
		waited := time.Duration(m.landed-first) * time.Millisecond
		switch {
		case c.Reason == segment.CutEvery && l.FileBytes != 0:
			o.fail("segment %s cuts %s at every segment, but its sink's files are %d bytes", m.id, c.Group, l.FileBytes)
		case c.Reason == segment.CutSize && (l.FileBytes == 0 || bytes < o.sizeFloor(l) || before >= l.FileBytes):
			o.fail("segment %s cuts %s by size at %d bytes (%d before it), file bytes %d (floor %d)", m.id, c.Group, bytes, before, l.FileBytes, o.sizeFloor(l))
		case c.Reason == segment.CutInterval && (l.FileBytes == 0 || waited < l.FlushInterval-intervalSlack):
			o.fail("segment %s cuts %s by its interval after %v, flush interval %v (file bytes %d)", m.id, c.Group, waited, l.FlushInterval, l.FileBytes)
		}
	}
}

// cutBytes sums the payload bytes of cut c's job in the markers landed so
// far (not known invalid): in all, and before the cutting marker m; and
// the created_at of its first segment.
func (o *Oracle) cutBytes(m *markerInfo, c segment.Cut) (bytes, before, first int64) {
	k := keyOf(c.Group)
	from := engine.SnapshotID{Epoch: c.First.Epoch, Seq: c.First.Seq}
	first = m.created
	found := false
	for _, mm := range markersFrom(o.order, from) {
		if m.id.Less(mm.id) {
			break
		}
		g, ok := mm.groups[k]
		if !ok || !mm.spanning || mm.validity == validityInvalid {
			continue
		}
		bytes += g.bytes
		if mm != m {
			before += g.bytes
		}
		if !found {
			first, found = mm.created, true
		}
	}
	return bytes, before, first
}

// sizeFloor is the fewest bytes a job cut by size may hold: its file
// bytes, or a quarter of the smallest body cache seen (engine
// jobBytesMax), if less.
func (o *Oracle) sizeFloor(l engine.LaneLimits) int64 {
	floor := l.FileBytes
	if c := o.w.memWatch.cacheMin; c > 0 {
		floor = min(floor, max(c/4, 1))
	}
	return floor
}

// markersFrom is the tail of markers (in id order) from id on.
func markersFrom(markers []*markerInfo, id engine.SnapshotID) []*markerInfo {
	i, _ := slices.BinarySearchFunc(markers, id, func(m *markerInfo, id engine.SnapshotID) int { return m.id.Compare(id) })
	return markers[i:]
}
