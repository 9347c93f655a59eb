package kafka

import (
	"errors"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/messages"
)

// The columns every row gets besides its value's: where the record is
// in the log, when it was produced, its key and its headers.
const (
	ColPartition = "_kafka_partition"
	ColOffset    = "_kafka_offset"
	ColTimestamp = "_kafka_timestamp"
	ColKey       = "_kafka_key"
	// ColHeaders holds the record's headers in their order, duplicates
	// kept: a list of {key, value} (HeadersType); an empty list for a
	// record without, so that every unit has the same columns.
	ColHeaders = "_kafka_headers"
	ColValue   = messages.ColValue // FormatText and FormatBytes: the value itself
)

// HeaderType is an element of ColHeaders: a header's key (UTF-8) and
// value (bytes, null for a header without one).
var HeaderType = arrow.StructOf(
	arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
)

// HeadersType is ColHeaders' type: list<struct<key: utf8, value: binary>>.
var HeadersType = arrow.ListOf(HeaderType)

var metaFields = []arrow.Field{
	{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
	{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColTimestamp, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: ColKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: ColHeaders, Type: HeadersType},
}

// built is a unit and what it covers.
type built struct {
	unit    engine.Unit
	records int
	bytes   int
	parts   []tp         // in first-record order
	next    map[tp]int64 // per partition, the offset after its last record
}

// build makes the unit of recs, all of one topic, each partition's in
// offset order: its rows (one per record, in recs' order) and, per
// partition, the offset after its last record. Errors: a *RecordError
// for a record that cannot be a row, when it is the first; else
// messages.ErrSplit, as when recs decode to too much together.
func (s *Source) build(topic string, recs []*kgo.Record) (built, error) {
	values := make([][]byte, len(recs))
	for i, r := range recs {
		values[i] = r.Value
		for j, h := range r.Headers {
			switch {
			case utf8.ValidString(h.Key):
			case i > 0:
				return built{}, messages.ErrSplit // the records before it are rows
			default:
				return built{}, recordError(r, "header %d: key %q is not UTF-8", j, h.Key)
			}
		}
	}
	dec := messages.Decoder{Format: s.cfg.Format, Limits: s.cfg.Limits, Mem: s.cfg.Allocator, Meta: metaFields,
		AppendMeta: func(i int, bs []array.Builder) { appendMeta(recs[i], bs) }}
	schema, batches, err := dec.Decode(values)
	if ve, ok := errors.AsType[*messages.ValueError](err); ok {
		return built{}, recordError(recs[ve.Index], "%s", ve.Reason)
	}
	if err != nil {
		return built{}, err
	}
	b := built{records: len(recs), next: map[tp]int64{}}
	for _, r := range recs {
		p := tp{r.Topic, r.Partition}
		if n, ok := b.next[p]; ok && r.Offset < n {
			messages.ReleaseAll(batches)
			return built{}, invariantf("topic %q partition %d: record at offset %d after one at %d in a unit", r.Topic, r.Partition, r.Offset, n-1)
		} else if !ok {
			b.parts = append(b.parts, p)
		}
		b.next[p] = r.Offset + 1
		b.bytes += len(r.Value)
	}
	var offsets segment.Offsets
	for _, p := range b.parts {
		offsets = offsets.Advance(offsetKey(s.cfg.Name, p), uint64(b.next[p]))
	}
	b.unit = engine.Unit{
		Key: segment.PartitionKey{SinkRef: s.cfg.SinkRef, Namespace: s.cfg.namespaceOf(topic), Partition: "0",
			Schema: segment.FingerprintOf(schema)},
		Schema: schema, Batches: batches, Offsets: offsets,
	}
	return b, nil
}

// appendMeta appends r's metadata columns, one builder each, in
// metaFields' order.
func appendMeta(r *kgo.Record, bs []array.Builder) {
	bs[0].(*array.Int32Builder).Append(r.Partition)
	bs[1].(*array.Int64Builder).Append(r.Offset)
	bs[2].(*array.TimestampBuilder).Append(arrow.Timestamp(r.Timestamp.UnixMicro()))
	if r.Key == nil {
		bs[3].AppendNull()
	} else {
		bs[3].(*array.BinaryBuilder).Append(r.Key)
	}
	lb := bs[4].(*array.ListBuilder)
	lb.Append(true)
	hb := lb.ValueBuilder().(*array.StructBuilder)
	keys, vals := hb.FieldBuilder(0).(*array.StringBuilder), hb.FieldBuilder(1).(*array.BinaryBuilder)
	for _, h := range r.Headers {
		hb.Append(true)
		keys.Append(h.Key)
		if h.Value == nil {
			vals.AppendNull()
		} else {
			vals.Append(h.Value)
		}
	}
}
