package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// The view's incremental snapshot equals a full sort of a plain map
// under any interleaving of merges, deletes and snapshots.
func TestOffsetsViewMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := newOffsetsView()
		model := map[string]uint64{}
		key := rapid.Custom(func(t *rapid.T) string { return fmt.Sprintf("k%02d", rapid.IntRange(0, 30).Draw(t, "k")) })
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				var o segment.Offsets
				for _, k := range rapid.SliceOfNDistinct(key, 0, 5, rapid.ID).Draw(t, "keys") {
					o = append(o, segment.Offset{Key: k, Value: rapid.Uint64Range(0, 9).Draw(t, "v")})
					if cur, ok := model[k]; !ok || o[len(o)-1].Value > cur {
						model[k] = o[len(o)-1].Value
					}
				}
				v.merge(o)
			case 1:
				limit := rapid.Uint64Range(0, 9).Draw(t, "drop below")
				v.dropIf(func(_ string, val uint64) bool { return val < limit })
				for k, val := range model {
					if val < limit {
						delete(model, k)
					}
				}
			case 2:
				checkView(t, v.sorted(), model)
			}
		}
		checkView(t, v.sorted(), model)
	})
}

func checkView(t *rapid.T, got segment.Offsets, model map[string]uint64) {
	var want segment.Offsets
	for k, val := range model {
		want = append(want, segment.Offset{Key: k, Value: val})
	}
	slices.SortFunc(want, func(a, b segment.Offset) int { return strings.Compare(a.Key, b.Key) })
	if !slices.Equal(got, want) {
		t.Fatalf("view %v, model %v", got, want)
	}
	if err := got.Validate(); err != nil && len(got) > 0 {
		t.Fatalf("view not canonical: %v", err)
	}
}
