package segment

import (
	"math"
	"strings"
	"testing"
)

// The limits are related: a field's limit must fit its wire width, and an
// object's limit must hold the largest object its fields allow.
func TestLimitRelations(t *testing.T) {
	maxKey := PartitionKey{
		SinkRef:   strings.Repeat("s", KeyFieldBytesMax),
		Namespace: strings.Repeat("n", KeyFieldBytesMax),
		Partition: strings.Repeat("p", KeyFieldBytesMax),
		Bucketed:  true, BucketUnixMs: -1, Schema: math.MaxUint64,
	}
	if err := maxKey.Validate(); err != nil {
		t.Fatalf("largest key invalid: %v", err)
	}
	if got := len(appendIndexEntry(nil, IndexEntry{Key: maxKey})); got != IndexEntryBytesMax {
		t.Errorf("largest index entry encodes to %d bytes, IndexEntryBytesMax = %d", got, IndexEntryBytesMax)
	}
	minKey := PartitionKey{SinkRef: "s", Namespace: "n"}
	if got := len(appendIndexEntry(nil, IndexEntry{Key: minKey})); got != markerEntryBytesMin {
		t.Errorf("smallest index entry encodes to %d bytes, markerEntryBytesMin = %d", got, markerEntryBytesMin)
	}
	if got := len(NewBitmap(PartsMax).Encode()); got != BitmapBytesMax {
		t.Errorf("largest bitmap encodes to %d bytes, BitmapBytesMax = %d", got, BitmapBytesMax)
	}
	for _, c := range []struct {
		name       string
		limit, max int64
	}{
		{"KeyFieldBytesMax fits u16", KeyFieldBytesMax, math.MaxUint16},
		{"OffsetKeyBytesMax fits u16", OffsetKeyBytesMax, math.MaxUint16},
		{"SidecarIdentityBytesMax fits u16", SidecarIdentityBytesMax, math.MaxUint16},
		{"PartsMax fits u32", PartsMax, math.MaxUint32},
		{"OffsetsEntriesMax fits u32", OffsetsEntriesMax, math.MaxUint32},
		{"OffsetsBlobBytesMax fits u32", OffsetsBlobBytesMax, math.MaxUint32},
		{"PartRowsMax fits u32 (sidecar row_count)", PartRowsMax, math.MaxUint32},
		{"MarkerBytesMax under BodyBytesMax", MarkerBytesMax, BodyBytesMax},
		{"BodyBytesMax fits int (32-bit hosts too)", BodyBytesMax, math.MaxInt32},
		{"a body can hold every part header", bodyBytesMin + PartsMax*partHeaderBytesMax, BodyBytesMax},
	} {
		if c.limit > c.max {
			t.Errorf("%s: %d > %d", c.name, c.limit, c.max)
		}
	}
	if PartsMax%8 != 0 {
		t.Errorf("PartsMax %d is not a multiple of 8; BitmapBytesMax assumes it is", PartsMax)
	}
}
