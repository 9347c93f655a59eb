package httpsrc

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// colType is the Arrow type inference settled on for a column of a JSON
// lines or CSV body.
type colType int

const (
	typeUTF8 colType = iota
	typeInt64
	typeFloat64
	typeBool
	typeTimestamp
)

func (t colType) arrow() arrow.DataType {
	switch t {
	case typeInt64:
		return arrow.PrimitiveTypes.Int64
	case typeFloat64:
		return arrow.PrimitiveTypes.Float64
	case typeBool:
		return arrow.FixedWidthTypes.Boolean
	case typeTimestamp:
		return arrow.FixedWidthTypes.Timestamp_us
	}
	return arrow.BinaryTypes.String
}

// column is one field's non-null values, in row order, as a pass over a
// body collected them; a row it has no value for is null.
//
// INVARIANT (checkColumn): rows is strictly increasing and below the
// body's row count; the value slice typ uses (ints for int64 and
// timestamp, floats, bools, ends for utf8) is as long as rows, and the
// others are empty; ends is non-decreasing and its last is len(text).
type column struct {
	name   string
	typ    colType
	rows   []int32
	ints   []int64 // typeInt64; typeTimestamp: µs since the Unix epoch, UTC
	floats []float64
	bools  []bool
	text   []byte  // typeUTF8: the values, concatenated
	ends   []int32 // typeUTF8: where each value ends in text
}

func (c *column) appendText(row int32, v []byte) {
	c.rows = append(c.rows, row)
	c.text = append(c.text, v...)
	c.ends = append(c.ends, int32(len(c.text)))
}

// appendString is appendText for a string, without copying it first.
func (c *column) appendString(row int32, v string) {
	c.rows = append(c.rows, row)
	c.text = append(c.text, v...)
	c.ends = append(c.ends, int32(len(c.text)))
}

// textAt returns value k of a utf8 column.
func (c *column) textAt(k int) []byte {
	start := int32(0)
	if k > 0 {
		start = c.ends[k-1]
	}
	return c.text[start:c.ends[k]]
}

// checkColumn reports whether c keeps column's invariant for a body of
// nrows rows. A failure is a bug in this package, not bad input.
func checkColumn(c *column, nrows int) error {
	for k, r := range c.rows {
		if int(r) >= nrows || (k > 0 && r <= c.rows[k-1]) || r < 0 {
			return fmt.Errorf("httpsrc: internal: column %q: row %d at value %d out of order or range", c.name, r, k)
		}
	}
	var want [4]int // lengths of ints, floats, bools, ends
	switch c.typ {
	case typeInt64, typeTimestamp:
		want[0] = len(c.rows)
	case typeFloat64:
		want[1] = len(c.rows)
	case typeBool:
		want[2] = len(c.rows)
	default:
		want[3] = len(c.rows)
	}
	if got := [4]int{len(c.ints), len(c.floats), len(c.bools), len(c.ends)}; got != want {
		return fmt.Errorf("httpsrc: internal: column %q of type %v: %d rows, value slices %v", c.name, c.typ.arrow(), len(c.rows), got)
	}
	for k, e := range c.ends {
		if (k > 0 && e < c.ends[k-1]) || e < 0 {
			return fmt.Errorf("httpsrc: internal: column %q: text ends decrease at value %d", c.name, k)
		}
	}
	if n := len(c.ends); (n > 0 && int(c.ends[n-1]) != len(c.text)) || (n == 0 && len(c.text) != 0) {
		return fmt.Errorf("httpsrc: internal: column %q: text of %d bytes, ends say otherwise", c.name, len(c.text))
	}
	return nil
}

// decodedBytes is about what cols take as Arrow arrays of nrows rows:
// a validity bit per row, and per row 8 bytes (int64, float64,
// timestamp), a bit (bool) or a 4-byte offset and the text (utf8).
func decodedBytes(cols []*column, nrows int) int64 {
	n := int64(nrows)
	bits := (n + 7) / 8
	var total int64
	for _, c := range cols {
		total += bits
		switch c.typ {
		case typeInt64, typeFloat64, typeTimestamp:
			total += 8 * n
		case typeBool:
			total += bits
		default:
			total += 4*(n+1) + int64(len(c.text))
		}
	}
	return total
}

