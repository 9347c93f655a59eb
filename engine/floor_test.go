package engine_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// withFloor is u with its plain offset key=v and family's floor at mark.
func withFloor(u engine.Unit, key string, v uint64, family, mark string) engine.Unit {
	u.Offsets = segment.Offsets{{Key: key, Value: v}}.Advance(segment.FloorKey(family, mark), 1)
	return u
}

// Units in flight together may carry the same floor (a floor is never
// pending); once committed the floor retires the keys it covers, the
// view and _offsets shrink, a unit under the floor is answered as a
// duplicate without being stored, and all of it survives a kill.
func TestFloorsRetireKeysAcrossAKill(t *testing.T) {
	r := newRig(t, sim.StoreConfig{PageSize: 2})
	r.start()
	fam := "objects/s/"
	for i, k := range []string{"a", "b", "c"} {
		res := r.submit(withOffset(unit("n", int64(i)), fam+k, 10))
		r.until(func() bool { return res.done }, "ack "+k)
	}
	d := r.submit(withFloor(unit("n", 3), fam+"d", 10, fam, "b"))
	e := r.submit(withFloor(unit("n", 4), fam+"e", 10, fam, "b"))
	r.until(func() bool { return d.done && e.done }, "acks of d and e")
	if d.err != nil || e.err != nil {
		t.Fatalf("two units carrying one floor: %v, %v", d.err, e.err)
	}
	want := segment.Offsets{{Key: segment.FloorKey(fam, "b"), Value: 1},
		{Key: fam + "c", Value: 10}, {Key: fam + "d", Value: 10}, {Key: fam + "e", Value: 10}}
	if got := r.eng.Offsets(); !slices.Equal(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	r.settle() // the checkpoint writes _offsets; reclaim may delete segments
	again := r.start()
	if got := again.Offsets(); !slices.Equal(got, want) {
		t.Fatalf("recovered offsets %v, want %v", got, want)
	}
	dup := r.submit(withOffset(unit("n", 99), fam+"a", 10))
	r.until(func() bool { return dup.done }, "answer to a unit under the floor")
	if dup.err != nil || slices.Contains(r.committedValues()["n"], 99) {
		t.Fatalf("a unit under the floor: %v, stored %v", dup.err, r.committedValues()["n"])
	}
}

// Units with malformed floors, or floors alone, are refused as invalid.
func TestMalformedFloorsAreRefused(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	for name, o := range map[string]segment.Offsets{
		"no mark":     {{Key: "objects/s/a", Value: 1}, {Key: segment.FloorPrefix + "objects/s/\x00", Value: 1}},
		"no family":   {{Key: segment.FloorPrefix + "\x00m", Value: 1}, {Key: "objects/s/a", Value: 1}},
		"floor only":  {{Key: segment.FloorKey("objects/s/", "m"), Value: 1}},
		"idem family": {{Key: segment.FloorKey("idem", "m"), Value: 1}, {Key: "objects/s/a", Value: 1}},
		"nested":      {{Key: segment.FloorKey(segment.FloorPrefix+"x", "m"), Value: 1}, {Key: "objects/s/a", Value: 1}},
	} {
		u := unit("n", 1)
		u.Offsets = o
		res := r.submit(u)
		r.until(func() bool { return res.done }, name)
		if !errors.Is(res.err, engine.ErrInvalidUnit) {
			t.Errorf("%s: %v, want ErrInvalidUnit", name, res.err)
		}
	}
}

// A unit whose plain offset is committed is a duplicate whatever floor it
// carries: a source resubmitting after a restart has its floor moved on,
// and its rows must not be stored a second time.
func TestAUnitCoveredButForItsFloorIsADuplicate(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	fam := "objects/s/"
	first := r.submit(withOffset(unit("n", 7), fam+"x", 10))
	r.until(func() bool { return first.done }, "first ack")
	again := r.submit(withFloor(unit("n", 7), fam+"x", 10, fam, "w"))
	r.until(func() bool { return again.done }, "answer to the resubmission")
	r.settle()
	if again.err != nil {
		t.Fatalf("resubmission: %v", again.err)
	}
	if got := r.committedValues()["n"]; len(got) != 1 {
		t.Fatalf("rows %v committed; want the unit's once", got)
	}
}
