package iceberg

// Casts: how each job column is written as its table column's type
// (types.go has the mapping), exactly and deterministically — values a
// type cannot hold are refused, never rounded, except where the mapping
// table says so (ns to µs, date64 to its day).

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/engine"
)

// converter is how a job column of Arrow type src at path is written to
// a table column of type have: the Arrow type it is written as (have's,
// nested fields with their ids and the job's field order) and the
// conversion of its values.
func converter(path string, src arrow.DataType, have icego.Type) (arrow.DataType, convFunc, error) {
	switch h := have.(type) {
	case *icego.StructType:
		if s, ok := src.(*arrow.StructType); ok {
			return structConverter(path, s, h)
		}
	case *icego.ListType:
		if src.ID() == arrow.LIST || src.ID() == arrow.LARGE_LIST {
			return listConverter(path, src.(arrow.ListLikeType), h)
		}
	case *icego.MapType:
		if m, ok := src.(*arrow.MapType); ok {
			return mapConverter(path, m, h)
		}
	default:
		return primitiveConverter(path, src, have)
	}
	return nil, nil, fmt.Errorf("at %s, the table's %s cannot hold Arrow %s: %w", path, have, src, ErrCannotHold)
}

func primitiveConverter(path string, src arrow.DataType, have icego.Type) (arrow.DataType, convFunc, error) {
	want, err := typeOf(path, src)
	if err != nil {
		return nil, nil, err
	}
	if !holds(have, want) {
		if _, ok := widened(have, want); ok {
			return nil, nil, fmt.Errorf("at %s, the table's %s is narrower than the job's %s (Arrow %s): the table must be evolved first", path, have, want, src)
		}
		return nil, nil, fmt.Errorf("at %s, the table's %s cannot hold the job's %s (Arrow %s): %w", path, have, want, src, ErrCannotHold)
	}
	dst, err := arrowOf(have)
	if err != nil {
		return nil, nil, fmt.Errorf("at %s: %w", path, err)
	}
	conv, err := castTo(path, src, dst)
	return dst, conv, err
}

// arrowOf is the Arrow type a table column of primitive type t is
// written as (iceberg-go's table.SchemaToArrowSchema's choice, small
// offsets).
func arrowOf(t icego.Type) (arrow.DataType, error) {
	switch t := t.(type) {
	case icego.DecimalType:
		return &arrow.Decimal128Type{Precision: int32(t.Precision()), Scale: int32(t.Scale())}, nil
	case icego.FixedType:
		return &arrow.FixedSizeBinaryType{ByteWidth: t.Len()}, nil
	}
	for _, a := range arrowOfPrimitive {
		if a.iceberg.Equals(t) {
			return a.arrow, nil
		}
	}
	return nil, fmt.Errorf("the table's type %s is not one this sink writes: %w", t, ErrCannotHold)
}

var arrowOfPrimitive = []struct {
	iceberg icego.Type
	arrow   arrow.DataType
}{
	{icego.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32},
	{icego.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int64},
	{icego.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float32},
	{icego.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float64},
	{icego.PrimitiveTypes.Bool, arrow.FixedWidthTypes.Boolean},
	{icego.PrimitiveTypes.String, arrow.BinaryTypes.String},
	{icego.PrimitiveTypes.Binary, arrow.BinaryTypes.Binary},
	{icego.PrimitiveTypes.Date, arrow.FixedWidthTypes.Date32},
	{icego.PrimitiveTypes.Time, arrow.FixedWidthTypes.Time64us},
	{icego.PrimitiveTypes.Timestamp, &arrow.TimestampType{Unit: arrow.Microsecond}},
	{icego.PrimitiveTypes.TimestampTz, timestampUTC},
}

