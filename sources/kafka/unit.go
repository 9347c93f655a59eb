package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// The columns every row gets besides its value's: where the record is
// in the log, when it was produced, and its key.
const (
	ColPartition = "_kafka_partition"
	ColOffset    = "_kafka_offset"
	ColTimestamp = "_kafka_timestamp"
	ColKey       = "_kafka_key"
	ColValue     = "value" // FormatText and FormatBytes: the value itself
)

var (
	timestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	metaFields    = []arrow.Field{
		{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColTimestamp, Type: timestampType},
		{Name: ColKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
	}
)

// errSplit says a unit's records decode to more than the limits allow
// together; fewer of them may not.
var errSplit = errors.New("kafka: the records decode to too much; take fewer")

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
// for a record that cannot be a row; errSplit when recs decode to too
// much together (more than one record).
func (s *Source) build(topic string, recs []*kgo.Record) (built, error) {
	var (
		schema  *arrow.Schema
		batches []arrow.RecordBatch
		err     error
	)
	if s.cfg.Format == FormatJSON {
		schema, batches, err = s.decodeJSON(recs)
	} else {
		schema, batches, err = s.decodeRaw(recs)
	}
	if err != nil {
		return built{}, err
	}
	b := built{records: len(recs), next: map[tp]int64{}}
	next := b.next
	for _, r := range recs {
		p := tp{r.Topic, r.Partition}
		if n, ok := next[p]; ok && r.Offset < n {
			releaseAll(batches)
			return built{}, invariantf("topic %q partition %d: record at offset %d after one at %d in a unit", r.Topic, r.Partition, r.Offset, n-1)
		} else if !ok {
			b.parts = append(b.parts, p)
		}
		next[p] = r.Offset + 1
		b.bytes += len(r.Value)
	}
	var offsets segment.Offsets
	for _, p := range b.parts {
		offsets = offsets.Advance(offsetKey(s.cfg.Name, p), uint64(next[p]))
	}
	b.unit = engine.Unit{
		Key: segment.PartitionKey{SinkRef: s.cfg.SinkRef, Namespace: s.cfg.namespaceOf(topic), Partition: "0",
			Schema: segment.FingerprintOf(schema)},
		Schema: schema, Batches: batches, Offsets: offsets,
	}
	return b, nil
}

// decodeJSON decodes the values as JSON lines, one row each (an empty
// value — a tombstone — is a row of the metadata columns alone; a value
// spread over several lines is compacted onto one), and adds the
// metadata columns.
func (s *Source) decodeJSON(recs []*kgo.Record) (*arrow.Schema, []arrow.RecordBatch, error) {
	var text bytes.Buffer
	size := 0
	for _, r := range recs {
		size += len(r.Value) + 3 // "{}\n" for a tombstone
	}
	text.Grow(size)
	for _, r := range recs {
		if len(r.Value) == 0 {
			text.WriteString("{}\n")
			continue
		}
		if bytes.IndexByte(r.Value, '\n') < 0 {
			text.Write(r.Value) // one line already; the decoder checks it
		} else if err := json.Compact(&text, r.Value); err != nil {
			return nil, nil, recordError(r, "value is not JSON: %v", err)
		}
		text.WriteByte('\n')
	}
	d, err := httpsrc.Decode(httpsrc.JSONLines, &text, s.cfg.Limits, s.cfg.Allocator)
	if err != nil {
		var ie *httpsrc.InputError
		switch {
		case errors.As(err, &ie) && ie.Line >= 1 && ie.Line <= len(recs):
			return nil, nil, recordError(recs[ie.Line-1], "%s", ie.Error())
		case errors.Is(err, httpsrc.ErrTooLarge) && len(recs) > 1:
			return nil, nil, errSplit
		case errors.Is(err, httpsrc.ErrTooLarge):
			return nil, nil, recordError(recs[0], "value decodes to more than the limits allow: %v", err)
		}
		return nil, nil, fmt.Errorf("kafka: decode %d records of topic %q: %w", len(recs), recs[0].Topic, err)
	}
	if d.Rows != int64(len(recs)) {
		d.Release()
		return nil, nil, invariantf("%d records decoded to %d rows", len(recs), d.Rows)
	}
	for _, f := range d.Schema.Fields() {
		if isMeta(f.Name) {
			d.Release()
			return nil, nil, recordError(recs[0], "the values have a field %q, which is a column the source adds", f.Name)
		}
	}
	schema := arrow.NewSchema(append(append([]arrow.Field{}, d.Schema.Fields()...), metaFields...), nil)
	out := make([]arrow.RecordBatch, 0, len(d.Batches))
	at := 0
	for _, b := range d.Batches {
		n := int(b.NumRows())
		out = append(out, s.withMeta(schema, b.Columns(), recs[at:at+n]))
		at += n
	}
	d.Release()
	return schema, out, nil
}

// decodeRaw makes each value a row of one "value" column: text (valid
// UTF-8) or bytes; a tombstone's is null.
func (s *Source) decodeRaw(recs []*kgo.Record) (*arrow.Schema, []arrow.RecordBatch, error) {
	var typ arrow.DataType = arrow.BinaryTypes.Binary
	if s.cfg.Format == FormatText {
		typ = arrow.BinaryTypes.String
	}
	schema := arrow.NewSchema(append([]arrow.Field{{Name: ColValue, Type: typ, Nullable: true}}, metaFields...), nil)
	var out []arrow.RecordBatch
	for at := 0; at < len(recs); at += s.cfg.Limits.BatchRows {
		part := recs[at:min(at+s.cfg.Limits.BatchRows, len(recs))]
		vb := array.NewBinaryBuilder(s.cfg.Allocator, typ.(arrow.BinaryDataType))
		for _, r := range part {
			switch {
			case r.Value == nil:
				vb.AppendNull()
			case s.cfg.Format == FormatText && !utf8.Valid(r.Value):
				vb.Release()
				releaseAll(out)
				return nil, nil, recordError(r, "value is not UTF-8 text (format: text); use format: bytes")
			default:
				vb.Append(r.Value)
			}
		}
		col := vb.NewArray()
		vb.Release()
		out = append(out, s.withMeta(schema, []arrow.Array{col}, part))
		col.Release()
	}
	return schema, out, nil
}

// withMeta is a batch of schema: cols (borrowed) followed by recs'
// metadata columns.
func (s *Source) withMeta(schema *arrow.Schema, cols []arrow.Array, recs []*kgo.Record) arrow.RecordBatch {
	mem := s.cfg.Allocator
	pb, ob := array.NewInt32Builder(mem), array.NewInt64Builder(mem)
	tb, kb := array.NewTimestampBuilder(mem, timestampType), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	for _, r := range recs {
		pb.Append(r.Partition)
		ob.Append(r.Offset)
		tb.Append(arrow.Timestamp(r.Timestamp.UnixMicro()))
		if r.Key == nil {
			kb.AppendNull()
		} else {
			kb.Append(r.Key)
		}
	}
	meta := []arrow.Array{pb.NewArray(), ob.NewArray(), tb.NewArray(), kb.NewArray()}
	for _, b := range []array.Builder{pb, ob, tb, kb} {
		b.Release()
	}
	all := append(append([]arrow.Array{}, cols...), meta...)
	rec := array.NewRecordBatch(schema, all, int64(len(recs)))
	for _, a := range meta {
		a.Release()
	}
	return rec
}

func isMeta(name string) bool {
	for _, f := range metaFields {
		if f.Name == name {
			return true
		}
	}
	return false
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}
