package wal

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
	"pgregory.net/rapid"
)

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// encodeRecord encodes any decoded record: the inverse of DecodeRecord.
func encodeRecord(dst []byte, r Record) ([]byte, error) {
	switch r := r.(type) {
	case *Header:
		return AppendHeader(dst, *r)
	case *UnitRecord:
		return AppendUnit(dst, *r)
	case *SealRecord:
		return AppendSeal(dst, *r)
	case *FlushedRecord:
		return AppendFlushed(dst, *r)
	}
	panic(fmt.Sprintf("record of type %T", r))
}

// mustEntry frames r's payload as an entry.
func mustEntry(t tb, dst []byte, r Record) []byte {
	t.Helper()
	payload, err := encodeRecord(nil, r)
	if err != nil {
		t.Fatalf("%s: %v", describe(r), err)
	}
	return AppendEntry(dst, payload)
}

// image frames records one after the other and returns the bytes and the
// offset of every entry.
func image(t tb, records []Record) (b []byte, offsets []int) {
	t.Helper()
	for _, r := range records {
		offsets = append(offsets, len(b))
		b = mustEntry(t, b, r)
	}
	return b, offsets
}

// describe renders a record completely and unambiguously: two records
// describe alike exactly when they encode alike. The golden .txt uses it.
func describe(r Record) string {
	var b strings.Builder
	switch r := r.(type) {
	case *Header:
		fmt.Fprintf(&b, "header partition=%d segment=%d first_seq=%d segment_bytes=%d",
			r.Partition, r.Segment, r.FirstSeq, r.SegmentBytes)
	case *UnitRecord:
		fmt.Fprintf(&b, "unit seq=%d key=%#v idempotency_key=%q offsets=[", r.Seq, r.Key, r.IdempotencyKey)
		for i, o := range r.Offsets {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%q:%d", o.Key, o.Value)
		}
		fmt.Fprintf(&b, "] arrow=%x sidecar=", r.Arrow)
		if r.Sidecar == nil {
			b.WriteString("none")
			break
		}
		b.WriteByte('[')
		for i, row := range r.Sidecar.Rows {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s/%x/%d", row.Kind, row.Identity, row.Order)
		}
		b.WriteByte(']')
	case *SealRecord:
		fmt.Fprintf(&b, "seal snapshot=%d.%d created_unix_ms=%d dir=%q partitions=%#x ranges=[",
			r.Snapshot.Epoch, r.Snapshot.Seq, r.CreatedUnixMs, r.Dir, r.Partitions)
		for i, s := range r.Ranges {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d..%d", s.Lo, s.Hi)
		}
		b.WriteByte(']')
	case *FlushedRecord:
		fmt.Fprintf(&b, "flushed snapshot=%d.%d", r.Snapshot.Epoch, r.Snapshot.Seq)
	default:
		fmt.Fprintf(&b, "%T", r)
	}
	return b.String()
}

// Generators of valid records, small enough for many per test.

func drawHeader(t *rapid.T) *Header {
	return &Header{
		Partition:    rapid.Uint32Range(0, PartitionsMax-1).Draw(t, "partition"),
		Segment:      rapid.Uint64Range(0, SegmentNumberMax).Draw(t, "segment"),
		FirstSeq:     rapid.Uint64().Draw(t, "first_seq"),
		SegmentBytes: rapid.Uint64Range(SegmentBytesMin, SegmentBytesMax).Draw(t, "segment_bytes"),
	}
}

func drawKey(t *rapid.T) segment.PartitionKey {
	field := func(label string, minRunes int) string {
		return rapid.StringOfN(rapid.Rune(), minRunes, 8, segment.KeyFieldBytesMax).Draw(t, label)
	}
	k := segment.PartitionKey{
		SinkRef:   field("sink_ref", 1),
		Namespace: field("namespace", 1),
		Partition: field("partition", 0),
		Bucketed:  rapid.Bool().Draw(t, "bucketed"),
		Schema:    segment.SchemaFingerprint(rapid.Uint64().Draw(t, "schema")),
	}
	if k.Bucketed {
		k.BucketUnixMs = rapid.Int64().Draw(t, "bucket_unix_ms")
	}
	return k
}

