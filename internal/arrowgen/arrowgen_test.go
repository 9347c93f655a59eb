package arrowgen_test

import (
	"bytes"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/internal/arrowgen"
)

const (
	maxFields  = 6
	maxBatches = 4
	maxRows    = 24
)

func releaseAll(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

func TestSchemaShape(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 8).Draw(t, "limit")
		schema := arrowgen.Schema(t, limit)
		if n := schema.NumFields(); n < 1 || n > limit {
			t.Fatalf("got %d fields, want 1..%d", n, limit)
		}
		checkNames(t, schema.Fields())
	})
}

// checkNames asserts that sibling field names are distinct and non-empty,
// recursively through struct children.
func checkNames(t *rapid.T, fields []arrow.Field) {
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if f.Name == "" || seen[f.Name] {
			t.Fatalf("empty or duplicate field name %q", f.Name)
		}
		seen[f.Name] = true
		if st, ok := f.Type.(*arrow.StructType); ok {
			checkNames(t, st.Fields())
		}
	}
}

func TestBatchesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		schema := arrowgen.Schema(t, maxFields)
		batches := arrowgen.Batches(t, memory.DefaultAllocator, schema, maxBatches, maxRows)
		defer releaseAll(batches)
		for _, rec := range batches {
			if err := array.ValidateRecordFull(rec); err != nil {
				t.Fatalf("invalid batch: %v", err)
			}
			if !rec.Schema().Equal(schema) {
				t.Fatalf("batch schema %v, want %v", rec.Schema(), schema)
			}
			for i, f := range schema.Fields() {
				checkNullability(t, f, rec.Column(i))
			}
		}
	})
}

// checkNullability asserts that arr, the data of field f, has no nulls where
// f (or a nested list element or struct child) is declared non-nullable.
func checkNullability(t *rapid.T, f arrow.Field, arr arrow.Array) {
	if !f.Nullable && arr.NullN() != 0 {
		t.Fatalf("non-nullable field %q (%v) has %d nulls", f.Name, f.Type, arr.NullN())
	}
	switch arr := arr.(type) {
	case *array.List:
		checkNullability(t, f.Type.(*arrow.ListType).ElemField(), arr.ListValues())
	case *array.Struct:
		for i, child := range f.Type.(*arrow.StructType).Fields() {
			checkNullability(t, child, arr.Field(i))
		}
	}
}

func TestReleaseReturnsAllocatorToZero(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		schema := arrowgen.Schema(t, maxFields)
		releaseAll(arrowgen.Batches(t, mem, schema, maxBatches, maxRows))
		mem.AssertSize(t, 0)
	})
}

func TestIPCRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		schema := arrowgen.Schema(t, maxFields)
		want := arrowgen.Batches(t, mem, schema, maxBatches, maxRows)
		defer releaseAll(want)

		got := roundTrip(t, mem, schema, want)
		defer releaseAll(got)
		if len(got) != len(want) {
			t.Fatalf("read %d batches, wrote %d", len(got), len(want))
		}
		for i := range want {
			if !got[i].Schema().Equal(schema) {
				t.Fatalf("batch %d: schema %v, want %v", i, got[i].Schema(), schema)
			}
			if !arrowgen.ExactEqual(want[i], got[i]) {
				t.Fatalf("batch %d differs after IPC round trip:\nwant %v\ngot  %v", i, want[i], got[i])
			}
		}
	})
}

// roundTrip writes batches as one IPC stream and reads them back.
func roundTrip(t *rapid.T, mem memory.Allocator, schema *arrow.Schema, batches []arrow.RecordBatch) []arrow.RecordBatch {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			t.Fatalf("ipc write: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("ipc close: %v", err)
	}

	r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("ipc reader: %v", err)
	}
	defer r.Release()
	if !r.Schema().Equal(schema) {
		t.Fatalf("stream schema %v, want %v", r.Schema(), schema)
	}
	var out []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := r.Err(); err != nil {
		releaseAll(out)
		t.Fatalf("ipc read: %v", err)
	}
	return out
}

