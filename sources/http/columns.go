package httpsrc

import (
	"fmt"
	"slices"

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
	push(&c.rows, row)
	reserve(&c.text, len(v))
	c.text = append(c.text, v...)
	push(&c.ends, int32(len(c.text)))
}

// appendString is appendText for a string, without copying it first.
func (c *column) appendString(row int32, v string) {
	push(&c.rows, row)
	reserve(&c.text, len(v))
	c.text = append(c.text, v...)
	push(&c.ends, int32(len(c.text)))
}

// push appends v to *s, at least doubling its capacity when it is full.
// append grows a large slice by about a quarter at a time, copying it
// anew each time: a body's columns are large, and that copying was a
// fifth of the time of decoding a JSON body. (*s = append(*s, v) stores
// only the length when there is room: no write barrier.)
func push[T any](s *[]T, v T) {
	if len(*s) == cap(*s) {
		*s = slices.Grow(*s, max(len(*s), 64))
	}
	*s = append(*s, v)
}

// reserve makes room for n more bytes in *s, at least doubling its
// capacity if it must grow (push).
func reserve(s *[]byte, n int) {
	if cap(*s)-len(*s) < n {
		*s = slices.Grow(*s, max(len(*s), n, 256))
	}
}

// emptied returns c without its name, type and values, its slices'
// memory kept for another column.
func (c *column) emptied() column {
	return column{rows: c.rows[:0], ints: c.ints[:0], floats: c.floats[:0], bools: c.bools[:0], text: c.text[:0], ends: c.ends[:0]}
}

// capBytes is the memory c's slices hold.
func (c *column) capBytes() int {
	return 4*cap(c.rows) + 8*cap(c.ints) + 8*cap(c.floats) + cap(c.bools) + cap(c.text) + 4*cap(c.ends)
}

// textAt returns value k of a utf8 column.
func (c *column) textAt(k int) []byte { return c.text[c.textStart(k):c.ends[k]] }

// textStart returns where value k of a utf8 column starts in text.
func (c *column) textStart(k int) int32 {
	if k == 0 {
		return 0
	}
	return c.ends[k-1]
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