func structConverter(path string, src *arrow.StructType, have *icego.StructType) (arrow.DataType, convFunc, error) {
	byName := make(map[string]icego.NestedField, len(have.FieldList))
	for _, f := range have.FieldList {
		byName[f.Name] = f
	}
	fields := make([]arrow.Field, src.NumFields())
	convs := make([]convFunc, src.NumFields())
	for i, f := range src.Fields() {
		h, ok := byName[f.Name]
		if !ok {
			return nil, nil, fmt.Errorf("field %s.%s is not in the table's column: %w", path, f.Name, ErrCannotHold)
		}
		t, conv, err := converter(path+"."+f.Name, f.Type, h.Type)
		if err != nil {
			return nil, nil, err
		}
		fields[i] = arrow.Field{Name: f.Name, Type: t, Nullable: true, Metadata: fieldID(h.ID)}
		convs[i] = conv
	}
	dst := arrow.StructOf(fields...)
	return dst, structConv(dst, convs), nil
}

func listConverter(path string, src arrow.ListLikeType, have *icego.ListType) (arrow.DataType, convFunc, error) {
	t, conv, err := converter(path+".element", src.Elem(), have.Element)
	if err != nil {
		return nil, nil, err
	}
	dst := arrow.ListOfField(arrow.Field{Name: "element", Type: t, Nullable: true, Metadata: fieldID(have.ElementID)})
	return dst, listConv(path, dst, conv), nil
}

// mapConverter converts a map as the list of key-value structs it is.
func mapConverter(path string, src *arrow.MapType, have *icego.MapType) (arrow.DataType, convFunc, error) {
	kt, kconv, err := converter(path+".key", src.KeyType(), have.KeyType)
	if err != nil {
		return nil, nil, err
	}
	vt, vconv, err := converter(path+".value", src.ItemType(), have.ValueType)
	if err != nil {
		return nil, nil, err
	}
	dst := arrow.MapOfFields(
		arrow.Field{Name: "key", Type: kt, Metadata: fieldID(have.KeyID)},
		arrow.Field{Name: "value", Type: vt, Nullable: true, Metadata: fieldID(have.ValueID)})
	entries := structConv(dst.Elem(), []convFunc{kconv, vconv})
	return dst, listConv(path, dst, entries), nil
}

// structConv converts a struct field by field (convs), keeping its
// validity.
func structConv(dst arrow.DataType, convs []convFunc) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		s := a.(*array.Struct) // Field(i) is sliced to s's rows
		kids := make([]arrow.Array, 0, len(convs))
		defer releaseAll(&kids)
		for i, conv := range convs {
			k, err := conv(s.Field(i))
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		return nestedArray(dst, a, nil, kids), nil
	}
}

// listConv converts a list, large list or map: its offsets rebased to
// the first value (32-bit: a batch's list values fit them), its values
// by elem, its validity kept.
func listConv(path string, dst arrow.DataType, elem convFunc) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		l := a.(array.ListLike)
		n := a.Len()
		var first, last int64
		if n > 0 {
			first, _ = l.ValueOffsets(0)
			_, last = l.ValueOffsets(n - 1)
		}
		if last-first > 1<<31-1 {
			return nil, fmt.Errorf("at %s, one batch's lists hold %d values, more than a list column's 32-bit offsets address", path, last-first)
		}
		offsets := make([]int32, n+1)
		for i := range n {
			start, _ := l.ValueOffsets(i)
			offsets[i] = int32(start - first)
		}
		offsets[n] = int32(last - first)
		values := array.NewSlice(l.ListValues(), first, last)
		defer values.Release()
		kid, err := elem(values)
		if err != nil {
			return nil, err
		}
		defer kid.Release()
		buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))
		return nestedArray(dst, a, []*memory.Buffer{buf}, []arrow.Array{kid}), nil
	}
}

