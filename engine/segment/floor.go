package segment

import (
	"slices"
	"strings"
)

// A floor is an offset entry that says a whole family of offset keys is
// done up to a mark: FloorKey(family, mark) covers every key family+s
// with s ≤ mark (byte order). It lets a source whose keys would grow
// without end (the objects source: a key per object) retire the keys
// of everything below a listing watermark, so the offsets view and
// _offsets stay bounded.
//
// The key is "floor/" + family + "\x00" + mark; the value carries
// nothing (1). Floors of one family merge by keeping the greatest mark,
// and a key a floor covers is dropped, so merging offsets with floors is
// still commutative, associative and idempotent: a view is the family's
// greatest floor plus the keys above it, whatever order segments and
// _offsets are merged in.
//
// INVARIANT (checked by ParseFloor, so by every unit's validation, the
// engine's checkOffsetKeys): the family is non-empty, holds no NUL byte
// and does not itself start with FloorPrefix; the mark is non-empty.
const FloorPrefix = "floor/"

// floorSep ends the family: it cannot occur in one.
const floorSep = "\x00"

// FloorKey is the offset key of family's floor at mark. A caller keeps
// it within OffsetKeyBytesMax; FloorMarkMax says how much of a mark fits.
func FloorKey(family, mark string) string { return FloorPrefix + family + floorSep + mark }

// FloorMarkMax is the longest mark a floor of family can carry. A mark
// cut to it is still a sound floor: every key below the cut mark is
// below the whole one.
func FloorMarkMax(family string) int {
	return OffsetKeyBytesMax - len(FloorPrefix) - len(family) - len(floorSep)
}

// IsFloor reports whether key is in the floor form (well formed or not).
func IsFloor(key string) bool { return strings.HasPrefix(key, FloorPrefix) }

// ParseFloor splits a floor key into its family and mark; ok is false
// for a key not in the floor form or one that breaks its invariant.
func ParseFloor(key string) (family, mark string, ok bool) {
	rest, isFloor := strings.CutPrefix(key, FloorPrefix)
	if !isFloor {
		return "", "", false
	}
	family, mark, found := strings.Cut(rest, floorSep)
	if !found || family == "" || mark == "" || IsFloor(family) {
		return "", "", false
	}
	return family, mark, true
}

// Floored reports whether key is covered by family's floor at mark.
func Floored(key, family, mark string) bool {
	s, ok := strings.CutPrefix(key, family)
	return ok && s <= mark
}

// floorsOf returns the greatest floor of each family o holds, keyed by
// family, or nil if o holds none. Floors sort together (FloorPrefix),
// so finding none costs a binary search.
func floorsOf(o Offsets) map[string]string {
	i, _ := o.find(FloorPrefix)
	var marks map[string]string
	for ; i < len(o) && IsFloor(o[i].Key); i++ {
		if fam, mark, ok := ParseFloor(o[i].Key); ok {
			if marks == nil {
				marks = map[string]string{}
			}
			marks[fam] = max(marks[fam], mark)
		}
	}
	return marks
}

// floorCovers reports whether one of marks covers e: a floor of its
// family at or above it, or a plain key under its family's floor.
func floorCovers(marks map[string]string, e Offset) bool {
	if fam, mark, ok := ParseFloor(e.Key); ok {
		cur, has := marks[fam]
		return has && cur >= mark
	}
	//engine:orderless — any family covering e will do.
	for fam, mark := range marks {
		if Floored(e.Key, fam, mark) {
			return true
		}
	}
	return false
}

// reduceFloors drops from o, in place, each floor below its family's
// greatest and each key a floor covers: the canonical form of a set of
// offsets with floors.
func reduceFloors(o Offsets) Offsets {
	marks := floorsOf(o)
	if marks == nil {
		return o
	}
	return slices.DeleteFunc(o, func(e Offset) bool {
		if fam, mark, ok := ParseFloor(e.Key); ok {
			return marks[fam] != mark
		}
		return floorCovers(marks, e)
	})
}
