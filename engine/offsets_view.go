package engine

import (
	"slices"

	"github.com/skipprd/skipprd/engine/segment"
)

// offsetsView is the engine's materialized view of committed progress:
// for every offset key, the highest value any owned segment committed.
// It is rebuilt from the markers at recovery (the WAL is the source of
// truth) and advanced at every commit.
//
// Commits merge a few keys into a view that may hold many (idempotency
// keys accumulate for a day), and every checkpoint write needs the view
// in key order. So the view keeps a map for lookups plus the key order of
// its last snapshot; keys added since are sorted alone and merged in, and
// keys deleted since are skipped — a snapshot costs O(n + k log k) for k
// new keys, not a full sort.
//
// Invariant: every key of vals is in order or in fresh; order is sorted
// and holds no duplicates (it may hold deleted keys until the next
// snapshot).
type offsetsView struct {
	vals  map[string]uint64
	order []string // sorted keys as of the last snapshot
	fresh []string // keys added to vals since, unsorted
}

func newOffsetsView() offsetsView { return offsetsView{vals: map[string]uint64{}} }

func (v *offsetsView) merge(o segment.Offsets) {
	for _, e := range o {
		cur, ok := v.vals[e.Key]
		if !ok {
			v.fresh = append(v.fresh, e.Key)
		}
		if !ok || e.Value > cur {
			v.vals[e.Key] = e.Value
		}
	}
}

func (v *offsetsView) len() int { return len(v.vals) }

func (v *offsetsView) get(key string) (uint64, bool) {
	val, ok := v.vals[key]
	return val, ok
}

// covers reports whether every offset of o is at or below the view.
func (v *offsetsView) covers(o segment.Offsets) bool {
	for _, e := range o {
		if cur, ok := v.vals[e.Key]; !ok || cur < e.Value {
			return false
		}
	}
	return true
}

// dropIf deletes every entry for which drop returns true.
func (v *offsetsView) dropIf(drop func(key string, value uint64) bool) {
	//engine:orderless — deletes by a predicate of each entry alone.
	for k, val := range v.vals {
		if drop(k, val) {
			delete(v.vals, k)
		}
	}
}

// sorted returns the view as canonical Offsets (freshly allocated).
func (v *offsetsView) sorted() segment.Offsets {
	slices.Sort(v.fresh)
	keys := make([]string, 0, len(v.vals))
	i, j := 0, 0
	for i < len(v.order) || j < len(v.fresh) {
		var k string
		if j == len(v.fresh) || (i < len(v.order) && v.order[i] < v.fresh[j]) {
			k, i = v.order[i], i+1
		} else {
			k, j = v.fresh[j], j+1
		}
		if _, live := v.vals[k]; live && (len(keys) == 0 || keys[len(keys)-1] != k) {
			keys = append(keys, k)
		}
	}
	v.order, v.fresh = keys, nil
	out := make(segment.Offsets, len(keys))
	for i, k := range keys {
		out[i] = segment.Offset{Key: k, Value: v.vals[k]}
	}
	return out
}
