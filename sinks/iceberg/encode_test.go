package iceberg

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sinks"
)

// ingestMs is 2026-08-01T12:00:00Z, day 20666.
const (
	ingestMs  = 1785585600000
	ingestDay = 20666
)

// encSlice is one slice of a test job: its rows as arrow-go's JSON
// reader takes them, the first skip of them cut off (so the batch's
// arrays, nested ones too, start at an offset), and the CDC rows of the
// rest (nil: a plain slice).
type encSlice struct {
	rows string
	skip int64
	cdc  []segment.CDCRow
}

// encJob builds a job of schema, one batch per slice, read by arrow-go's
// JSON reader; the batches are released at the end of the test.
func encJob(t *testing.T, sc *arrow.Schema, parts ...encSlice) *engine.Job {
	t.Helper()
	job := &engine.Job{
		ID: "fixture-0123456789abcdef0123456789abcdef", Content: "c0ffeec0ffeec0ffeec0ffeec0ffee00",
		Origin:  segment.Origin{WAL: segment.WALID{0x1c, 0xeb}, Pipeline: "fixture"},
		SinkRef: "lake", Namespace: "events",
		Segment: engine.SnapshotID{Epoch: 1, Seq: 7}, SegmentCreatedUnixMs: ingestMs,
	}
	for i, p := range parts {
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(p.rows))
		if err != nil {
			t.Fatalf("slice %d: %v", i, err)
		}
		if p.skip > 0 {
			cut := rec.NewSlice(p.skip, rec.NumRows())
			rec.Release()
			rec = cut
		}
		t.Cleanup(rec.Release)
		s := &segment.Slice{Entry: segment.IndexEntry{Ordinal: segment.SliceOrdinal(2 * i), Rows: rec.NumRows()}, Schema: sc,
			Batches: []arrow.RecordBatch{rec}}
		if p.cdc != nil {
			s.Sidecar = &segment.Sidecar{Rows: p.cdc}
		}
		job.Slices = append(job.Slices, s)
	}
	return job
}

func nullable(fields ...arrow.Field) *arrow.Schema {
	for i := range fields {
		fields[i].Nullable = true
	}
	return arrow.NewSchema(fields, nil)
}

func elemList(t arrow.DataType) arrow.DataType {
	return arrow.ListOfField(arrow.Field{Name: "element", Type: t, Nullable: true})
}

// wideSchema has a column of every Arrow type a source gives that the
// sink must cast, nested ones included.
var wideSchema = nullable(
	arrow.Field{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
	arrow.Field{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
	arrow.Field{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
	arrow.Field{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "f16", Type: arrow.FixedWidthTypes.Float16},
	arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
	arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	arrow.Field{Name: "ls", Type: arrow.BinaryTypes.LargeString},
	arrow.Field{Name: "lb", Type: arrow.BinaryTypes.LargeBinary},
	arrow.Field{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 2}},
	arrow.Field{Name: "d64", Type: arrow.FixedWidthTypes.Date64},
	arrow.Field{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms},
	arrow.Field{Name: "t64", Type: arrow.FixedWidthTypes.Time64ns},
	arrow.Field{Name: "tsns", Type: arrow.FixedWidthTypes.Timestamp_ns},
	arrow.Field{Name: "tss", Type: &arrow.TimestampType{Unit: arrow.Second}},
	arrow.Field{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
	arrow.Field{Name: "st", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true})},
	arrow.Field{Name: "ll", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int16)},
	arrow.Field{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)},
)