// buildDecoded turns the columns of a body of nrows rows into record
// batches of at most lim.BatchRows rows, allocated from mem. Fields keep
// the order of cols.
func buildDecoded(cols []*column, nrows int, lim Limits, mem memory.Allocator) (*Decoded, error) {
	for _, c := range cols {
		if err := checkColumn(c, nrows); err != nil {
			return nil, err
		}
	}
	if need, most := decodedBytes(cols, nrows), lim.decodedBytesMax(); need > most {
		return nil, tooLargef("%d rows of %d fields would take about %d bytes of memory; at most %d (%d× the body limit)",
			nrows, len(cols), need, most, decodedRatio)
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ.arrow(), Nullable: true}
	}
	d := &Decoded{Schema: arrow.NewSchema(fields, nil), Rows: int64(nrows)}
	next := make([]int, len(cols)) // per column, its first value not yet built
	for lo := 0; lo < nrows; lo += lim.BatchRows {
		hi := min(lo+lim.BatchRows, nrows)
		d.Batches = append(d.Batches, buildBatch(d.Schema, cols, next, lo, hi, mem))
	}
	return d, nil
}

// buildBatch builds rows [lo, hi); next[i] is column i's first value at
// or after row lo, and is moved past hi.
func buildBatch(schema *arrow.Schema, cols []*column, next []int, lo, hi int, mem memory.Allocator) arrow.RecordBatch {
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		arrs[i] = c.build(lo, hi, &next[i], mem)
	}
	rec := array.NewRecordBatch(schema, arrs, int64(hi-lo))
	for _, a := range arrs {
		a.Release() // the batch holds its own reference
	}
	return rec
}

// build returns c's rows [lo, hi) as an array; *k is the first value at
// or after lo.
func (c *column) build(lo, hi int, k *int, mem memory.Allocator) arrow.Array {
	switch c.typ {
	case typeInt64:
		b := array.NewInt64Builder(mem)
		return fill(b, c, lo, hi, k, func(j int) { b.UnsafeAppend(c.ints[j]) })
	case typeTimestamp:
		b := array.NewTimestampBuilder(mem, arrow.FixedWidthTypes.Timestamp_us.(*arrow.TimestampType))
		return fill(b, c, lo, hi, k, func(j int) { b.UnsafeAppend(arrow.Timestamp(c.ints[j])) })
	case typeFloat64:
		b := array.NewFloat64Builder(mem)
		return fill(b, c, lo, hi, k, func(j int) { b.UnsafeAppend(c.floats[j]) })
	case typeBool:
		b := array.NewBooleanBuilder(mem)
		return fill(b, c, lo, hi, k, func(j int) { b.UnsafeAppend(c.bools[j]) })
	}
	b := array.NewStringBuilder(mem)
	if first, last := *k, c.valuesBefore(hi, *k); last > first {
		start := int32(0)
		if first > 0 {
			start = c.ends[first-1]
		}
		b.ReserveData(int(c.ends[last-1] - start))
	}
	return fill(b, c, lo, hi, k, func(j int) { b.BinaryBuilder.Append(c.textAt(j)) })
}

// valuesBefore returns the index of c's first value at or after row hi,
// searching from value k.
func (c *column) valuesBefore(hi, k int) int {
	for k < len(c.rows) && int(c.rows[k]) < hi {
		k++
	}
	return k
}

// fill appends rows [lo, hi) to b — value j for a row c has a value for,
// a null otherwise — and returns the array. b is released.
func fill(b array.Builder, c *column, lo, hi int, k *int, value func(j int)) arrow.Array {
	defer b.Release()
	b.Reserve(hi - lo)
	for r := lo; r < hi; r++ {
		if *k < len(c.rows) && int(c.rows[*k]) == r {
			value(*k)
			*k++
		} else {
			b.AppendNull()
		}
	}
	return b.NewArray()
}
