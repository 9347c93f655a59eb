package httpsrc

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A column's rows of one batch become an Arrow array by filling its
// buffers straight from the column's slices — a copy for a column with
// a value in every row — rather than through an array builder, which
// costs a call and a bitmap update per value. Null slots are zero.

// build returns c's rows [lo, hi) as an array allocated from mem; *k is
// c's first value at or after row lo, and is moved past hi.
func (c *column) build(lo, hi int, k *int, mem memory.Allocator) arrow.Array {
	s := batchSpan{c: c, lo: lo, n: hi - lo, first: *k, last: *k}
	for s.last < len(c.rows) && int(c.rows[s.last]) < hi {
		s.last++
	}
	*k = s.last
	bufs := []*memory.Buffer{s.validity(mem), nil}
	switch c.typ {
	case typeInt64, typeTimestamp:
		bufs[1] = fixedWidth(s, c.ints, mem)
	case typeFloat64:
		bufs[1] = fixedWidth(s, c.floats, mem)
	case typeBool:
		bufs[1] = s.bools(mem)
	default:
		bufs = append(bufs[:1], s.offsets(mem), s.text(mem))
	}
	data := array.NewData(c.typ.arrow(), s.n, bufs, nil, s.n-(s.last-s.first), 0)
	arr := array.MakeFromData(data)
	data.Release() // arr holds data, and data its buffers
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return arr
}

// batchSpan is the rows [lo, lo+n) of column c, which holds values
// [first, last) of them.
type batchSpan struct {
	c           *column
	lo, n       int
	first, last int
}

// dense reports whether every row of the span has a value.
func (s batchSpan) dense() bool { return s.last-s.first == s.n }

// slot returns the position in the batch of value j.
func (s batchSpan) slot(j int) int { return int(s.c.rows[j]) - s.lo }

// newBuffer returns a buffer of size bytes from mem, zeroed if zero.
func newBuffer(mem memory.Allocator, size int, zero bool) *memory.Buffer {
	b := memory.NewResizableBuffer(mem)
	b.Resize(size)
	if zero {
		clear(b.Bytes())
	}
	return b
}

// validity returns the span's validity bitmap; nil if it has no null.
func (s batchSpan) validity(mem memory.Allocator) *memory.Buffer {
	if s.dense() {
		return nil
	}
	b := newBuffer(mem, int(bitutil.BytesForBits(int64(s.n))), true)
	for j := s.first; j < s.last; j++ {
		bitutil.SetBit(b.Bytes(), s.slot(j))
	}
	return b
}

// fixedWidth returns the span's values of vals (c.ints or c.floats) as
// a buffer of 8-byte slots.
func fixedWidth[T int64 | float64](s batchSpan, vals []T, mem memory.Allocator) *memory.Buffer {
	b := newBuffer(mem, s.n*8, !s.dense())
	out := arrow.GetData[T](b.Bytes())
	if s.dense() {
		copy(out, vals[s.first:s.last])
		return b
	}
	for j := s.first; j < s.last; j++ {
		out[s.slot(j)] = vals[j]
	}
	return b
}

// bools returns the span's booleans as a bitmap.
func (s batchSpan) bools(mem memory.Allocator) *memory.Buffer {
	b := newBuffer(mem, int(bitutil.BytesForBits(int64(s.n))), true)
	for j := s.first; j < s.last; j++ {
		if s.c.bools[j] {
			bitutil.SetBit(b.Bytes(), s.slot(j))
		}
	}
	return b
}

// offsets returns the span's utf8 offsets: n+1 of them, from 0, a null
// taking no bytes.
func (s batchSpan) offsets(mem memory.Allocator) *memory.Buffer {
	b := newBuffer(mem, (s.n+1)*4, false)
	out := arrow.GetData[int32](b.Bytes())
	base, end := s.c.textStart(s.first), int32(0)
	out[0] = 0
	j := s.first
	for r := range s.n {
		if j < s.last && s.slot(j) == r {
			end = s.c.ends[j] - base
			j++
		}
		out[r+1] = end
	}
	return b
}

// text returns the span's utf8 values, concatenated.
func (s batchSpan) text(mem memory.Allocator) *memory.Buffer {
	start, end := s.c.textStart(s.first), s.c.textStart(s.last)
	b := newBuffer(mem, int(end-start), false)
	copy(b.Bytes(), s.c.text[start:end])
	return b
}