// wideJob is a CDC job of wideSchema: a slice with a sidecar whose batch
// starts at an offset (its first row cut off), then a plain slice. The
// order tokens are beyond 2^63; the timestamps in ns and the time64 in ns
// are not whole microseconds, and two are before 1970.
func wideJob(t *testing.T) *engine.Job {
	return encJob(t, wideSchema,
		encSlice{skip: 1, rows: `[
			{"i8": 99, "u16": 9, "u32": 9, "u64": 9, "f16": 9, "f32": 9, "ok": false, "ls": "cut", "lb": "AAA=", "fsb": "AAA=",
			 "d64": 0, "t32": 0, "t64": 0, "tsns": 0, "tss": 0, "dec": "9.99", "st": {"a": 99, "b": ["cut"]}, "ll": [99], "m": [{"key": "cut", "value": 99}]},
			{"i8": -3, "u16": 65535, "u32": 4294967295, "u64": 18446744073709551615, "f16": 1.5, "f32": 2.25, "ok": true, "ls": "x", "lb": "AAE=", "fsb": "AAE=",
			 "d64": -1, "t32": 1500, "t64": 1999, "tsns": -1, "tss": 1, "dec": "12.34", "st": {"a": 1, "b": ["p", null]}, "ll": [1, 2], "m": [{"key": "k", "value": 5}]},
			{"i8": null, "u16": null, "u32": null, "u64": null, "f16": null, "f32": null, "ok": null, "ls": null, "lb": null, "fsb": null,
			 "d64": null, "t32": null, "t64": null, "tsns": null, "tss": null, "dec": null, "st": {"a": null, "b": null}, "ll": [], "m": []}
		]`, cdc: []segment.CDCRow{
			{Kind: segment.Insert, Identity: []byte("k1"), Order: 1<<63 + 5},
			{Kind: segment.Delete, Identity: []byte("k2"), Order: math.MaxUint64},
		}},
		encSlice{rows: `[
			{"i8": null, "u16": null, "u32": null, "u64": null, "f16": null, "f32": null, "ok": null, "ls": null, "lb": null, "fsb": null,
			 "d64": null, "t32": null, "t64": null, "tsns": null, "tss": null, "dec": null, "st": null, "ll": null, "m": null},
			{"i8": 127, "u16": 0, "u32": 0, "u64": 9223372036854775813, "f16": -0.5, "f32": -0.125, "ok": false, "ls": "", "lb": "", "fsb": "//8=",
			 "d64": 259200005, "t32": 86399999, "t64": 86399999999999, "tsns": 1785585600123456789, "tss": -1, "dec": "-0.01",
			 "st": {"a": -7, "b": []}, "ll": [null, 3], "m": [{"key": "a", "value": null}, {"key": "b", "value": -1}]}
		]`})
}

