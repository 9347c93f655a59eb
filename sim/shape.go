package sim

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Schema evolution (SourceSpec.ExtraField, WidenField). A unit an HTTP
// client sends as JSON lines or CSV may carry fields besides the unit
// schema's, so that its namespace gets several schema fingerprints in
// one segment and across segments, as a real client's does when its
// producer adds a field or starts sending fractions:
//
//   - tag, an integer on the even rows of a unit that has it and null on
//     the odd ones (absent from a JSON line, or null in it; an empty CSV
//     cell), so the source infers int64 with nulls; and with it zip, five
//     digits with a leading zero on every row, which CSV inference keeps
//     as text (a number spelled so is a code, not the number);
//   - score, an integer on every row (inferred int64), or — on a unit
//     whose score widens — a half on the even rows and an integer on the
//     odd ones (inferred float64, its integers converted exactly).
//
// A unit's shape is a pure function of its id, and what the source
// produced carries the same columns the source decodes (with the types
// it infers), so the digests compare every field of every row. Arrow
// bodies keep the unit schema: a client that sends Arrow sends a schema.

// scoreKind is how a unit carries score.
type scoreKind uint8

const (
	scoreNone  scoreKind = iota
	scoreInt             // int64 on every row
	scoreFloat           // float64: halves on the even rows
)

// unitShape is which optional fields a unit carries.
type unitShape struct {
	tag   bool
	score scoreKind
}

func (s unitShape) plain() bool { return !s.tag && s.score == scoreNone }

// The optional fields' names: sorted among the unit schema's, so a JSON
// body's columns (sorted by name) interleave them.
const (
	fieldTag   = "tag"
	fieldScore = "score"
	fieldZip   = "zip"
)

// shapeOf is unit uid's shape: plain unless its source evolves schemas
// and the unit is sent as text. Half the units of an ExtraField source
// carry tag; a WidenField source's units carry no score, an integer one
// or a widened one, a third each.
func shapeOf(spec SourceSpec, uid UID) unitShape {
	if spec.Replayable || !spec.ExtraField && !spec.WidenField || encodingOf(spec, uid) == EncodingArrow {
		return unitShape{}
	}
	h := mix64(uint64(uid) ^ 0x7a6e5d4c3b2a1908)
	var s unitShape
	s.tag = spec.ExtraField && h%2 == 0
	if spec.WidenField {
		s.score = scoreKind((h >> 8) % 3)
	}
	return s
}

// tagOf is row r's tag, and whether it has one (not null).
func tagOf(uid UID, r int) (int64, bool) {
	return int64(mix64(uint64(uid)*31+uint64(r)) % 1_000_000), r%2 == 0
}

// zipOf is row r's zip: "0" and four digits.
func zipOf(uid UID, r int) string {
	return fmt.Sprintf("0%04d", mix64(uint64(uid)*41+uint64(r)+2)%10000)
}

// scoreOf is row r's score in a unit of kind k: an integer below 2^20,
// plus a half on the even rows of a widened unit (exact in float64).
func scoreOf(uid UID, r int, k scoreKind) (int64, float64) {
	v := int64(mix64(uint64(uid)*37+uint64(r)+1) % (1 << 20))
	f := float64(v)
	if k == scoreFloat && r%2 == 0 {
		f += 0.5
	}
	return v, f
}

// withShape returns b with the shape's columns appended (b itself when
// the shape is plain); b is released either way.
func withShape(b arrow.RecordBatch, uid UID, s unitShape) arrow.RecordBatch {
	if s.plain() {
		return b
	}
	defer b.Release()
	rows := int(b.NumRows())
	fields := b.Schema().Fields()
	cols := append([]arrow.Array(nil), b.Columns()...)
	var extra []arrow.Array
	if s.tag {
		tb := array.NewInt64Builder(memory.DefaultAllocator)
		for r := range rows {
			if v, ok := tagOf(uid, r); ok {
				tb.Append(v)
			} else {
				tb.AppendNull()
			}
		}
		fields = append(fields, arrow.Field{Name: fieldTag, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
		extra = append(extra, tb.NewArray())
		tb.Release()
		zb := array.NewStringBuilder(memory.DefaultAllocator)
		for r := range rows {
			zb.Append(zipOf(uid, r))
		}
		fields = append(fields, arrow.Field{Name: fieldZip, Type: arrow.BinaryTypes.String, Nullable: true})
		extra = append(extra, zb.NewArray())
		zb.Release()
	}
	if s.score != scoreNone {
		f, a := scoreColumn(uid, rows, s.score)
		fields, extra = append(fields, f), append(extra, a)
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), append(cols, extra...), int64(rows))
	for _, a := range extra {
		a.Release()
	}
	return out
}

// scoreColumn is a unit's score column of kind k (not scoreNone).
func scoreColumn(uid UID, rows int, k scoreKind) (arrow.Field, arrow.Array) {
	if k == scoreInt {
		sb := array.NewInt64Builder(memory.DefaultAllocator)
		defer sb.Release()
		for r := range rows {
			v, _ := scoreOf(uid, r, k)
			sb.Append(v)
		}
		return arrow.Field{Name: fieldScore, Type: arrow.PrimitiveTypes.Int64, Nullable: true}, sb.NewArray()
	}
	fb := array.NewFloat64Builder(memory.DefaultAllocator)
	defer fb.Release()
	for r := range rows {
		_, f := scoreOf(uid, r, k)
		fb.Append(f)
	}
	return arrow.Field{Name: fieldScore, Type: arrow.PrimitiveTypes.Float64, Nullable: true}, fb.NewArray()
}
