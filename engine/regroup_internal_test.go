package engine

import (
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// fitsWith says no where the merge of two sets would break one of a
// segment's limits or live's bound, and yes up to them.
func TestFitsWith(t *testing.T) {
	key := func(ns string) segment.PartitionKey { return segment.PartitionKey{SinkRef: "lake", Namespace: ns} }
	set := func(bytes int64, entries int, parts ...*livePart) *batchSet {
		s := newBatchSet()
		s.bytes = bytes
		for i := range entries {
			s.offsets = append(s.offsets, segment.Offset{Key: string(rune('a' + i%26)), Value: uint64(i)})
		}
		for _, p := range parts {
			s.index[p.key] = len(s.parts)
			s.parts = append(s.parts, p)
		}
		return s
	}
	many := func(n int, prefix string) []*livePart {
		var out []*livePart
		for i := range n {
			out = append(out, &livePart{key: key(prefix + string(rune(i)))})
		}
		return out
	}
	cases := []struct {
		name string
		o, s *batchSet
		want bool
	}{
		{"small", set(10, 1, &livePart{key: key("a"), rows: 5}), set(10, 1, &livePart{key: key("a"), rows: 5}), true},
		{"bytes-at-bound", set(60, 0), set(40, 0), true},
		{"bytes-past-bound", set(61, 0), set(40, 0), false},
		{"entries-at-limit", set(1, segment.OffsetsEntriesMax/2), set(1, segment.OffsetsEntriesMax/2), true},
		{"entries-past-limit", set(1, segment.OffsetsEntriesMax/2+1), set(1, segment.OffsetsEntriesMax/2), false},
		{"rows-past-limit", set(1, 0, &livePart{key: key("a"), rows: segment.PartRowsMax}), set(1, 0, &livePart{key: key("a"), rows: 1}), false},
		{"rows-of-other-parts", set(1, 0, &livePart{key: key("a"), rows: segment.PartRowsMax}), set(1, 0, &livePart{key: key("b"), rows: 1}), true},
		{"cdc-and-plain", set(1, 0, &livePart{key: key("a"), cdc: true}), set(1, 0, &livePart{key: key("a")}), false},
		{"parts-at-limit", set(1, 0, many(segment.PartsMax/2, "o")...), set(1, 0, many(segment.PartsMax/2, "s")...), true},
		{"parts-past-limit", set(1, 0, many(segment.PartsMax/2+1, "o")...), set(1, 0, many(segment.PartsMax/2, "s")...), false},
		{"shared-parts-count-once", set(1, 0, many(segment.PartsMax, "s")...), set(1, 0, many(segment.PartsMax, "s")...), true},
	}
	for _, c := range cases {
		if got := c.s.fitsWith(c.o, 100); got != c.want {
			t.Errorf("%s: fitsWith %t, want %t", c.name, got, c.want)
		}
	}
}