// wideWant is what wideJob's file reads back as: every column in the
// table's Arrow type, values cast (ns rounded down to µs, date64 to its
// day, uint64 as decimal(20,0)), then the CDC columns and the ingest time.
var wideWant = struct {
	schema *arrow.Schema
	rows   string
}{
	schema: nullable(
		arrow.Field{Name: "i8", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "u16", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "u32", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "u64", Type: &arrow.Decimal128Type{Precision: 20, Scale: 0}},
		arrow.Field{Name: "f16", Type: arrow.PrimitiveTypes.Float32},
		arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: "ls", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "lb", Type: arrow.BinaryTypes.Binary},
		arrow.Field{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 2}},
		arrow.Field{Name: "d64", Type: arrow.FixedWidthTypes.Date32},
		arrow.Field{Name: "t32", Type: arrow.FixedWidthTypes.Time64us},
		arrow.Field{Name: "t64", Type: arrow.FixedWidthTypes.Time64us},
		arrow.Field{Name: "tsns", Type: arrow.FixedWidthTypes.Timestamp_us},
		arrow.Field{Name: "tss", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		arrow.Field{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
		arrow.Field{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: elemList(arrow.BinaryTypes.String), Nullable: true})},
		arrow.Field{Name: "ll", Type: elemList(arrow.PrimitiveTypes.Int32)},
		arrow.Field{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)},
		arrow.Field{Name: "_cdc_op", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "_cdc_identity", Type: arrow.BinaryTypes.Binary},
		arrow.Field{Name: "_cdc_order", Type: &arrow.Decimal128Type{Precision: 20, Scale: 0}},
		arrow.Field{Name: "_ingested_at", Type: arrow.FixedWidthTypes.Timestamp_us},
	),
	rows: `[
		{"i8": -3, "u16": 65535, "u32": 4294967295, "u64": "18446744073709551615", "f16": 1.5, "f32": 2.25, "ok": true, "ls": "x", "lb": "AAE=", "fsb": "AAE=",
		 "d64": -1, "t32": 1500000, "t64": 1, "tsns": -1, "tss": 1000000, "dec": "12.34", "st": {"a": 1, "b": ["p", null]}, "ll": [1, 2], "m": [{"key": "k", "value": 5}],
		 "_cdc_op": "insert", "_cdc_identity": "azE=", "_cdc_order": "9223372036854775813", "_ingested_at": 1785585600000000},
		{"i8": null, "u16": null, "u32": null, "u64": null, "f16": null, "f32": null, "ok": null, "ls": null, "lb": null, "fsb": null,
		 "d64": null, "t32": null, "t64": null, "tsns": null, "tss": null, "dec": null, "st": {"a": null, "b": null}, "ll": [], "m": [],
		 "_cdc_op": "delete", "_cdc_identity": "azI=", "_cdc_order": "18446744073709551615", "_ingested_at": 1785585600000000},
		{"i8": null, "u16": null, "u32": null, "u64": null, "f16": null, "f32": null, "ok": null, "ls": null, "lb": null, "fsb": null,
		 "d64": null, "t32": null, "t64": null, "tsns": null, "tss": null, "dec": null, "st": null, "ll": null, "m": null,
		 "_cdc_op": null, "_cdc_identity": null, "_cdc_order": null, "_ingested_at": 1785585600000000},
		{"i8": 127, "u16": 0, "u32": 0, "u64": "9223372036854775813", "f16": -0.5, "f32": -0.125, "ok": false, "ls": "", "lb": "", "fsb": "//8=",
		 "d64": 3, "t32": 86399999000, "t64": 86399999999, "tsns": 1785585600123456, "tss": -1000000, "dec": "-0.01",
		 "st": {"a": -7, "b": []}, "ll": [null, 3], "m": [{"key": "a", "value": null}, {"key": "b", "value": -1}],
		 "_cdc_op": null, "_cdc_identity": null, "_cdc_order": null, "_ingested_at": 1785585600000000}
	]`,
}