func drawOffsets(t *rapid.T) segment.Offsets {
	keys := rapid.SliceOfNDistinct(rapid.StringOfN(rapid.Rune(), 1, 12, segment.OffsetKeyBytesMax), 0, 5,
		func(s string) string { return s }).Draw(t, "offset_keys")
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	o := make(segment.Offsets, len(keys))
	for i, k := range keys {
		o[i] = segment.Offset{Key: k, Value: rapid.Uint64().Draw(t, "offset_value")}
	}
	return o
}

func drawSidecar(t *rapid.T) *segment.Sidecar {
	if !rapid.Bool().Draw(t, "cdc") {
		return nil
	}
	s := &segment.Sidecar{Rows: make([]segment.CDCRow, rapid.IntRange(0, 4).Draw(t, "cdc_rows"))}
	for i := range s.Rows {
		s.Rows[i] = segment.CDCRow{
			Kind:     rapid.SampledFrom([]segment.MutationKind{segment.Insert, segment.Update, segment.Delete}).Draw(t, "cdc_kind"),
			Identity: rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "cdc_identity"),
			Order:    rapid.Uint64().Draw(t, "cdc_order"),
		}
	}
	return s
}

func drawUnit(t *rapid.T) *UnitRecord {
	return &UnitRecord{
		Seq:            rapid.Uint64().Draw(t, "seq"),
		Key:            drawKey(t),
		IdempotencyKey: rapid.StringOfN(rapid.Rune(), 0, 12, IdempotencyKeyBytesMax).Draw(t, "idempotency_key"),
		Offsets:        drawOffsets(t),
		Arrow:          rapid.SliceOfN(rapid.Byte(), 0, 96).Draw(t, "arrow"),
		Sidecar:        drawSidecar(t),
	}
}

func drawSeal(t *rapid.T) *SealRecord {
	s := &SealRecord{
		Snapshot:      SnapshotRef{Epoch: rapid.Uint64().Draw(t, "epoch"), Seq: rapid.Uint64().Draw(t, "snapshot_seq")},
		CreatedUnixMs: rapid.Int64().Draw(t, "created_unix_ms"),
		Dir:           rapid.StringOfN(rapid.Rune(), 0, 24, DirBytesMax).Draw(t, "dir"),
		Partitions:    rapid.Uint64().Draw(t, "partitions"),
	}
	for range rapid.IntRange(0, 4).Draw(t, "ranges") {
		lo := rapid.Uint64().Draw(t, "lo")
		span := min(rapid.Uint64Range(0, 50).Draw(t, "span"), math.MaxUint64-lo)
		s.Ranges = append(s.Ranges, SeqRange{Lo: lo, Hi: lo + span})
	}
	return s
}

func drawFlushed(t *rapid.T) *FlushedRecord {
	return &FlushedRecord{Snapshot: SnapshotRef{Epoch: rapid.Uint64().Draw(t, "epoch"), Seq: rapid.Uint64().Draw(t, "snapshot_seq")}}
}

func drawRecord(t *rapid.T) Record {
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		return drawHeader(t)
	case 1:
		return drawUnit(t)
	case 2:
		return drawSeal(t)
	}
	return drawFlushed(t)
}

// drawImage draws a segment image: a header, 1..n records, zero padding.
func drawImage(t *rapid.T) (b []byte, offsets []int, dataEnd int) {
	records := []Record{drawHeader(t)}
	for range rapid.IntRange(1, 6).Draw(t, "records") {
		records = append(records, drawRecord(t))
	}
	b, offsets = image(t, records)
	dataEnd = len(b)
	b = append(b, make([]byte, rapid.IntRange(0, 64).Draw(t, "padding"))...)
	return b, offsets, dataEnd
}
