package engine

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// floorFams are the families the floor tests draw keys from.
var floorFams = []string{"objects/a/", "objects/ab/", "objects/b/"}

// drawFloorBatch draws a canonical batch of offsets: keys of the
// families, plain or floors, as a segment or _offsets carries them.
func drawFloorBatch(t *rapid.T, label string) segment.Offsets {
	n := rapid.IntRange(1, 6).Draw(t, label+"-n")
	var o segment.Offsets
	for i := range n {
		fam := rapid.SampledFrom(floorFams).Draw(t, fmt.Sprintf("%s-fam-%d", label, i))
		s := rapid.StringMatching(`[a-e]{1,3}`).Draw(t, fmt.Sprintf("%s-s-%d", label, i))
		if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("%s-floor-%d", label, i)) == 0 {
			o = o.Advance(segment.FloorKey(fam, s), 1)
		} else {
			o = o.Advance(fam+s, rapid.Uint64Range(1, 9).Draw(t, fmt.Sprintf("%s-v-%d", label, i)))
		}
	}
	return o
}

// floorModel is the view the floor rules define for a set of batches:
// each family's greatest floor, and every other key at its greatest
// value unless its family's floor covers it.
func floorModel(batches []segment.Offsets) segment.Offsets {
	marks, vals := map[string]string{}, map[string]uint64{}
	for _, b := range batches {
		for _, e := range b {
			if fam, mark, ok := segment.ParseFloor(e.Key); ok {
				marks[fam] = max(marks[fam], mark)
			} else {
				vals[e.Key] = max(vals[e.Key], e.Value)
			}
		}
	}
	var out segment.Offsets
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		covered := false
		for fam, mark := range marks {
			covered = covered || segment.Floored(k, fam, mark)
		}
		if !covered {
			out = append(out, segment.Offset{Key: k, Value: vals[k]})
		}
	}
	for fam, mark := range marks {
		out = out.Advance(segment.FloorKey(fam, mark), 1)
	}
	return out
}

// Merging with floors is a join: any order of the same batches, merged
// as commits or as _offsets reads, gives the model's view, and the
// view covers exactly what the model says is done.
func TestFloorsMergeInAnyOrderToTheSameView(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		batches := make([]segment.Offsets, rapid.IntRange(1, 8).Draw(t, "batches"))
		for i := range batches {
			batches[i] = drawFloorBatch(t, fmt.Sprintf("b%d", i))
		}
		want := floorModel(batches)
		var folded segment.Offsets
		for _, b := range batches {
			folded = segment.MaxMerge(folded, b)
		}
		if !slices.Equal(folded, want) {
			t.Fatalf("segment.MaxMerge folds to %v, model %v", folded, want)
		}
		order := rapid.Permutation(batches).Draw(t, "order")
		v := newOffsetsView()
		for i, b := range order {
			if i%2 == 0 {
				v.merge(b)
			} else {
				v.mergeObject(b)
			}
			if i == len(order)/2 {
				v.sorted() // a snapshot midway moves fresh keys into order
			}
		}
		if err := v.check(); err != nil {
			t.Fatal(err)
		}
		if got := v.sorted(); !slices.Equal(got, want) {
			t.Fatalf("view %v, model %v", got, want)
		}
		for _, b := range batches {
			if !v.covers(b) {
				t.Fatalf("the view %v does not cover merged batch %v", v.sorted(), b)
			}
		}
		probe := drawFloorBatch(t, "probe")
		unchanged := slices.Equal(floorModel(append(batches, probe)), want)
		if got := v.covers(probe); got != unchanged {
			t.Fatalf("view covers(%v) = %v; merging it changes the model: %v", probe, got, !unchanged)
		}
		if got := folded.Covers(probe); got != unchanged {
			t.Fatalf("Offsets.Covers(%v) = %v; merging it changes the model: %v", probe, got, !unchanged)
		}
	})
}

// A floor drops the keys it covers from what _offsets is written with,
// and a key under a floor is durable only once that floor is.
func TestAFloorRetiresKeysOnceDurable(t *testing.T) {
	v := newOffsetsView()
	v.merge(segment.Offsets{{Key: "objects/a/k1", Value: 5}, {Key: "objects/a/k2", Value: 7}, {Key: "objects/a/k3", Value: 2}})
	v.endWrite(true)
	v.beginWrite()
	v.endWrite(true)
	k1 := segment.Offsets{{Key: "objects/a/k1", Value: 5}}
	if !v.durable(k1) {
		t.Fatalf("k1 written, not durable")
	}
	floor := segment.FloorKey("objects/a/", "k2")
	v.merge(segment.Offsets{{Key: floor, Value: 1}})
	want := segment.Offsets{{Key: floor, Value: 1}, {Key: "objects/a/k3", Value: 2}}
	if got := v.sorted(); !slices.Equal(got, want) {
		t.Fatalf("after the floor: %v, want %v", got, want)
	}
	if v.durable(k1) || !v.dirty() {
		t.Fatalf("k1 durable %v, view dirty %v, before its floor is written", v.durable(k1), v.dirty())
	}
	if body := v.beginWrite(); !slices.Equal(body, want) {
		t.Fatalf("_offsets written with %v, want %v", body, want)
	}
	v.endWrite(true)
	if !v.durable(k1) || !v.durable(segment.Offsets{{Key: "objects/a/k2", Value: 100}}) || v.dirty() {
		t.Fatalf("after the write: k1 durable %v, k2 durable %v, dirty %v", v.durable(k1),
			v.durable(segment.Offsets{{Key: "objects/a/k2", Value: 100}}), v.dirty())
	}
	if v.durable(segment.Offsets{{Key: "objects/a/k4", Value: 1}}) {
		t.Fatalf("k4, above the floor and never merged, called durable")
	}
}

// check catches a key held under its family's floor.
func TestFloorCheckCatchesAKeyUnderItsFloor(t *testing.T) {
	v := newOffsetsView()
	v.merge(segment.Offsets{{Key: segment.FloorKey("objects/a/", "m"), Value: 1}})
	v.vals["objects/a/b"] = 3 // what a merge that ignored the floor would do
	v.fresh = append(v.fresh, "objects/a/b")
	if err := v.check(); err == nil {
		t.Fatalf("check passed a key under the floor: %v", v.sorted())
	}
}
