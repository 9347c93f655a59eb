package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// offsetsView is the engine's materialized view of committed source
// progress: for every source offset key, the highest value any owned
// segment committed. It is rebuilt at recovery from the offsets
// checkpoint (_offsets) and the markers (the WAL is the source of truth)
// and advanced at every commit. Idempotency keys are not here: they are
// the key store's (keystore.go).
//
// It also knows which keys the _offsets object may still lack. Its keys
// are kept in sorted order incrementally: keys that joined since the last
// snapshot are sorted alone and merged in, so a snapshot costs
// O(n + k log k) for k new keys.
//
// Floors (segment.FloorKey) are held as entries too, at most one per
// family, and no key a floor covers is held: merging one drops them.
//
// INVARIANT: every key of vals is listed in order or fresh (which may
// also list keys since dropped: sorted skips them); order is sorted
// without duplicates (both checked as sorted rebuilds it); floors holds
// each family's floor whose key is in vals, and fams its families,
// sorted (one family per floor checked in mergeFloor, where a family
// joins; the whole by check, O(keys), in tests).
type offsetsView struct {
	vals   map[string]uint64
	order  []string          // sorted keys as of the last snapshot
	fresh  []string          // keys that joined since, unsorted
	floors map[string]string // family → the mark of its floor
	fams   []string          // the families of floors, sorted
	// A key whose value changed since the snapshot of the last write
	// began is in unsynced; one that changed before the snapshot of the
	// write in flight, in flight. A key in neither is durable in the
	// object at its current value.
	unsynced, flight map[string]struct{}
	// stale: the object holds idempotency keys (an _offsets written
	// before they had objects of their own); rewrite it once they are
	// durable in the key store.
	stale bool
	etag  string // version of the object last read or written; "" if none is known
	inv   invariantHook
}

func newOffsetsView() *offsetsView {
	return &offsetsView{vals: map[string]uint64{}, floors: map[string]string{},
		unsynced: map[string]struct{}{}, flight: map[string]struct{}{}}
}

func (v *offsetsView) len() int { return len(v.vals) }

// reserve sizes an empty view's map for n keys.
func (v *offsetsView) reserve(n int) {
	if len(v.vals) == 0 {
		v.vals = make(map[string]uint64, n)
	}
}

func (v *offsetsView) get(key string) (uint64, bool) {
	val, ok := v.vals[key]
	return val, ok
}

// covers reports whether every offset of o is at or below the view: a
// floor at or below the family's, a key at or below its value or under
// its family's floor.
func (v *offsetsView) covers(o segment.Offsets) bool {
	for _, e := range o {
		if fam, mark, ok := segment.ParseFloor(e.Key); ok {
			if cur, has := v.floors[fam]; !has || cur < mark {
				return false
			}
			continue
		}
		if cur, ok := v.vals[e.Key]; ok && cur >= e.Value {
			continue
		}
		if _, ok := v.floorOf(e.Key); !ok {
			return false
		}
	}
	return true
}

// floorOf returns the key of the floor covering key, if one does.
func (v *offsetsView) floorOf(key string) (string, bool) {
	for _, fam := range v.fams {
		mark, ok := v.floors[fam]
		if !ok {
			// An empty mark would cover nothing: the keys under the
			// family's real floor would count as new.
			v.inv.broken("offsets view families each have their floor: family %q listed without one (%d families, %d floors)", fam, len(v.fams), len(v.floors))
			continue
		}
		if segment.Floored(key, fam, mark) {
			return segment.FloorKey(fam, mark), true
		}
	}
	return "", false
}

// merge max-merges source offsets committed in a segment: changed keys
// are not durable in the checkpoint yet.
func (v *offsetsView) merge(o segment.Offsets) { v.mergeFrom(o, false) }

// mergeObject max-merges the content of the _offsets object as read
// from the store: what it holds at or above the view's value is durable.
// It returns the idempotency keys the object held (an old format): they
// are the key store's, and make the object stale.
func (v *offsetsView) mergeObject(o segment.Offsets) (idem segment.Offsets) {
	if len(v.flight) > 0 {
		// What the object holds is judged durable against its version: a
		// write in flight would make its keys durable, or lost, against
		// the wrong one (readSources checks it when the read starts).
		v.inv.broken("_offsets merges into a view with no write in flight: %d entries read while %d keys are in flight", len(o), len(v.flight))
		return nil
	}
	src := o
	if slices.ContainsFunc(o, isIdemOffset) {
		v.stale = true
		src = slices.DeleteFunc(slices.Clone(o), isIdemOffset)
		idem = slices.DeleteFunc(slices.Clone(o), func(x segment.Offset) bool { return !isIdemOffset(x) })
	}
	v.mergeFrom(src, true)
	return idem
}

func isIdemOffset(o segment.Offset) bool { return strings.HasPrefix(o.Key, idemPrefix) }

