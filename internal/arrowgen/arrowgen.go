package arrowgen

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"
)

const (
	maxDepth   = 2 // list/struct nesting levels below a top-level field
	maxListLen = 4 // elements per list value
)

// leafTypes are the non-nested types. rapid favours early entries (and
// shrinks towards the first), so the most common column types come first.
// Timestamps are drawn separately so that every unit/zone combination is
// reachable.
var leafTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int32,
	arrow.BinaryTypes.String,
	arrow.PrimitiveTypes.Float64,
	arrow.FixedWidthTypes.Boolean,
	arrow.PrimitiveTypes.Int64,
	arrow.BinaryTypes.Binary,
	arrow.PrimitiveTypes.Float32,
	arrow.FixedWidthTypes.Date32,
	arrow.Null,
	arrow.PrimitiveTypes.Int8,
	arrow.PrimitiveTypes.Int16,
	arrow.PrimitiveTypes.Uint8,
	arrow.PrimitiveTypes.Uint16,
	arrow.PrimitiveTypes.Uint32,
	arrow.PrimitiveTypes.Uint64,
}

var (
	timeUnits = []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond}
	timeZones = []string{"UTC", "America/New_York", "+05:30", "Asia/Kolkata"}
)

var (
	nameRunes = []rune("abcdefghijklmnopqrstuvwxyz_0123456789")
	wideRunes = []rune("éßüñЖλ日本語한🙂 -.")
	nameGen   = rapid.OneOf(
		rapid.StringOfN(rapid.RuneFrom(nameRunes), 1, 8, -1),
		rapid.StringOfN(rapid.RuneFrom(slices.Concat(wideRunes, nameRunes)), 1, 6, -1),
	)
	stringGen = rapid.OneOf(
		rapid.Just(""),
		rapid.StringN(0, 12, -1),
		rapid.StringOfN(rapid.RuneFrom(wideRunes), 0, 6, -1),
	)
	binaryGen  = rapid.OneOf(rapid.Just([]byte{}), rapid.SliceOfN(rapid.Byte(), 0, 16))
	float64Gen = rapid.OneOf(rapid.SampledFrom(specialFloat64s()), rapid.Float64())
	float32Gen = rapid.OneOf(rapid.SampledFrom(specialFloat32s()), rapid.Float32())
)

func specialFloat64s() []float64 {
	return []float64{
		0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1),
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64,
	}
}

func specialFloat32s() []float32 {
	out := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, f := range specialFloat64s()[:5] {
		out = append(out, float32(f))
	}
	return out
}

// Schema draws a random schema of 1..maxFields fields.
func Schema(t *rapid.T, maxFields int) *arrow.Schema {
	n := rapid.IntRange(1, max(1, maxFields)).Draw(t, "numFields")
	return arrow.NewSchema(drawFields(t, n, 0), nil)
}

// drawFields draws n fields with distinct, non-empty names.
func drawFields(t *rapid.T, n, depth int) []arrow.Field {
	fields := make([]arrow.Field, 0, n)
	names := make([]string, 0, n)
	for range n {
		name := uniqueName(nameGen.Draw(t, "fieldName"), names)
		names = append(names, name)
		dt := drawType(t, depth)
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: drawNullable(t, dt)})
	}
	return fields
}

func uniqueName(name string, taken []string) string {
	candidate := name
	for i := 1; slices.Contains(taken, candidate); i++ {
		candidate = fmt.Sprintf("%s_%d", name, i)
	}
	return candidate
}

// drawNullable decides a field's nullability. The null type cannot hold a
// value, so it is always nullable.
func drawNullable(t *rapid.T, dt arrow.DataType) bool {
	return dt.ID() == arrow.NULL || rapid.Bool().Draw(t, "nullable")
}

func drawType(t *rapid.T, depth int) arrow.DataType {
	kind := 0 // leaf
	if depth < maxDepth {
		kind = rapid.IntRange(0, 5).Draw(t, "typeKind")
	}
	switch kind {
	case 4:
		elem := drawType(t, depth+1)
		return arrow.ListOfField(arrow.Field{Name: "item", Type: elem, Nullable: drawNullable(t, elem)})
	case 5:
		return arrow.StructOf(drawFields(t, rapid.IntRange(1, 3).Draw(t, "numChildren"), depth+1)...)
	}
	if rapid.IntRange(0, 5).Draw(t, "leafIsTimestamp") == 5 {
		return drawTimestampType(t)
	}
	return rapid.SampledFrom(leafTypes).Draw(t, "leafType")
}