// nestedArray is an array of type dst with a's rows and validity (a
// fresh bitmap from offset 0), then bufs, and children kids.
func nestedArray(dst arrow.DataType, a arrow.Array, bufs []*memory.Buffer, kids []arrow.Array) arrow.Array {
	children := make([]arrow.ArrayData, len(kids))
	for i, k := range kids {
		children[i] = k.Data()
	}
	bitmap := validity(a)
	if bitmap != nil {
		defer bitmap.Release()
	}
	data := array.NewData(dst, a.Len(), append([]*memory.Buffer{bitmap}, bufs...), children, a.NullN(), 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// validity is a's validity bitmap from bit 0 (nil: no nulls).
func validity(a arrow.Array) *memory.Buffer {
	if a.NullN() == 0 {
		return nil
	}
	buf := memory.NewResizableBuffer(memory.DefaultAllocator)
	buf.Resize(int(bitutil.BytesForBits(int64(a.Len()))))
	clear(buf.Bytes())
	bitutil.CopyBitmap(a.NullBitmapBytes(), a.Data().Offset(), a.Len(), buf.Bytes(), 0)
	return buf
}

func releaseAll(arrs *[]arrow.Array) {
	for _, a := range *arrs {
		a.Release()
	}
}

// castTo is the conversion of values of the primitive Arrow type src to
// dst, exact (holds allowed the pair): integers widen, unsigned ones and
// decimals into decimals scaled up, floats widen, large offsets shrink,
// dates and times go to days and microseconds (types.go says how).
func castTo(path string, src, dst arrow.DataType) (convFunc, error) {
	if arrow.TypeEqual(src, dst) {
		return func(a arrow.Array) (arrow.Array, error) { a.Retain(); return a, nil }, nil
	}
	mem := memory.DefaultAllocator
	switch d := dst.(type) {
	case *arrow.Int32Type:
		return intConv(func() valueBuilder[int32] { return array.NewInt32Builder(mem) }, func(v int64) int32 { return int32(v) }), nil
	case *arrow.Int64Type:
		return intConv(func() valueBuilder[int64] { return array.NewInt64Builder(mem) }, func(v int64) int64 { return v }), nil
	case *arrow.Decimal128Type:
		return decimalConv(src, d), nil
	case *arrow.Float32Type, *arrow.Float64Type:
		return floatConv(dst), nil
	case *arrow.StringType:
		return func(a arrow.Array) (arrow.Array, error) {
			s := a.(*array.LargeString)
			return build(a, array.NewStringBuilder(mem), func(i int) (string, error) { return s.Value(i), nil })
		}, nil
	case *arrow.BinaryType:
		return func(a arrow.Array) (arrow.Array, error) {
			b := a.(*array.LargeBinary)
			return build(a, array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), func(i int) ([]byte, error) { return b.Value(i), nil })
		}, nil
	case *arrow.Date32Type:
		return date64Conv, nil
	case *arrow.Time64Type:
		return timeConv(src), nil
	case *arrow.TimestampType:
		return timestampConv(path, src.(*arrow.TimestampType), d), nil
	}
	return nil, fmt.Errorf("at %s, no conversion from Arrow %s to %s", path, src, dst)
}

// valueBuilder is an Arrow builder that appends a slice of values.
type valueBuilder[T any] interface {
	array.Builder
	AppendValues([]T, []bool)
}

// build is a's values through at (called for valid slots only), nulls
// kept, appended to b.
func build[T any](a arrow.Array, b valueBuilder[T], at func(i int) (T, error)) (arrow.Array, error) {
	defer b.Release()
	n := a.Len()
	values, valid := make([]T, n), make([]bool, n)
	for i := range n {
		if a.IsNull(i) {
			continue
		}
		v, err := at(i)
		if err != nil {
			return nil, err
		}
		values[i], valid[i] = v, true
	}
	b.AppendValues(values, valid)
	return b.NewArray(), nil
}

// intConv widens signed and unsigned integers up to 32 bits (and int64
// into long) through int64.
func intConv[T any](builder func() valueBuilder[T], to func(int64) T) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		at := intAt(a)
		return build(a, builder(), func(i int) (T, error) { return to(at(i)), nil })
	}
}

// intAt reads a's values as int64: every integer type but uint64.
func intAt(a arrow.Array) func(int) int64 {
	switch a := a.(type) {
	case *array.Int8:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int16:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int32:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int64:
		return func(i int) int64 { return a.Value(i) }
	case *array.Uint8:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint16:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint32:
		return func(i int) int64 { return int64(a.Value(i)) }
	}
	panic(fmt.Sprintf("iceberg: intAt of %s", a.DataType())) // castTo's callers pass integers only
}

