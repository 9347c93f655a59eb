package engine

import "time"

// The WAL as an operator's live view draws it (cmd/skipprd's admin
// page): the live segments in commit order, each with its PARTs and which
// of them are applied, and the adaptive flush delay with its bounds. A
// read-only snapshot; it decides nothing.

// TapeSegment is one live (committed, not yet reclaimed) segment.
type TapeSegment struct {
	ID         string
	Parts      []TapePart // in ordinal order
	Applied    int        // PARTs applied: bits set in the completion bitmap
	Reclaiming bool       // every PART applied; its objects are being deleted
	Kept       bool       // never reclaimed: an unreadable bitmap or a refused job
}

// TapePart is one PART of a segment.
type TapePart struct {
	Namespace string
	Ordinal   int
	Bytes     int64 // Arrow stream and sidecar
	Rows      int64
	Applied   bool
}

// Tape returns the live segments in commit (id) order.
func (e *Engine) Tape() []TapeSegment {
	out := make([]TapeSegment, 0, len(e.segs))
	for _, st := range e.segs {
		ts := TapeSegment{ID: st.ID.String(), Reclaiming: st.reclaiming, Kept: st.keep}
		if st.applied == nil || st.applied.Len() != len(st.Index.Entries) {
			bits := -1
			if st.applied != nil {
				bits = st.applied.Len()
			}
			e.broken("an owned segment's bitmap has one bit per PART: segment %s, %d bits, %d parts", st.ID, bits, len(st.Index.Entries))
		}
		for _, en := range st.Index.Entries {
			applied := st.applied != nil && int(en.Ordinal) < st.applied.Len() && st.applied.IsSet(en.Ordinal)
			if applied {
				ts.Applied++
			}
			ts.Parts = append(ts.Parts, TapePart{Namespace: en.Key.Namespace, Ordinal: int(en.Ordinal),
				Bytes: en.End() - en.ArrowStart, Rows: en.Rows, Applied: applied})
		}
		out = append(out, ts)
	}
	return out
}

// FlushDelay is the adaptive flush delay: the budget a unit arriving now
// into an empty accumulator would get, and the bounds it is clamped to
// (the upper one never above Config.MaxDelay).
func (e *Engine) FlushDelay() (now, lower, upper time.Duration) {
	return e.flushDelay(), min(flushDelayMin, e.cfg.MaxDelay), min(flushDelayMax, e.cfg.MaxDelay)
}
