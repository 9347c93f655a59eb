package httpsrc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkedMem returns an allocator that fails t if anything allocated
// from it is still held when the test ends.
func checkedMem(t testing.TB) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// decode decodes body with a checked allocator; the result is released
// when the test ends.
func decode(t testing.TB, f Format, body string, lim Limits) (*Decoded, error) {
	t.Helper()
	mem := checkedMem(t)
	d, err := Decode(f, strings.NewReader(body), lim, mem)
	if err != nil {
		if d != nil {
			t.Errorf("Decode returned %v with an error", d)
		}
		mem.AssertSize(t, 0)
		return nil, err
	}
	t.Cleanup(d.Release)
	return d, nil
}

// mustDecode decodes body and fails t on error.
func mustDecode(t testing.TB, f Format, body string, lim Limits) *Decoded {
	t.Helper()
	d, err := decode(t, f, body, lim)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return d
}

// wantInputError checks that err is an *InputError on line about column
// whose reason contains reason.
func wantInputError(t testing.TB, err error, line int, column, reason string) {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T); want an *InputError", err, err)
	}
	if ie.Line != line || ie.Column != column || !strings.Contains(ie.Reason, reason) {
		t.Fatalf("InputError{Line: %d, Column: %q, Reason: %q}; want line %d, column %q, a reason containing %q",
			ie.Line, ie.Column, ie.Reason, line, column, reason)
	}
}

// fieldTypes returns the schema as name → type strings, in order.
func fieldTypes(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name+":"+f.Type.String())
	}
	return out
}

// values returns column name of every batch, concatenated, as Go values:
// nil for null, else int64, float64, bool, string or time.Time.
func values(t testing.TB, d *Decoded, name string) []any {
	t.Helper()
	idx := d.Schema.FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("schema %v has %d fields named %q", d.Schema, len(idx), name)
	}
	var out []any
	for _, b := range d.Batches {
		col := b.Column(idx[0])
		for i := 0; i < col.Len(); i++ {
			out = append(out, valueAt(t, col, i))
		}
	}
	return out
}

func valueAt(t testing.TB, col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	switch c := col.(type) {
	case *array.Int64:
		return c.Value(i)
	case *array.Float64:
		return c.Value(i)
	case *array.Boolean:
		return c.Value(i)
	case *array.String:
		return c.Value(i)
	case *array.Timestamp:
		return c.Value(i).ToTime(arrow.Microsecond).UTC()
	}
	t.Fatalf("column of type %v", col.DataType())
	return nil
}

func ts(s string) time.Time {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return v.UTC()
}
