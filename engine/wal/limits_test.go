package wal

import (
	"math"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// The limits are related: a field's limit must fit its wire width, and an
// entry must hold the largest record its fields allow.
func TestLimitRelations(t *testing.T) {
	maxSeal, err := AppendSeal(nil, SealRecord{Dir: strings.Repeat("d", DirBytesMax), Ranges: make([]SeqRange, RangesMax)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		limit, max int64
	}{
		{"EntryPayloadMax fits u32 (entry length, arrow_len, sidecar_len)", EntryPayloadMax, math.MaxUint32},
		{"OffsetsBlobBytesMax fits u32 (offsets_len)", segment.OffsetsBlobBytesMax, math.MaxUint32},
		{"OffsetsBlobBytesMax fits an entry", segment.OffsetsBlobBytesMax, EntryPayloadMax},
		{"IdempotencyKeyBytesMax fits u16", IdempotencyKeyBytesMax, math.MaxUint16},
		{"DirBytesMax fits u16", DirBytesMax, math.MaxUint16},
		{"RangesMax fits u32", RangesMax, math.MaxUint32},
		{"the largest seal fits an entry", int64(len(maxSeal)), EntryPayloadMax},
		{"PartitionsMax fits the u64 partitions bitmask", PartitionsMax, 64},
		{"a segment can hold a header and the largest entry", int64(headerEntryBytes + EntryBytes(EntryPayloadMax)), SegmentBytesMax},
		{"DefaultSegmentBytes within the segment limits", DefaultSegmentBytes, SegmentBytesMax},
		{"SegmentBytesMin within the segment limits", SegmentBytesMin, DefaultSegmentBytes},
		{"SegmentBytesMax fits int (32-bit hosts too)", SegmentBytesMax, math.MaxInt32},
	} {
		if c.limit > c.max {
			t.Errorf("%s: %d > %d", c.name, c.limit, c.max)
		}
	}
	h, _ := AppendHeader(nil, Header{SegmentBytes: SegmentBytesMin})
	if len(h) != HeaderBytes || EntryBytes(HeaderBytes) != SegmentBytesMin {
		t.Errorf("header payload %d bytes, HeaderBytes %d; entry %d, SegmentBytesMin %d",
			len(h), HeaderBytes, EntryBytes(HeaderBytes), SegmentBytesMin)
	}
	if len(SegmentName(SegmentNumberMax)) != segmentNameLen {
		t.Errorf("SegmentNumberMax does not fit 12 digits")
	}
}