func (v *offsetsView) mergeFrom(o segment.Offsets, durable bool) {
	for _, e := range o {
		if isIdemOffset(e) {
			v.inv.broken("offsets view holds source offsets only: %s=%d merged", e.Key, e.Value)
			continue
		}
		if fam, mark, ok := segment.ParseFloor(e.Key); ok {
			v.mergeFloor(fam, mark, e, durable)
			continue
		}
		if _, ok := v.floorOf(e.Key); ok {
			continue // done below a floor: dropped
		}
		v.mergeKey(e, durable)
	}
}

// mergeKey max-merges one entry.
func (v *offsetsView) mergeKey(e segment.Offset, durable bool) {
	cur, ok := v.vals[e.Key]
	if ok && e.Value <= cur {
		if durable && e.Value == cur {
			delete(v.unsynced, e.Key) // the object has our value
		}
		return
	}
	if !ok {
		v.fresh = append(v.fresh, e.Key)
	}
	v.vals[e.Key] = e.Value
	if len(v.vals) > len(v.order)+len(v.fresh) {
		// sorted lists what order and fresh hold: a key in neither would
		// never reach _offsets.
		v.inv.broken("offsets view lists every key it holds: %d held, %d in order, %d fresh, after merging %s=%d",
			len(v.vals), len(v.order), len(v.fresh), e.Key, e.Value)
	}
	if durable {
		delete(v.unsynced, e.Key)
	} else {
		v.unsynced[e.Key] = struct{}{}
	}
}

// mergeFloor merges family fam's floor at mark: a floor above the
// family's replaces it and drops the keys it covers.
func (v *offsetsView) mergeFloor(fam, mark string, e segment.Offset, durable bool) {
	cur, has := v.floors[fam]
	if has && mark < cur {
		return
	}
	if has && mark > cur {
		old := segment.FloorKey(fam, cur)
		if _, held := v.vals[old]; !held {
			// A family's floor is held while it is the family's (check):
			// gone, a family whose name prefixes FloorPrefix dropped it as
			// a key it covers, and _offsets would lose the floor.
			v.inv.broken("a family's floor is held while it is the family's: %q (family %q) missing when %q replaces it, %d keys held",
				old, fam, e.Key, len(v.vals))
			return
		}
		v.drop(old)
	}
	if !has {
		i, _ := slices.BinarySearch(v.fams, fam)
		v.fams = slices.Insert(v.fams, i, fam)
	}
	v.floors[fam] = mark
	if len(v.fams) != len(v.floors) {
		v.inv.broken("offsets view has one family per floor: %d families, %d floors, after merging %q", len(v.fams), len(v.floors), e.Key)
	}
	v.mergeKey(e, durable)
	v.dropCovered(fam, mark)
	if _, held := v.vals[e.Key]; !held {
		// A family that is a prefix of FloorPrefix ("f", "fl", …) covers
		// floor keys, its own among them: the floor would never reach
		// _offsets, nor would the keys it dropped.
		v.inv.broken("a family's floor is held once merged: %q (family %q, mark %q) dropped by what it covers, %d keys held",
			e.Key, fam, mark, len(v.vals))
	}
}

// dropCovered drops the keys of family fam at or below mark: a range of
// order (every key between fam and fam+mark starts with fam) and any of
// fresh.
func (v *offsetsView) dropCovered(fam, mark string) {
	lo, _ := slices.BinarySearch(v.order, fam)
	hi, found := slices.BinarySearch(v.order, fam+mark)
	if found {
		hi++
	}
	for _, k := range v.order[lo:hi] {
		if !segment.Floored(k, fam, mark) {
			// Every key between fam and fam+mark in a sorted order starts
			// with fam and is at or below the mark: anything else dropped
			// here is an offset the view forgets though no floor covers it.
			v.inv.broken("a floor drops only the keys it covers: %q dropped by family %q at mark %q (%d..%d of %d keys)", k, fam, mark, lo, hi, len(v.order))
			return
		}
		v.drop(k)
	}
	v.order = slices.Delete(v.order, lo, hi)
	for _, k := range v.fresh {
		if segment.Floored(k, fam, mark) {
			v.drop(k) // fresh keeps it listed: sorted skips it
		}
	}
}

// drop forgets key. The _offsets object may still hold it: it is dirty
// until written again, since what dropped it (a floor) is unsynced.
func (v *offsetsView) drop(key string) {
	delete(v.vals, key)
	delete(v.unsynced, key)
}

// durable reports whether the _offsets object durably covers every
// offset of want, as far as this view knows.
// A key a floor dropped is durable when that floor is (an older floor
// may have covered it already: conservative).
func (v *offsetsView) durable(want segment.Offsets) bool {
	for _, e := range want {
		if !v.covers(segment.Offsets{e}) {
			return false
		}
		k := v.holder(e)
		if _, ok := v.unsynced[k]; ok {
			return false
		}
		if _, ok := v.flight[k]; ok {
			return false
		}
	}
	return true
}

