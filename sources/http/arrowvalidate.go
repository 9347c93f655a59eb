package httpsrc

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// validateColumn checks col in full (offsets in range, UTF-8 strings,
// dictionary indices, null counts): arrow-go's IPC reader checks the
// framing, not the data, and bad data would fail — or panic — later, in
// a sink. The validator itself panics on some bad offsets (v18.8.0
// slices string values before checking the offsets against them).
func validateColumn(col arrow.Array) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	data := withNullBuffers(col.Data())
	defer data.Release()
	arr := array.MakeFromData(data)
	defer arr.Release()
	return array.ValidateFull(arr)
}

// withNullBuffers returns a copy of d's tree (sharing its buffers) in
// which every null-typed array has the one (absent) buffer
// array.ValidateFull wants: arrow-go's IPC reader (v18.8.0) gives null
// arrays none, and its validator then refuses them.
func withNullBuffers(d arrow.ArrayData) *array.Data {
	bufs := d.Buffers()
	if d.DataType().ID() == arrow.NULL && len(bufs) == 0 {
		bufs = []*memory.Buffer{nil}
	}
	// Dictionary returns a nil *array.Data in an interface when there is none.
	if dict, _ := d.Dictionary().(*array.Data); dict != nil {
		dd := withNullBuffers(dict)
		defer dd.Release()
		return array.NewDataWithDictionary(d.DataType(), d.Len(), bufs, d.NullN(), d.Offset(), dd)
	}
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		cd := withNullBuffers(c)
		defer cd.Release()
		children[i] = cd
	}
	return array.NewData(d.DataType(), d.Len(), bufs, children, d.NullN(), d.Offset())
}