func TestExactEqualSeesFloatBits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil)
	build := func(v float64) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		b.Field(0).(*array.Float64Builder).Append(v)
		return b.NewRecordBatch()
	}
	nan1, nan2, zero, negZero := build(math.NaN()), build(math.NaN()), build(0), build(math.Copysign(0, -1))
	defer releaseAll([]arrow.RecordBatch{nan1, nan2, zero, negZero})
	if !arrowgen.ExactEqual(nan1, nan2) {
		t.Error("NaN batches compare unequal")
	}
	if arrowgen.ExactEqual(zero, negZero) {
		t.Error("+0 and -0 batches compare equal")
	}
}

// coverage records which interesting shapes a run of draws produced.
type coverage map[string]bool

func (c coverage) schema(fields []arrow.Field) {
	for _, f := range fields {
		c[f.Type.ID().String()] = true
		if len(f.Name) != utf8.RuneCountInString(f.Name) {
			c["non-ASCII name"] = true
		}
		switch dt := f.Type.(type) {
		case *arrow.ListType:
			c.schema([]arrow.Field{dt.ElemField()})
			if dt.Elem().ID() == arrow.LIST {
				c["list<list>"] = true
			}
		case *arrow.StructType:
			c.schema(dt.Fields())
		case *arrow.TimestampType:
			c["timestamp "+dt.Unit.String()+" tz="+boolStr(dt.TimeZone != "")] = true
		}
	}
}

func (c coverage) column(arr arrow.Array) {
	if arr.Len() > 0 && arr.NullN() == arr.Len() && arr.DataType().ID() != arrow.NULL {
		c["all-null column"] = true
	}
	switch arr := arr.(type) {
	case *array.Float64:
		for _, v := range arr.Float64Values() {
			c["NaN"] = c["NaN"] || math.IsNaN(v)
			c["-Inf"] = c["-Inf"] || math.IsInf(v, -1)
			c["-0"] = c["-0"] || (v == 0 && math.Signbit(v))
		}
	case *array.String:
		for i := range arr.Len() {
			c["empty string"] = c["empty string"] || (arr.IsValid(i) && arr.Value(i) == "")
			c["multi-byte string"] = c["multi-byte string"] || len(arr.Value(i)) > utf8.RuneCountInString(arr.Value(i))
		}
	case *array.List:
		for i := range arr.Len() {
			start, end := arr.ValueOffsets(i)
			c["empty list"] = c["empty list"] || (arr.IsValid(i) && start == end)
			c["null list"] = c["null list"] || arr.IsNull(i)
		}
		c.column(arr.ListValues())
	case *array.Struct:
		for i := range arr.NumField() {
			c.column(arr.Field(i))
		}
	}
}

func boolStr(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// coverageWant lists the shapes TestCoverage requires.
var coverageWant = []string{
	"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
	"FLOAT32", "FLOAT64", "BOOL", "STRING", "BINARY", "TIMESTAMP", "DATE32",
	"NULL", "LIST", "STRUCT", "list<list>", "non-ASCII name",
	"timestamp s tz=no", "timestamp ms tz=no", "timestamp us tz=no", "timestamp ns tz=no",
	"timestamp s tz=yes", "timestamp ms tz=yes", "timestamp us tz=yes", "timestamp ns tz=yes",
	"all-null column", "NaN", "-Inf", "-0", "empty string", "multi-byte string",
	"empty list", "null list", "no batches", "0-row batch",
}

func (c coverage) missing() []string {
	var out []string
	for _, k := range coverageWant {
		if !c[k] {
			out = append(out, k)
		}
	}
	return out
}

// TestCoverage guards against the generator silently losing reach: every
// shape in coverageWant must show up. A few rounds of rapid.Check are
// allowed so that the test does not flake at low -rapid.checks.
func TestCoverage(t *testing.T) {
	c := coverage{}
	for round := 0; round < 5 && len(c.missing()) > 0; round++ {
		rapid.Check(t, func(t *rapid.T) { c.observe(t) })
	}
	for _, k := range c.missing() {
		t.Errorf("never generated: %s", k)
	}
}

func (c coverage) observe(t *rapid.T) {
	schema := arrowgen.Schema(t, maxFields)
	c.schema(schema.Fields())
	batches := arrowgen.Batches(t, memory.DefaultAllocator, schema, maxBatches, maxRows)
	defer releaseAll(batches)
	if len(batches) == 0 {
		c["no batches"] = true
	}
	for _, rec := range batches {
		if rec.NumRows() == 0 {
			c["0-row batch"] = true
		}
		for _, col := range rec.Columns() {
			c.column(col)
		}
	}
}