// holder is the key of the view whose durability decides that of e, an
// entry the view covers: for a floor, its family's floor; for a key, the
// key itself if held, else the floor covering it.
func (v *offsetsView) holder(e segment.Offset) string {
	if fam, _, ok := segment.ParseFloor(e.Key); ok {
		return segment.FloorKey(fam, v.floors[fam])
	}
	if _, ok := v.vals[e.Key]; ok {
		return e.Key
	}
	k, _ := v.floorOf(e.Key)
	return k
}

// objectLost records that the object is gone (deleted by someone else):
// none of its keys is durable any more.
func (v *offsetsView) objectLost() {
	if len(v.flight) > 0 {
		// The keys in flight would stay in flight, to be judged by a write
		// of an object that is gone.
		v.inv.broken("_offsets is found lost by a view with no write in flight: %d keys held, %d in flight", len(v.vals), len(v.flight))
		return
	}
	for _, e := range v.sorted() {
		v.unsynced[e.Key] = struct{}{}
	}
}

// dirty reports whether the object lacks something the view holds.
func (v *offsetsView) dirty() bool { return len(v.unsynced) > 0 || v.stale }

// sorted returns the view's keys at their values, in key order
// (canonical Offsets, freshly allocated).
func (v *offsetsView) sorted() segment.Offsets {
	slices.Sort(v.fresh)
	keys := make([]string, 0, len(v.order)+len(v.fresh))
	i, j := 0, 0
	for i < len(v.order) || j < len(v.fresh) {
		var k string
		if j == len(v.fresh) || (i < len(v.order) && v.order[i] < v.fresh[j]) {
			k, i = v.order[i], i+1
		} else {
			k, j = v.fresh[j], j+1
		}
		if _, held := v.vals[k]; !held {
			continue // dropped by a floor
		}
		if len(keys) > 0 && keys[len(keys)-1] >= k {
			if keys[len(keys)-1] > k {
				v.inv.broken("offsets view order sorted: %q listed before %q", keys[len(keys)-1], k)
			}
			continue
		}
		keys = append(keys, k)
	}
	v.order, v.fresh = keys, nil
	if len(keys) != len(v.vals) {
		v.inv.broken("offsets view lists every key it holds: %d listed, %d held", len(keys), len(v.vals))
	}
	out := make(segment.Offsets, len(keys))
	for i, k := range keys {
		out[i] = segment.Offset{Key: k, Value: v.vals[k]}
	}
	return out
}

// beginWrite returns what the object must hold and marks what is not
// durable yet as in flight.
// REQUIRES: no write is in flight.
func (v *offsetsView) beginWrite() segment.Offsets {
	if len(v.flight) > 0 {
		panic(fmt.Sprintf("engine: offsets checkpoint written while %d keys are in flight", len(v.flight)))
	}
	v.unsynced, v.flight = v.flight, v.unsynced
	return v.sorted()
}

// endWrite records the outcome of a write: on success what was in
// flight is durable and the object no longer stale; otherwise it is
// unsynced again.
func (v *offsetsView) endWrite(ok bool) {
	if ok {
		v.stale = false
	} else {
		//engine:orderless — set union.
		for k := range v.flight {
			v.unsynced[k] = struct{}{}
		}
	}
	clear(v.flight)
}

// check verifies the view's invariants (O(keys): for tests); a failure
// is ErrInvariant, naming the invariant.
func (v *offsetsView) check() error {
	for i, k := range v.order {
		if i > 0 && v.order[i-1] >= k {
			return invariantError("offsets view order sorted: %q then %q", v.order[i-1], k)
		}
	}
	listed := map[string]bool{}
	for _, k := range append(slices.Clone(v.order), v.fresh...) {
		listed[k] = true
	}
	//engine:orderless — reports the first key found; any is a failure.
	for k, val := range v.vals {
		if !listed[k] {
			return invariantError("offsets view lists every key it holds: %q=%d not listed", k, val)
		}
		if fk, ok := v.floorOf(k); ok && !segment.IsFloor(k) {
			return invariantError("offsets view holds no key under a floor: %q=%d held under floor %q", k, val, fk)
		}
	}
	return v.checkFloors()
}

// checkFloors verifies that floors and fams agree with the floor
// entries of vals.
func (v *offsetsView) checkFloors() error {
	if !slices.IsSorted(v.fams) || len(v.fams) != len(v.floors) {
		return invariantError("offsets view families sorted, one per floor: families %q for %d floors", v.fams, len(v.floors))
	}
	n := 0
	//engine:orderless — counts, and reports the first key found; any is a failure.
	for k := range v.vals {
		if fam, mark, ok := segment.ParseFloor(k); ok {
			n++
			if v.floors[fam] != mark {
				return invariantError("offsets view floor entries are their families' floors: %q held, family's floor %q", k, v.floors[fam])
			}
		}
	}
	if n != len(v.floors) {
		return invariantError("offsets view holds one entry per floor: %d floor entries held, %d floors", n, len(v.floors))
	}
	return nil
}
