package httpsrc

import (
	"sync"
	"unsafe"
)

// A JSON lines decoder's Go memory — its columns' slices, its line
// numbers, the scanner's members — is kept, emptied, for a later body
// when it is small: a daemon decodes many small bodies at once, and
// growing every column from nothing for each one was half of the memory
// decoding a 40 KB body took, with the garbage collector's work on it. A
// decoder holding more than reuseBytesMax is left to the garbage
// collector instead: the pool never keeps a large body's worth.
//
// Nothing a decoder returns shares its memory: build copies the columns
// into Arrow buffers, and errors hold strings.

// reuseBytesMax bounds the Go memory of a pooled decoder.
const reuseBytesMax = 1 << 20

var jsonDecoders = sync.Pool{New: func() any { return &jsonDecoder{fields: map[string]*jsonField{}} }}

// newJSONDecoder returns an empty decoder, perhaps one a small body
// used before; recycle gives it back.
func newJSONDecoder(lim Limits) *jsonDecoder {
	d := jsonDecoders.Get().(*jsonDecoder)
	d.lim = lim
	return d
}

// newField returns a new field called name, with a spare column's
// memory if there is one.
func (d *jsonDecoder) newField(name string) *jsonField {
	f := &jsonField{lastRow: -1}
	if n := len(d.spare); n > 0 {
		f.column, d.spare = d.spare[n-1], d.spare[:n-1]
	}
	f.name = name
	return f
}

// recycle empties d and pools it, if it holds at most reuseBytesMax.
// Nothing d decoded may be used after.
func (d *jsonDecoder) recycle() {
	for _, f := range d.fields {
		d.spare = append(d.spare, f.column.emptied())
	}
	size := cap(d.lines)*4 + cap(d.scan.members)*int(unsafe.Sizeof(jsonMember{}))
	for _, c := range d.spare {
		size += c.capBytes()
	}
	if size > reuseBytesMax {
		return
	}
	clear(d.fields)
	clear(d.recent)
	d.recent, d.lines, d.rows = d.recent[:0], d.lines[:0], 0
	jsonDecoders.Put(d)
}