// decimalConv writes integers, uint64 and decimals into dst, scaling
// them up to its scale (holds checked the digits fit).
func decimalConv(src arrow.DataType, dst *arrow.Decimal128Type) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		var at func(int) decimal128.Num
		switch s := a.(type) {
		case *array.Uint64:
			at = func(i int) decimal128.Num { return decimal128.FromU64(s.Value(i)).IncreaseScaleBy(dst.Scale) }
		case *array.Decimal128:
			by := dst.Scale - src.(*arrow.Decimal128Type).Scale
			at = func(i int) decimal128.Num { return s.Value(i).IncreaseScaleBy(by) }
		default:
			ints := intAt(a)
			at = func(i int) decimal128.Num { return decimal128.FromI64(ints(i)).IncreaseScaleBy(dst.Scale) }
		}
		b := array.NewDecimal128Builder(memory.DefaultAllocator, dst)
		return build(a, b, func(i int) (decimal128.Num, error) { return at(i), nil })
	}
}

// floatConv widens float16 and float32 to dst, float32 or float64.
func floatConv(dst arrow.DataType) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		var at func(int) float64
		switch s := a.(type) {
		case *array.Float16:
			at = func(i int) float64 { return float64(s.Value(i).Float32()) }
		case *array.Float32:
			at = func(i int) float64 { return float64(s.Value(i)) }
		}
		mem := memory.DefaultAllocator
		if dst.ID() == arrow.FLOAT32 {
			return build(a, array.NewFloat32Builder(mem), func(i int) (float32, error) { return float32(at(i)), nil })
		}
		return build(a, array.NewFloat64Builder(mem), func(i int) (float64, error) { return at(i), nil })
	}
}

// date64Conv is a date64's day (its milliseconds rounded down).
func date64Conv(a arrow.Array) (arrow.Array, error) {
	s := a.(*array.Date64)
	return build(a, array.NewDate32Builder(memory.DefaultAllocator), func(i int) (arrow.Date32, error) {
		return arrow.Date32(floorDiv(int64(s.Value(i)), msPerDay)), nil
	})
}

// timeConv is a time of day in microseconds: time32 scaled up, time64[ns]
// rounded down.
func timeConv(src arrow.DataType) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		var at func(int) int64
		switch s := a.(type) {
		case *array.Time32:
			at = func(i int) int64 { return int64(s.Value(i)) }
		case *array.Time64:
			at = func(i int) int64 { return int64(s.Value(i)) }
		}
		unit := src.(arrow.TemporalWithUnit).TimeUnit()
		b := array.NewTime64Builder(memory.DefaultAllocator, arrow.FixedWidthTypes.Time64us.(*arrow.Time64Type))
		return build(a, b, func(i int) (arrow.Time64, error) {
			us, ok := toMicros(at(i), unit)
			if !ok {
				return 0, fmt.Errorf("a time of %d %s is out of range", at(i), unit)
			}
			return arrow.Time64(us), nil
		})
	}
}

// timestampConv is a timestamp in microseconds, in dst's zone (the
// instant is the same: Arrow stores UTC whatever the zone).
func timestampConv(path string, src, dst *arrow.TimestampType) convFunc {
	return func(a arrow.Array) (arrow.Array, error) {
		s := a.(*array.Timestamp)
		return build(a, array.NewTimestampBuilder(memory.DefaultAllocator, dst), func(i int) (arrow.Timestamp, error) {
			us, ok := toMicros(int64(s.Value(i)), src.Unit)
			if !ok {
				return 0, fmt.Errorf("at %s, the timestamp %d %s is beyond the microseconds an Iceberg timestamp holds (%w)",
					path, s.Value(i), src.Unit, engine.ErrCannotApply)
			}
			return arrow.Timestamp(us), nil
		})
	}
}

// toMicros is v, in unit u, in microseconds: rounded down from
// nanoseconds, scaled up from seconds and milliseconds (ok false past
// int64).
func toMicros(v int64, u arrow.TimeUnit) (int64, bool) {
	switch u {
	case arrow.Second:
		return mulExact(v, 1_000_000)
	case arrow.Millisecond:
		return mulExact(v, 1_000)
	case arrow.Nanosecond:
		return floorDiv(v, 1_000), true
	}
	return v, true
}

func mulExact(v, m int64) (int64, bool) {
	if v > math.MaxInt64/m || v < math.MinInt64/m {
		return 0, false
	}
	return v * m, true
}