// newTable is the table the sink would create for job under spec.
func newTable(t *testing.T, job *engine.Job, spec PartitionSpec) *icego.Schema {
	t.Helper()
	src, err := sinks.FileSchema(job)
	if err != nil {
		t.Fatal(err)
	}
	table, err := TableSchema(src, spec)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

var ingestSpec = PartitionSpec{SourceColumn: PartitionDefault}

// readBack reads a data file with arrow-go's pqarrow reader: one record.
func readBack(t *testing.T, body []byte) arrow.RecordBatch {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	rd := array.NewTableReader(tbl, tbl.NumRows()+1)
	defer rd.Release()
	if !rd.Next() {
		return array.NewRecordBatch(tbl.Schema(), nil, 0)
	}
	rec := rd.RecordBatch()
	rec.Retain()
	return rec
}

// checkRows compares got with want (JSON rows of schema): columns by
// name and Arrow type (field metadata aside), and values row for row.
func checkRows(t *testing.T, got arrow.RecordBatch, sc *arrow.Schema, rows string) {
	t.Helper()
	want, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	if got.NumCols() != want.NumCols() || got.NumRows() != want.NumRows() {
		t.Fatalf("%d columns, %d rows; want %d, %d:\n%v", got.NumCols(), got.NumRows(), want.NumCols(), want.NumRows(), got.Schema())
	}
	for i, w := range sc.Fields() {
		g := got.Schema().Field(i)
		if g.Name != w.Name || !arrow.TypeEqual(g.Type, w.Type) {
			t.Errorf("column %d is %s %s, want %s %s", i, g.Name, g.Type, w.Name, w.Type)
			continue
		}
		if !array.Equal(got.Column(i), want.Column(i)) {
			t.Errorf("column %s:\n got %v\nwant %v", w.Name, got.Column(i), want.Column(i))
		}
	}
}

// parquetIDs are the field ids of a file's Parquet schema by Iceberg
// name: "st.a", "st.b.element", "m.key", "m.value".
func parquetIDs(t *testing.T, body []byte) map[string]int {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	out := make(map[string]int)
	root := rdr.MetaData().Schema.Root()
	for i := range root.NumFields() {
		walkIDs(root.Field(i), root.Field(i).Name(), out)
	}
	return out
}

func walkIDs(n schema.Node, path string, out map[string]int) {
	out[path] = int(n.FieldID())
	g, ok := n.(*schema.GroupNode)
	if !ok {
		return
	}
	switch n.LogicalType().(type) {
	case schema.ListLogicalType:
		walkIDs(g.Field(0).(*schema.GroupNode).Field(0), path+".element", out)
	case schema.MapLogicalType:
		kv := g.Field(0).(*schema.GroupNode)
		walkIDs(kv.Field(0), path+".key", out)
		walkIDs(kv.Field(1), path+".value", out)
	default:
		for i := range g.NumFields() {
			walkIDs(g.Field(i), path+"."+g.Field(i).Name(), out)
		}
	}
}

// checkIDs checks that every field of the file, nested ones too, has the
// table's id of its name.
func checkIDs(t *testing.T, body []byte, table *icego.Schema, want int) {
	t.Helper()
	ids, err := icego.IndexByName(table)
	if err != nil {
		t.Fatal(err)
	}
	got := parquetIDs(t, body)
	if len(got) != want {
		t.Errorf("%d fields in the file, want %d: %v", len(got), want, got)
	}
	for name, id := range got {
		if ids[name] != id || id <= 0 {
			t.Errorf("field %s has id %d, the table's is %d", name, id, ids[name])
		}
	}
}

// checkJobMetadata checks that the file's key-value metadata ends with
// the job's entries, as the Parquet lake's files do.
func checkJobMetadata(t *testing.T, body []byte, job *engine.Job) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	kv := rdr.MetaData().KeyValueMetadata()
	want := sinks.JobMetadata(job)
	if len(kv) < len(want) {
		t.Fatalf("%d key-value entries, want at least %d", len(kv), len(want))
	}
	for i, e := range want {
		got := kv[len(kv)-len(want)+i]
		if got.Key != e[0] || got.GetValue() != e[1] {
			t.Fatalf("entry %s = %q, want %s = %q", got.Key, got.GetValue(), e[0], e[1])
		}
	}
}

// The default spec: one file of the job's columns cast to the table's
// types, the CDC columns, and the ingest time; field ids by name down to
// map values; the job's metadata; counts per leaf column.
func TestEncodeFilesIngestedAt(t *testing.T) {
	job := wideJob(t)
	table := newTable(t, job, ingestSpec)
	files, err := EncodeFiles(job, table, ingestSpec, ingestMs)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Day != ingestDay || files[0].Rows != 4 {
		t.Fatalf("%d files, the first of day %d with %d rows; want one of day %d with 4", len(files), files[0].Day, files[0].Rows, ingestDay)
	}
	got := readBack(t, files[0].Body)
	defer got.Release()
	checkRows(t, got, wideWant.schema, wideWant.rows)
	// 23 columns; st.a, st.b, st.b.element, ll.element, m.key, m.value.
	checkIDs(t, files[0].Body, table, 23+6)
	checkJobMetadata(t, files[0].Body, job)
	checkStats(t, files[0], table, got)
}

