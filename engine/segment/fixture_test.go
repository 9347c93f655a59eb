package segment

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// goldenCreatedAtUnixMs is 2026-08-01T12:00:00Z.
const goldenCreatedAtUnixMs = 1785585600000

var (
	ordersSchema = arrow.NewSchema([]arrow.Field{
		{Name: "order_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "customer", Type: arrow.BinaryTypes.String},
		{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	}, nil)
	eventsSchema = arrow.NewSchema([]arrow.Field{
		{Name: "event_id", Type: arrow.BinaryTypes.String},
		{Name: "kind", Type: arrow.BinaryTypes.String},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "payload", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	pageviewsSchema = arrow.NewSchema([]arrow.Field{
		{Name: "url", Type: arrow.BinaryTypes.String},
		{Name: "referrer", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "duration_ms", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
)

// goldenParts builds the golden segment's content: three namespaces —
// orders (CDC), events (two batches), pageviews (one empty batch and one
// with nulls) — and its offsets. The caller releases the batches.
func goldenParts(mem memory.Allocator) ([]Part, Offsets) {
	key := func(ns, partition string, s *arrow.Schema) PartitionKey {
		return PartitionKey{SinkRef: "lake", Namespace: ns, Partition: partition, Schema: FingerprintOf(s)}
	}
	orders := Part{Key: key("orders", "snapshot", ordersSchema), Schema: ordersSchema,
		Batches: []arrow.RecordBatch{ordersBatch(mem)},
		Sidecar: &Sidecar{Rows: []CDCRow{
			{Kind: Insert, Identity: []byte("order:1001"), Order: 501},
			{Kind: Update, Identity: []byte("order:1001"), Order: 502},
			{Kind: Delete, Identity: []byte("order:1002"), Order: 503},
		}}}
	events := Part{Key: key("events", "0", eventsSchema), Schema: eventsSchema,
		Batches: []arrow.RecordBatch{eventsBatch(mem, 0), eventsBatch(mem, 2)}}
	pvKey := key("pageviews", "0", pageviewsSchema)
	pvKey.Bucketed, pvKey.BucketUnixMs = true, goldenCreatedAtUnixMs-goldenCreatedAtUnixMs%3600000
	pageviews := Part{Key: pvKey, Schema: pageviewsSchema,
		Batches: []arrow.RecordBatch{pageviewsBatch(mem, 0), pageviewsBatch(mem, 2)}}
	offsets := Offsets{}.Advance("events/0", 120).Advance("orders/snapshot", 3).Advance("pageviews/0", 41)
	return []Part{orders, events, pageviews}, offsets
}

func ordersBatch(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, ordersSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1001, 1001, 1002}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"ada", "ada", "grace"}, nil)
	b.Field(2).(*array.Int64Builder).AppendValues([]int64{4200, 4350, 990}, nil)
	ts := b.Field(3).(*array.TimestampBuilder)
	for _, ms := range []int64{goldenCreatedAtUnixMs - 3000, goldenCreatedAtUnixMs - 2000, goldenCreatedAtUnixMs - 1000} {
		ts.Append(arrow.Timestamp(ms))
	}
	return b.NewRecordBatch()
}

func eventsBatch(mem memory.Allocator, first int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, eventsSchema)
	defer b.Release()
	ids := []string{"e-1", "e-2", "e-3", "e-4"}[first : first+2]
	b.Field(0).(*array.StringBuilder).AppendValues(ids, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"click", "scroll"}, nil)
	at := b.Field(2).(*array.TimestampBuilder)
	at.Append(arrow.Timestamp(goldenCreatedAtUnixMs*1000 + int64(first)))
	at.Append(arrow.Timestamp(goldenCreatedAtUnixMs*1000 + int64(first) + 1))
	b.Field(3).(*array.BinaryBuilder).AppendValues([][]byte{{0xde, 0xad}, nil}, []bool{true, false})
	tags := b.Field(4).(*array.ListBuilder)
	tags.Append(true)
	tags.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"mobile", "eu"}, nil)
	tags.AppendNull()
	return b.NewRecordBatch()
}

func pageviewsBatch(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, pageviewsSchema)
	defer b.Release()
	urls := []string{"/", "/pricing"}[:rows]
	b.Field(0).(*array.StringBuilder).AppendValues(urls, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"https://example.com/", ""}[:rows], []bool{true, false}[:rows])
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{1250.5, 0}[:rows], []bool{true, false}[:rows])
	return b.NewRecordBatch()
}

func releaseParts(parts []Part) {
	for _, p := range parts {
		for _, b := range p.Batches {
			b.Release()
		}
	}
}
