package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// Floors (segment.FloorKey) ride in units as offsets like any other,
// and the offsets view merges them by their own rule (offsets_view.go).
// They differ in one way here: a floor is a join any number of units
// may carry at once, in any order, so it is never pending. A unit's
// pending keys — one unanswered unit per key, a retry joining it — are
// its plain offsets, of which it must have at least one.

// pendingKeys returns the plain (non-floor) entries of o; o itself when
// it has no floor, which is the common case and allocates nothing.
// REQUIRES: o holds a plain offset if it holds a floor (checkOffsetKeys,
// at Submit): callers take the first pending key as the unit's.
func pendingKeys(o segment.Offsets) segment.Offsets {
	if !slices.ContainsFunc(o, isFloorOffset) {
		return o
	}
	plain := slices.DeleteFunc(slices.Clone(o), isFloorOffset)
	if len(plain) == 0 {
		panic(fmt.Sprintf("engine: a unit with floors holds a plain offset too: %d offsets, all floors (%q first)", len(o), o[0].Key))
	}
	return plain
}

func isFloorOffset(o segment.Offset) bool { return segment.IsFloor(o.Key) }

// checkOffsetKeys refuses keys of the reserved forms a unit may not
// carry: idempotency keys, malformed floors, a floor whose family is
// not a source's (it would cover an idempotency key or a floor) and a
// unit of floors only.
func checkOffsetKeys(o segment.Offsets) error {
	plain := 0
	for _, e := range o {
		if strings.HasPrefix(e.Key, idemPrefix) {
			return fmt.Errorf("offset key %q uses the reserved prefix %q", e.Key, idemPrefix)
		}
		if !segment.IsFloor(e.Key) {
			plain++
			continue
		}
		fam, _, ok := segment.ParseFloor(e.Key)
		if !ok {
			return fmt.Errorf("offset key %q starts with %q but is no floor (family NUL mark, both non-empty)", e.Key, segment.FloorPrefix)
		}
		if strings.HasPrefix(idemPrefix, fam) || strings.HasPrefix(fam, idemPrefix) {
			return fmt.Errorf("floor %q: family %q would cover idempotency keys", e.Key, fam)
		}
		if strings.HasPrefix(segment.FloorPrefix, fam) {
			// A family that prefixes "floor/" covers every floor key, its
			// own among them: merging it would drop the floor it carries.
			// (A family under "floor/" is no floor: ParseFloor refuses it.)
			return fmt.Errorf("floor %q: family %q would cover floors (%q…)", e.Key, fam, segment.FloorPrefix)
		}
	}
	if len(o) > 0 && plain == 0 {
		return fmt.Errorf("offsets %v hold floors only; a unit with floors needs a plain offset too", o)
	}
	return nil
}
