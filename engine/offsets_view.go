package engine

import (
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// offsetsView is the engine's materialized view of committed progress:
// for every offset key, the highest value any owned segment committed.
// It is rebuilt from the markers at recovery (the WAL is the source of
// truth) and advanced at every commit. A map, because commits merge a few
// keys into a view that may hold many (idempotency keys accumulate).
type offsetsView map[string]uint64

func (v offsetsView) merge(o segment.Offsets) {
	for _, e := range o {
		if cur, ok := v[e.Key]; !ok || e.Value > cur {
			v[e.Key] = e.Value
		}
	}
}

func (v offsetsView) get(key string) (uint64, bool) {
	val, ok := v[key]
	return val, ok
}

// covers reports whether every offset of o is at or below the view.
func (v offsetsView) covers(o segment.Offsets) bool {
	for _, e := range o {
		if cur, ok := v[e.Key]; !ok || cur < e.Value {
			return false
		}
	}
	return true
}

// sorted returns the view as canonical Offsets.
func (v offsetsView) sorted() segment.Offsets {
	out := make(segment.Offsets, 0, len(v))
	//engine:orderless — collected, then sorted by key below.
	for k, val := range v {
		out = append(out, segment.Offset{Key: k, Value: val})
	}
	slices.SortFunc(out, func(a, b segment.Offset) int { return strings.Compare(a.Key, b.Key) })
	return out
}