// drawTimestampType draws a unit and, half the time, a time zone.
func drawTimestampType(t *rapid.T) *arrow.TimestampType {
	ts := &arrow.TimestampType{Unit: rapid.SampledFrom(timeUnits).Draw(t, "timeUnit")}
	if rapid.Bool().Draw(t, "hasTimeZone") {
		ts.TimeZone = rapid.SampledFrom(timeZones).Draw(t, "timeZone")
	}
	return ts
}

// Batch draws one record batch of the given schema with 0..maxRows rows
// (0 rows must be reachable and reasonably common), built with mem. Caller
// releases it.
func Batch(t *rapid.T, mem memory.Allocator, schema *arrow.Schema, maxRows int) arrow.RecordBatch {
	rows := drawLen(t, maxRows, "numRows")
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i, f := range schema.Fields() {
		fill(t, b.Field(i), f, rows)
	}
	return b.NewRecordBatch()
}

// Batches draws 0..maxBatches batches (empty list reachable) of the schema.
func Batches(t *rapid.T, mem memory.Allocator, schema *arrow.Schema, maxBatches, maxRows int) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, drawLen(t, maxBatches, "numBatches"))
	for i := range out {
		out[i] = Batch(t, mem, schema, maxRows)
	}
	return out
}

// drawLen draws a length in 0..maxLen. Zero gets its own draw so that it
// stays common (roughly a quarter of draws) and is where rapid shrinks to.
func drawLen(t *rapid.T, maxLen int, label string) int {
	if maxLen <= 0 || rapid.IntRange(0, 3).Draw(t, label+"IsZero") == 0 {
		return 0
	}
	return rapid.IntRange(1, maxLen).Draw(t, label)
}

// drawValidity draws which of n slots are valid: none null, all null, or a
// per-slot coin flip. Non-nullable fields are always all valid.
func drawValidity(t *rapid.T, nullable bool, n int) []bool {
	valid := make([]bool, n)
	mode := 0
	if nullable {
		mode = rapid.IntRange(0, 2).Draw(t, "nullMode")
	}
	for i := range valid {
		switch mode {
		case 0:
			valid[i] = true
		case 2:
			valid[i] = rapid.Bool().Draw(t, "valid")
		}
	}
	return valid
}

// fill appends n values of field f to b.
func fill(t *rapid.T, b array.Builder, f arrow.Field, n int) {
	if nb, ok := b.(*array.NullBuilder); ok {
		nb.AppendNulls(n)
		return
	}
	valid := drawValidity(t, f.Nullable, n)
	switch b := b.(type) {
	case *array.StructBuilder:
		// Children get a value for every slot, null struct slots included,
		// so non-nullable children stay null-free.
		b.AppendValues(valid)
		for i, child := range f.Type.(*arrow.StructType).Fields() {
			fill(t, b.FieldBuilder(i), child, n)
		}
	case *array.ListBuilder:
		elem := f.Type.(*arrow.ListType).ElemField()
		for _, ok := range valid {
			b.Append(ok)
			if ok {
				fill(t, b.ValueBuilder(), elem, drawLen(t, maxListLen, "listLen"))
			}
		}
	default:
		for _, ok := range valid {
			if ok {
				appendValue(t, b)
			} else {
				b.AppendNull()
			}
		}
	}
}

// appendValue appends one random non-null value to a leaf builder.
func appendValue(t *rapid.T, b array.Builder) {
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(rapid.Int8().Draw(t, "int8"))
	case *array.Int16Builder:
		b.Append(rapid.Int16().Draw(t, "int16"))
	case *array.Int32Builder:
		b.Append(rapid.Int32().Draw(t, "int32"))
	case *array.Int64Builder:
		b.Append(rapid.Int64().Draw(t, "int64"))
	case *array.Uint8Builder:
		b.Append(rapid.Uint8().Draw(t, "uint8"))
	case *array.Uint16Builder:
		b.Append(rapid.Uint16().Draw(t, "uint16"))
	case *array.Uint32Builder:
		b.Append(rapid.Uint32().Draw(t, "uint32"))
	case *array.Uint64Builder:
		b.Append(rapid.Uint64().Draw(t, "uint64"))
	case *array.Float32Builder:
		b.Append(float32Gen.Draw(t, "float32"))
	case *array.Float64Builder:
		b.Append(float64Gen.Draw(t, "float64"))
	case *array.BooleanBuilder:
		b.Append(rapid.Bool().Draw(t, "bool"))
	case *array.StringBuilder:
		b.Append(stringGen.Draw(t, "string"))
	case *array.BinaryBuilder:
		b.Append(binaryGen.Draw(t, "binary"))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(rapid.Int64().Draw(t, "timestamp")))
	case *array.Date32Builder:
		b.Append(arrow.Date32(rapid.Int32().Draw(t, "date32")))
	default:
		t.Fatalf("arrowgen: no value generator for %T", b)
	}
}
