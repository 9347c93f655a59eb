package postgrescdc

import (
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// Offset keys of a source, all under "pgcdc/{slot}/":
//
//	pgcdc/{slot}/{schema}.{table}            a table's stream Position
//	pgcdc/{slot}/snapshot/{schema}.{table}   its snapshot (last key or attempt and unit; done)
//	pgcdc/{slot}/chunking                    the chunk cut (chunkingValue)
//
// Schema and table names follow the namespace rule (no '/' or '.'), and
// the slot name is at most 63 bytes, so the keys never collide and the
// longest is 6+63+10+63+1+63 = 206 bytes, within segment.OffsetKeyBytesMax.
const offsetKeyPrefix = "pgcdc/"

func slotPrefix(slot string) string { return offsetKeyPrefix + slot + "/" }

func streamKey(slot string, n tableName) string { return slotPrefix(slot) + n.String() }

func snapshotKey(slot string, n tableName) string { return slotPrefix(slot) + "snapshot/" + n.String() }

func chunkingKey(slot string) string { return slotPrefix(slot) + "chunking" }

// ownOffsets returns the entries of view under slot's prefix.
func ownOffsets(view segment.Offsets, slot string) segment.Offsets {
	var own segment.Offsets
	p := slotPrefix(slot)
	for _, o := range view {
		if strings.HasPrefix(o.Key, p) {
			own = append(own, o) // view is sorted, so own is
		}
	}
	return own
}

// withOffset returns offsets with o added, sorted (a unit's offsets
// must be).
func withOffset(offsets segment.Offsets, o segment.Offset) segment.Offsets {
	return append(segment.Offsets(nil), offsets...).Advance(o.Key, o.Value)
}
