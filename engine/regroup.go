package engine

import "github.com/skipprd/skipprd/engine/segment"

// regroup folds the sets a failed persist takes back — the failed
// snapshot's, the queued snapshots', live last; oldest first — into as
// few as a segment can each hold: a set joins the next one, in front of
// its units (prepend), while the two fit together (fitsWith). It returns
// the sets to seal again, in order; the rest is in live. Each set was
// sealed or grew within a segment's limits, so a set that fits with none
// is sealed again as it was. On the disk WAL each merged set's
// generation moves into the one it joined (durableLog.merged).
//
// Most often everything fits into live, as before: sets are a few
// targets wide and live's bound is a segment's. Apart only where a
// slow store let the queue and live fill to a segment's limits each —
// merged, no segment could hold them, and the engine failed closed on a
// store outage.
func (e *Engine) regroup(sets []*batchSet) (again []*batchSet, err error) {
	if n := len(sets); n < 2 || sets[n-1] != e.live {
		return nil, invariantError("a failed persist takes back its own set, the queue's and live, live last: %d sets, live last %t", n, n > 0 && sets[n-1] == e.live)
	}
	bound := e.cfg.liveBytes()
	cur := sets[0]
	var from []*batchSet // the sets merged into cur
	for _, next := range sets[1:] {
		if !next.fitsWith(cur, bound) {
			e.dlog.merged(from, cur)
			again = append(again, cur)
			cur, from = next, nil
			continue
		}
		if err := next.prepend(cur); err != nil {
			return nil, err
		}
		from = append(from, cur)
		cur = next
	}
	e.dlog.merged(from, cur) // cur is live: the last set
	return again, nil
}

// fitsWith reports whether o's content followed by s's fits one
// segment: bytes within maxBytes (live's bound), parts, offsets entries
// (counted apart: an upper bound of their merge) and each part's rows
// within the segment's limits, and no partition key both CDC and plain.
func (s *batchSet) fitsWith(o *batchSet, maxBytes int64) bool {
	if o.bytes+s.bytes > maxBytes || len(o.offsets)+len(s.offsets) > segment.OffsetsEntriesMax {
		return false
	}
	parts := len(s.parts)
	for _, p := range o.parts {
		i, ok := s.index[p.key]
		if !ok {
			parts++
			continue
		}
		if q := s.parts[i]; q.cdc != p.cdc || q.rows+p.rows > segment.PartRowsMax {
			return false
		}
	}
	return parts <= segment.PartsMax
}
