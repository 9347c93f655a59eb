package segment

import (
	"encoding/binary"
	"fmt"
)

// IndexEntry locates one PART inside a body. Offsets are absolute within
// the body. The same encoding follows each "PART" magic in the body and is
// repeated in the commit marker, so recovery can rebuild the index without
// reading the body.
//
// INVARIANT (canonical layout, checked by the decoders):
//
//	ArrowStart   == offset just after this PART's header
//	SidecarStart == ArrowStart + ArrowLen
//	SidecarLen   == 0 ⇔ the PART has no CDC sidecar
//	next PART (or "FOOT") starts at SidecarStart + SidecarLen
//
// Wire form:
//
//	u32 slice_ordinal | partition key (see appendKey)
//	| u64 arrow_start | u64 arrow_len | u64 sidecar_start | u64 sidecar_len
//	| u64 row_count
type IndexEntry struct {
	Ordinal      SliceOrdinal
	Key          PartitionKey
	ArrowStart   int64
	ArrowLen     int64
	SidecarStart int64
	SidecarLen   int64
	Rows         int64
}

// HasSidecar reports whether the PART carries CDC metadata.
func (e IndexEntry) HasSidecar() bool { return e.SidecarLen > 0 }

// End is the offset just past the PART.
func (e IndexEntry) End() int64 { return e.SidecarStart + e.SidecarLen }

func (e IndexEntry) String() string {
	return fmt.Sprintf("slice %d %s arrow[%d+%d] sidecar[%d+%d] rows=%d",
		e.Ordinal, e.Key, e.ArrowStart, e.ArrowLen, e.SidecarStart, e.SidecarLen, e.Rows)
}

// appendIndexEntry appends e's wire form. REQUIRES: e.Key is valid.
func appendIndexEntry(dst []byte, e IndexEntry) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(e.Ordinal))
	dst = appendKey(dst, e.Key)
	for _, v := range [...]int64{e.ArrowStart, e.ArrowLen, e.SidecarStart, e.SidecarLen, e.Rows} {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// indexEntry reads an entry and checks it against the canonical layout.
// ordinal is the entry's position in the index, partStart the absolute
// body offset of its "PART" magic, and bodyEnd the body offset of "FOOT".
// They come from the caller because a marker holds the entries without the
// PART headers around them; the layout check is the same for both.
func (c *cursor) indexEntry(ordinal int, partStart, bodyEnd int64) (e IndexEntry) {
	start := c.pos
	e.Ordinal = SliceOrdinal(c.u32("slice_ordinal"))
	if c.err == nil && int(e.Ordinal) != ordinal {
		c.pos = start
		c.fail("slice_ordinal", ErrCorrupt, "ordinal %d at position %d", e.Ordinal, ordinal)
		return e
	}
	e.Key = c.key()
	e.ArrowStart = c.position("arrow_start", bodyEnd)
	e.ArrowLen = c.position("arrow_len", bodyEnd)
	e.SidecarStart = c.position("sidecar_start", bodyEnd)
	e.SidecarLen = c.position("sidecar_len", bodyEnd)
	e.Rows = int64(c.bounded("row_count", 8, PartRowsMax))
	if c.err != nil {
		return e
	}
	headerEnd := partStart + magicBytes + int64(c.pos-start)
	switch {
	case e.ArrowStart != headerEnd:
		c.fail("arrow_start", ErrCorrupt, "%d, header ends at %d", e.ArrowStart, headerEnd)
	case e.ArrowLen == 0:
		c.fail("arrow_len", ErrCorrupt, "an Arrow IPC stream is never empty")
	case e.SidecarStart != e.ArrowStart+e.ArrowLen:
		c.fail("sidecar_start", ErrCorrupt, "%d, Arrow stream ends at %d", e.SidecarStart, e.ArrowStart+e.ArrowLen)
	case e.End() > bodyEnd:
		c.fail("sidecar_len", ErrCorrupt, "part ends at %d, past the footer at %d", e.End(), bodyEnd)
	}
	return e
}

// position reads a u64 offset or length that must lie within the body.
func (c *cursor) position(field string, bodyEnd int64) int64 {
	return int64(c.bounded(field, 8, uint64(bodyEnd)))
}