// checkStats checks a file's counts: for each top-level primitive column
// every row a value and its nulls those read back; a nested leaf counted.
func checkStats(t *testing.T, f EncodedFile, table *icego.Schema, got arrow.RecordBatch) {
	t.Helper()
	for i, fld := range got.Schema().Fields() {
		col, _ := table.FindFieldByName(fld.Name)
		if _, nested := col.Type.(icego.NestedType); nested {
			continue
		}
		want := ColumnStats{Values: got.NumRows(), Nulls: int64(got.Column(i).NullN())}
		if f.Columns[col.ID] != want {
			t.Errorf("column %s (id %d): counts %+v, want %+v", fld.Name, col.ID, f.Columns[col.ID], want)
		}
	}
	if leaf, ok := table.FindFieldByName("st.a"); ok { // wideJob's: a null in a row, a null struct in another
		if c, ok := f.Columns[leaf.ID]; !ok || c != (ColumnStats{Values: 4, Nulls: 2}) {
			t.Errorf("st.a: counts %+v (known %t), want 4 values, 2 nulls", c, ok)
		}
	}
}

// A table wider than the job (long for int8, double for float32, more
// digits and scale for a decimal, decimal(38,0) for uint64) gets the
// job's values cast to its types.
func TestEncodeFilesIntoWiderColumns(t *testing.T) {
	job := wideJob(t)
	fields := newTable(t, job, ingestSpec).Fields()
	wider := map[string]icego.Type{
		"i8":  icego.PrimitiveTypes.Int64,
		"f32": icego.PrimitiveTypes.Float64,
		"dec": icego.DecimalTypeOf(12, 4),
		"u64": icego.DecimalTypeOf(38, 0),
		"u32": icego.DecimalTypeOf(19, 0),
	}
	for i, f := range fields {
		if w, ok := wider[f.Name]; ok {
			fields[i].Type = w
		}
	}
	table := icego.NewSchema(1, fields...)
	if ch, err := Reconcile(table, wideSchemaFile(t, job), "lake.events"); err != nil || !ch.Empty() {
		t.Fatalf("Reconcile: %+v, %v; want the wider table to hold the job as it is", ch, err)
	}
	files, err := EncodeFiles(job, table, ingestSpec, ingestMs)
	if err != nil {
		t.Fatal(err)
	}
	got := readBack(t, files[0].Body)
	defer got.Release()
	sc := nullable(
		arrow.Field{Name: "i8", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "u32", Type: &arrow.Decimal128Type{Precision: 19, Scale: 0}},
		arrow.Field{Name: "u64", Type: &arrow.Decimal128Type{Precision: 38, Scale: 0}},
		arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float64},
		arrow.Field{Name: "dec", Type: &arrow.Decimal128Type{Precision: 12, Scale: 4}})
	cols := make([]arrow.Array, 0, sc.NumFields())
	for _, f := range sc.Fields() {
		cols = append(cols, got.Column(got.Schema().FieldIndices(f.Name)[0]))
	}
	some := array.NewRecordBatch(arrow.NewSchema(slices.Collect(func(yield func(arrow.Field) bool) {
		for _, c := range sc.Fields() {
			if !yield(got.Schema().Field(got.Schema().FieldIndices(c.Name)[0])) {
				return
			}
		}
	}), nil), cols, got.NumRows())
	defer some.Release()
	checkRows(t, some, sc, `[
		{"i8": -3, "u32": "4294967295", "u64": "18446744073709551615", "f32": 2.25, "dec": "12.3400"},
		{"i8": null, "u32": null, "u64": null, "f32": null, "dec": null},
		{"i8": null, "u32": null, "u64": null, "f32": null, "dec": null},
		{"i8": 127, "u32": "0", "u64": "9223372036854775813", "f32": -0.125, "dec": "-0.0100"}
	]`)
}

