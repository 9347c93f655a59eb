package engine

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// Live's bytes stay within liveBytesMax, so its seal always encodes: a
// unit that would take a non-empty live past it finds no room (the
// writer seals live first, or refuses with backpressure), and an empty
// live takes any valid unit. Before, a full writer queue (a slow store)
// let live grow to the admission budget, and its seal failed closed.
func TestLiveBytesBounded(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(make([]int64, 100), nil)
	col := b.NewArray()
	defer col.Release()
	rb := array.NewRecordBatch(schema, []arrow.Array{col}, 100)
	defer rb.Release()
	key := segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Schema: segment.FingerprintOf(schema)}
	in := Unit{Key: key, Schema: schema, Batches: []arrow.RecordBatch{rb}}
	n := unitBytes(in)

	e := bare()
	if !e.roomFor(in, n) {
		t.Fatal("an empty live has no room for a small unit")
	}
	if err := e.live.add(&unit{bytes: n}, in); err != nil {
		t.Fatal(err)
	}
	e.live.bytes = liveBytesMax - n // as if many units had joined
	if !e.roomFor(in, n) {
		t.Fatalf("live at %d bytes has no room for %d more, limit %d", e.live.bytes, n, liveBytesMax)
	}
	e.live.bytes++
	if e.roomFor(in, n) {
		t.Fatalf("live at %d bytes took %d more, past the limit %d", e.live.bytes, n, liveBytesMax)
	}
	if e.marks[MarkLiveBytesFull] != 1 {
		t.Fatalf("mark %s counted %d times; want once", MarkLiveBytesFull, e.marks[MarkLiveBytesFull])
	}
	// A configured bound (the simulator's worlds set one a few targets
	// wide, so that they reach this path).
	e.cfg.LiveBytesMax = 3 * n
	e.live.bytes = 2 * n
	if !e.roomFor(in, n) {
		t.Fatalf("live at %d bytes has no room for %d more, limit %d", e.live.bytes, n, e.cfg.LiveBytesMax)
	}
	e.live.bytes++
	if e.roomFor(in, n) {
		t.Fatalf("live at %d bytes took %d more, past the configured limit %d", e.live.bytes, n, e.cfg.LiveBytesMax)
	}
}

// Config.LiveBytesMax is 0 (the default) or up to liveBytesMax.
func TestLiveBytesMaxValidated(t *testing.T) {
	c := DeriveConfig("", "p", 8<<20, 2, 0)
	for _, tc := range []struct {
		max int64
		ok  bool
	}{{0, true}, {1, true}, {c.TargetBytes, true}, {liveBytesMax, true}, {liveBytesMax + 1, false}, {-1, false}} {
		c.LiveBytesMax = tc.max
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("LiveBytesMax %d: %v, want valid %t", tc.max, err, tc.ok)
		}
	}
}
