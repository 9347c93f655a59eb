package arrowgen

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ExactEqual is array.RecordEqual with floats compared by bit pattern, so
// NaN equals itself and -0 differs from +0.
func ExactEqual(a, b arrow.RecordBatch) bool {
	a, b = floatsAsBits(a), floatsAsBits(b)
	defer a.Release()
	defer b.Release()
	return array.RecordEqual(a, b)
}

// floatsAsBits returns a view of rec sharing its buffers, with every
// float32/float64 (at any nesting depth) retyped as uint32/uint64.
func floatsAsBits(rec arrow.RecordBatch) arrow.RecordBatch {
	fields := make([]arrow.Field, rec.NumCols())
	cols := make([]arrow.Array, rec.NumCols())
	for i, col := range rec.Columns() {
		f := rec.Schema().Field(i)
		f.Type = bitsType(f.Type)
		fields[i] = f
		data := bitsData(col.Data())
		cols[i] = array.MakeFromData(data)
		data.Release()
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func bitsType(dt arrow.DataType) arrow.DataType {
	switch dt := dt.(type) {
	case *arrow.Float32Type:
		return arrow.PrimitiveTypes.Uint32
	case *arrow.Float64Type:
		return arrow.PrimitiveTypes.Uint64
	case *arrow.ListType:
		elem := dt.ElemField()
		elem.Type = bitsType(elem.Type)
		return arrow.ListOfField(elem)
	case *arrow.StructType:
		fields := dt.Fields()
		for i := range fields {
			fields[i].Type = bitsType(fields[i].Type)
		}
		return arrow.StructOf(fields...)
	}
	return dt
}

func bitsData(d arrow.ArrayData) arrow.ArrayData {
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		children[i] = bitsData(c)
	}
	out := array.NewData(bitsType(d.DataType()), d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, c := range children {
		c.Release()
	}
	return out
}