func wideSchemaFile(t *testing.T, job *engine.Job) *arrow.Schema {
	t.Helper()
	src, err := sinks.FileSchema(job)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// The same job and table give the same bytes, also from another copy of
// the job, and for the per-day split.
func TestEncodeFilesDeterministic(t *testing.T) {
	job := wideJob(t)
	table := newTable(t, job, ingestSpec)
	first, err := EncodeFiles(job, table, ingestSpec, ingestMs)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := EncodeFiles(job, table, ingestSpec, ingestMs)
	other, _ := EncodeFiles(wideJob(t), newTable(t, job, ingestSpec), ingestSpec, ingestMs)
	for _, fs := range [][]EncodedFile{again, other} {
		if len(fs) != 1 || !bytes.Equal(fs[0].Body, first[0].Body) {
			t.Fatal("the same job encoded to different bytes")
		}
	}
	byDay := PartitionSpec{SourceColumn: "at"}
	days1, err := EncodeFiles(dayJob(t), newTable(t, dayJob(t), byDay), byDay, ingestMs)
	if err != nil {
		t.Fatal(err)
	}
	days2, _ := EncodeFiles(dayJob(t), newTable(t, dayJob(t), byDay), byDay, ingestMs)
	if len(days1) != len(days2) {
		t.Fatal("the same job split into other days")
	}
	for i := range days1 {
		if !bytes.Equal(days1[i].Body, days2[i].Body) {
			t.Fatalf("day %d encoded to different bytes", days1[i].Day)
		}
	}
}

var daySchema = nullable(
	arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	arrow.Field{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_ms},
	arrow.Field{Name: "note", Type: arrow.BinaryTypes.LargeString},
)

// dayJob's rows fall on three days, out of order: day 20666 (ids 1, 4,
// 6: two runs in the first batch), 20667 (2, 5) and -1 (3, a millisecond
// before 1970). Its second slice is CDC.
func dayJob(t *testing.T) *engine.Job {
	return encJob(t, daySchema,
		encSlice{rows: `[
			{"id": 1, "at": 1785546000000, "note": "a"},
			{"id": 2, "at": 1785628800000, "note": null},
			{"id": 3, "at": -1, "note": "c"},
			{"id": 4, "at": 1785542400000, "note": "d"}
		]`},
		encSlice{rows: `[
			{"id": 5, "at": 1785715199999, "note": "e"},
			{"id": 6, "at": 1785628799999, "note": "f"}
		]`, cdc: []segment.CDCRow{
			{Kind: segment.Insert, Identity: []byte("5"), Order: 1 << 63},
			{Kind: segment.Update, Identity: []byte("6"), Order: 1<<64 - 2},
		}})
}

// A spec on a timestamp column of the job: one file per day, ascending,
// each with that day's rows in job order, the timestamps in µs; no
// ingest time.
func TestEncodeFilesPerDay(t *testing.T) {
	spec := PartitionSpec{SourceColumn: "at"}
	job := dayJob(t)
	table := newTable(t, job, spec)
	if _, ok := table.FindFieldByName(PartitionDefault); ok {
		t.Fatalf("table %v has %s, partitioned by at", table, PartitionDefault)
	}
	files, err := EncodeFiles(job, table, spec, ingestMs)
	if err != nil {
		t.Fatal(err)
	}
	sc := nullable(
		arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us},
		arrow.Field{Name: "note", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "_cdc_op", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "_cdc_identity", Type: arrow.BinaryTypes.Binary},
		arrow.Field{Name: "_cdc_order", Type: &arrow.Decimal128Type{Precision: 20, Scale: 0}},
	)
	want := []struct {
		day  int32
		rows string
	}{
		{-1, `[{"id": 3, "at": -1000, "note": "c"}]`},
		{20666, `[{"id": 1, "at": 1785546000000000, "note": "a"}, {"id": 4, "at": 1785542400000000, "note": "d"},
			{"id": 6, "at": 1785628799999000, "note": "f", "_cdc_op": "update", "_cdc_identity": "Ng==", "_cdc_order": "18446744073709551614"}]`},
		{20667, `[{"id": 2, "at": 1785628800000000, "note": null},
			{"id": 5, "at": 1785715199999000, "note": "e", "_cdc_op": "insert", "_cdc_identity": "NQ==", "_cdc_order": "9223372036854775808"}]`},
	}
	if len(files) != len(want) {
		t.Fatalf("%d files, want %d", len(files), len(want))
	}
	for i, w := range want {
		f := files[i]
		got := readBack(t, f.Body)
		defer got.Release()
		if f.Day != w.day || f.Rows != got.NumRows() {
			t.Fatalf("file %d: day %d, %d rows (%d read); want day %d", i, f.Day, f.Rows, got.NumRows(), w.day)
		}
		checkRows(t, got, sc, w.rows)
		checkIDs(t, f.Body, table, 6)
		checkJobMetadata(t, f.Body, job)
		checkStats(t, f, table, got)
	}
}

// A null in the partition column, or a job without the column, refuses
// the job: a row without a day has no partition.
func TestEncodeFilesRefusesRowsWithoutADay(t *testing.T) {
	spec := PartitionSpec{SourceColumn: "at"}
	job := encJob(t, daySchema, encSlice{rows: `[{"id": 1, "at": 0}, {"id": 2, "at": null}]`})
	_, err := EncodeFiles(job, newTable(t, job, spec), spec, ingestMs)
	wantRefusal(t, err, engine.ErrCannotApply, `"at"`, "row 1", "null")

	other := PartitionSpec{SourceColumn: "event_time"}
	_, err = EncodeFiles(job, newTable(t, job, other), other, ingestMs)
	wantRefusal(t, err, engine.ErrCannotApply, `"event_time"`, "no such column")
}

// A table that lacks a column of the job, or is narrower than it, was
// not reconciled yet: an ordinary error, to retry. One that cannot hold
// it refuses the job.
func TestEncodeFilesNeedsAReconciledTable(t *testing.T) {
	job := dayJob(t)
	cases := []struct {
		name    string
		table   *icego.Schema
		refused bool
		words   []string
	}{
		{"a column missing", tableOf(t, col("id", icego.PrimitiveTypes.Int64), col("at", icego.PrimitiveTypes.TimestampTz)), false,
			[]string{`"note"`, "evolved first"}},
		{"a column narrower", tableOf(t, col("id", icego.PrimitiveTypes.Int32), col("at", icego.PrimitiveTypes.TimestampTz),
			col("note", icego.PrimitiveTypes.String), col("_cdc_op", icego.PrimitiveTypes.String),
			col("_cdc_identity", icego.PrimitiveTypes.Binary), col("_cdc_order", icego.DecimalTypeOf(20, 0))), false,
			[]string{`"id"`, "narrower", "evolved first"}},
		{"a column of another type", tableOf(t, col("id", icego.PrimitiveTypes.String), col("at", icego.PrimitiveTypes.TimestampTz),
			col("note", icego.PrimitiveTypes.String), col("_cdc_op", icego.PrimitiveTypes.String),
			col("_cdc_identity", icego.PrimitiveTypes.Binary), col("_cdc_order", icego.DecimalTypeOf(20, 0))), true,
			[]string{`"id"`, "string", "long"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeFiles(job, tc.table, PartitionSpec{SourceColumn: "at"}, ingestMs)
			if tc.refused {
				wantRefusal(t, err, ErrCannotHold, tc.words...)
				return
			}
			if err == nil || errors.Is(err, engine.ErrCannotApply) {
				t.Fatalf("err = %v, want an ordinary error", err)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %q, want it to name %q", err, w)
				}
			}
		})
	}
}

// A job without rows has no file to write.
func TestEncodeFilesNoRows(t *testing.T) {
	job := encJob(t, daySchema, encSlice{rows: `[]`})
	files, err := EncodeFiles(job, newTable(t, job, ingestSpec), ingestSpec, ingestMs)
	if err != nil || len(files) != 0 {
		t.Fatalf("%d files, %v; want none", len(files), err)
	}
}
