package sinks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pgo "github.com/parquet-go/parquet-go"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// readArrow reads a Parquet file back with arrow-go's pqarrow reader: one
// record of every column concatenated.
func readArrow(t tb, b []byte) arrow.RecordBatch {
	t.Helper()
	mem := memory.DefaultAllocator
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("pqarrow: open: %v", err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatalf("pqarrow: file reader: %v", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("pqarrow: read: %v", err)
	}
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		cols[i] = concat(t, tbl.Column(int(i)).Data().Chunks(), tbl.Schema().Field(i).Type)
		defer cols[i].Release()
	}
	return array.NewRecordBatch(tbl.Schema(), cols, tbl.NumRows())
}

func concat(t tb, chunks []arrow.Array, dt arrow.DataType) arrow.Array {
	t.Helper()
	if len(chunks) == 0 {
		b := array.NewBuilder(memory.DefaultAllocator, dt)
		defer b.Release()
		return b.NewArray()
	}
	a, err := array.Concatenate(chunks, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("concatenate: %v", err)
	}
	return a
}

// wantRecord is what job's file must read back as in arrow: the slices'
// columns concatenated, then for CDC the columns rows describe (built
// here, independently of the encoder).
func wantRecord(t tb, job *engine.Job, cdc []*segment.CDCRow) arrow.RecordBatch {
	t.Helper()
	schema := job.Slices[0].Schema
	var batches []arrow.RecordBatch
	for _, s := range job.Slices {
		batches = append(batches, s.Batches...)
	}
	var cols []arrow.Array
	fields := slices.Clone(schema.Fields())
	for i, f := range schema.Fields() {
		var chunks []arrow.Array
		for _, b := range batches {
			chunks = append(chunks, b.Column(i))
		}
		cols = append(cols, concat(t, chunks, f.Type))
	}
	if cdc != nil {
		mem := memory.DefaultAllocator
		op, id, order := array.NewStringBuilder(mem), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), array.NewUint64Builder(mem)
		for _, r := range cdc {
			if r == nil {
				op.AppendNull()
				id.AppendNull()
				order.AppendNull()
				continue
			}
			op.Append(map[segment.MutationKind]string{segment.Insert: "insert", segment.Update: "update", segment.Delete: "delete"}[r.Kind])
			id.Append(r.Identity)
			order.Append(r.Order)
		}
		cols = append(cols, op.NewArray(), id.NewArray(), order.NewArray())
		op.Release()
		id.Release()
		order.Release()
		fields = append(fields, arrow.Field{Name: "_cdc_op", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "_cdc_identity", Type: arrow.BinaryTypes.Binary, Nullable: true},
			arrow.Field{Name: "_cdc_order", Type: arrow.PrimitiveTypes.Uint64, Nullable: true})
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, job.Rows())
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// cdcRowsOf is the CDC metadata of each row of f (nil entries for rows of
// plain slices), or nil if f's file has no CDC columns.
func cdcRowsOf(f fixture) []*segment.CDCRow {
	if !f.cdc {
		return nil
	}
	out := make([]*segment.CDCRow, len(f.rows))
	for i, r := range f.rows {
		out[i] = r.cdc
	}
	return out
}

// checkArrow reads b with pqarrow and compares schema and rows with what
// job holds.
func checkArrow(t testing.TB, b []byte, job *engine.Job, cdc []*segment.CDCRow) {
	t.Helper()
	got := readArrow(t, b)
	defer got.Release()
	want := wantRecord(t, job, cdc)
	defer want.Release()
	// The file stores list elements as "element" (pqarrow normalizes the
	// name for Parquet's LIST layout); compare schemas with that in mind.
	if g, w := normalizeLists(got.Schema()), normalizeLists(want.Schema()); !g.Equal(w) {
		t.Fatalf("schema read back:\n%v\nwant:\n%v", got.Schema(), want.Schema())
	}
	if got.NumRows() != want.NumRows() {
		t.Fatalf("read back %d rows, want %d", got.NumRows(), want.NumRows())
	}
	for i := range want.NumCols() {
		if !array.Equal(got.Column(int(i)), want.Column(int(i))) && !listEqual(got.Column(int(i)), want.Column(int(i))) {
			t.Fatalf("column %s differs:\ngot  %v\nwant %v", want.Schema().Field(int(i)).Name, got.Column(int(i)), want.Column(int(i)))
		}
	}
}

// normalizeLists renames list element fields "element", as Parquet's
// three-level LIST layout (and pqarrow's stored schema) does, and drops
// field metadata (the reader adds PARQUET:field_id).
func normalizeLists(s *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		f.Metadata = arrow.Metadata{}
		if lt, ok := f.Type.(*arrow.ListType); ok {
			elem := lt.ElemField()
			elem.Name, elem.Metadata = "element", arrow.Metadata{}
			f.Type = arrow.ListOfField(elem)
		}
		fields[i] = f
	}
	return arrow.NewSchema(fields, nil)
}

// listEqual compares two list arrays by value whatever their element
// field's name.
func listEqual(a, b arrow.Array) bool {
	la, ok1 := a.(*array.List)
	lb, ok2 := b.(*array.List)
	if !ok1 || !ok2 || la.Len() != lb.Len() {
		return false
	}
	for i := range la.Len() {
		if la.IsNull(i) != lb.IsNull(i) {
			return false
		}
		if la.IsNull(i) {
			continue
		}
		sa, ea := la.ValueOffsets(i)
		sb, eb := lb.ValueOffsets(i)
		if !array.SliceEqual(la.ListValues(), sa, ea, lb.ListValues(), sb, eb) {
			return false
		}
	}
	return true
}

func TestEncodeParquetReadsBackWithPqarrow(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec jobSpec
	}{
		{"plain", plainSpec},
		{"cdc", cdcSpec},
		{"cdc and plain slices", mixedSpec},
		{"one empty batch", jobSpec{namespace: "e", seq: 3, slices: [][]int{{0}, {2}}}},
		{"no rows", jobSpec{namespace: "e", seq: 4, cdc: true, slices: [][]int{{0}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.spec)
			b, err := EncodeParquet(f.job)
			if err != nil {
				t.Fatal(err)
			}
			checkArrow(t, b, f.job, cdcRowsOf(f))
			checkFileMetadata(t, b, f.job)
		})
	}
}

// checkFileMetadata checks the writer properties that reach the file:
// batches coalesced into one row group, zstd everywhere, statistics.
func checkFileMetadata(t *testing.T, b []byte, job *engine.Job) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	if md.NumRows != job.Rows() {
		t.Fatalf("metadata says %d rows, want %d", md.NumRows, job.Rows())
	}
	if md.NumRowGroups() > 1 {
		t.Fatalf("%d row groups, want one (batches coalesced)", md.NumRowGroups())
	}
	if md.KeyValueMetadata().FindValue("ARROW:schema") == nil {
		t.Fatal("no ARROW:schema in the file metadata")
	}
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Compression() != compress.Codecs.Zstd {
				t.Fatalf("column %d: compression %v, want zstd", c, cc.Compression())
			}
			if ok, _ := cc.StatsSet(); !ok && rg.NumRows() > 0 {
				t.Fatalf("column %d: no statistics", c)
			}
		}
	}
}

// readParquetGo reads every row of b with github.com/parquet-go/parquet-go,
// an implementation independent of the writer, as generic maps.
func readParquetGo(t testing.TB, b []byte) ([]map[string]any, *pgo.File) {
	t.Helper()
	f, err := pgo.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("parquet-go: open: %v", err)
	}
	r := pgo.NewGenericReader[any](bytes.NewReader(b))
	defer r.Close()
	var out []map[string]any
	buf := make([]any, 64)
	for {
		n, err := r.Read(buf)
		for _, row := range buf[:n] {
			m, ok := row.(map[string]any)
			if !ok {
				t.Fatalf("parquet-go: row of type %T", row)
			}
			out = append(out, m)
		}
		if err == io.EOF {
			return out, f
		}
		if err != nil {
			t.Fatalf("parquet-go: read: %v", err)
		}
	}
}

// checkParquetGo reads b with parquet-go and compares every value with the
// fixture's rows.
func checkParquetGo(t testing.TB, b []byte, rows []fixtureRow, cdc bool) {
	t.Helper()
	got, f := readParquetGo(t, b)
	if f.NumRows() != int64(len(rows)) || len(got) != len(rows) {
		t.Fatalf("parquet-go: %d rows (%d in metadata), want %d", len(got), f.NumRows(), len(rows))
	}
	wantCols := []string{"id", "name", "score", "at", "tags"}
	if cdc {
		wantCols = append(wantCols, "_cdc_op", "_cdc_identity", "_cdc_order")
	}
	var cols []string
	for _, field := range f.Schema().Fields() {
		cols = append(cols, field.Name())
	}
	if !slices.Equal(cols, wantCols) {
		t.Fatalf("parquet-go: columns %q, want %q", cols, wantCols)
	}
	// The generic reader hands timestamps over as their int64; the logical
	// type says what they mean.
	at, _ := f.Schema().Lookup("at")
	ts := at.Node.Type().LogicalType()
	if ts == nil || ts.String() != "TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)" {
		t.Fatalf("parquet-go: column at has logical type %v, want TIMESTAMP(MILLIS, UTC)", ts)
	}
	for i, want := range rows {
		if g, w := fmt.Sprint(normalizeRow(got[i])), fmt.Sprint(expectedRow(want, cdc)); g != w {
			t.Fatalf("parquet-go: row %d:\ngot  %s\nwant %s", i, g, w)
		}
	}
}

// expectedRow is a fixture row as parquet-go's generic reader returns it,
// after normalizeRow.
func expectedRow(r fixtureRow, cdc bool) map[string]any {
	m := map[string]any{"id": r.id, "name": nil, "score": nil,
		"at": r.atMs, "tags": nil}
	if r.name != nil {
		m["name"] = *r.name
	}
	if r.score != nil {
		m["score"] = *r.score
	}
	if r.tags != nil {
		tags := []any{}
		for _, v := range r.tags {
			tags = append(tags, v)
		}
		m["tags"] = tags
	}
	if cdc {
		m["_cdc_op"], m["_cdc_identity"], m["_cdc_order"] = nil, nil, nil
	}
	if cdc && r.cdc != nil {
		m["_cdc_op"] = r.cdc.Kind.String()
		m["_cdc_identity"] = string(r.cdc.Identity)
		m["_cdc_order"] = r.cdc.Order
	}
	return m
}

// normalizeRow maps parquet-go's generic values onto expectedRow's forms:
// byte slices as strings, lists unwrapped.
func normalizeRow(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = normalizeValue(v)
	}
	return out
}

func normalizeValue(v any) any {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case []any:
		out := []any{}
		for _, e := range v {
			out = append(out, normalizeValue(e))
		}
		return out
	case map[string]any:
		// The three-level LIST layout: {list: [{element: v}, …]}.
		if l, ok := v["list"]; ok && len(v) == 1 {
			out := []any{}
			items, _ := l.([]any)
			for _, it := range items {
				if e, ok := it.(map[string]any); ok {
					out = append(out, normalizeValue(e["element"]))
				} else {
					out = append(out, normalizeValue(it))
				}
			}
			return out
		}
		return normalizeRow(v)
	}
	return v
}

func TestEncodeParquetReadsBackWithParquetGo(t *testing.T) {
	for _, spec := range []jobSpec{plainSpec, cdcSpec, mixedSpec} {
		t.Run(spec.namespace, func(t *testing.T) {
			f := newFixture(t, spec)
			b, err := EncodeParquet(f.job)
			if err != nil {
				t.Fatal(err)
			}
			checkParquetGo(t, b, f.rows, spec.cdc)
		})
	}
}

// Same job ⇒ same bytes: twice in a row, from a second decode of the same
// segment (other allocations), and from goroutines at once (the production
// Executor runs work concurrently).
func TestEncodeParquetDeterministic(t *testing.T) {
	for _, spec := range []jobSpec{plainSpec, cdcSpec} {
		t.Run(spec.namespace, func(t *testing.T) {
			f := newFixture(t, spec)
			first, err := EncodeParquet(f.job)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := EncodeParquet(f.job)
			other, _ := EncodeParquet(newFixture(t, spec).job)
			if !bytes.Equal(first, again) || !bytes.Equal(first, other) {
				t.Fatal("the same job encoded to different bytes")
			}
			var wg sync.WaitGroup
			results := make([][]byte, 4)
			for i := range results {
				wg.Go(func() { results[i], _ = EncodeParquet(f.job) })
			}
			wg.Wait()
			for i, b := range results {
				if !bytes.Equal(first, b) {
					t.Fatalf("concurrent encode %d differs", i)
				}
			}
		})
	}
}

func TestEncodeParquetRefusesBadJobs(t *testing.T) {
	plain := newFixture(t, plainSpec)
	cdc := newFixture(t, cdcSpec)
	unsupported := unsupportedJob(t)
	conflict := conflictJob(t)
	short := &engine.Job{ID: "short", Namespace: "orders", Slices: []*segment.Slice{{
		Entry: cdc.job.Slices[0].Entry, Schema: cdc.job.Slices[0].Schema, Batches: cdc.job.Slices[0].Batches,
		Sidecar: &segment.Sidecar{Rows: cdc.job.Slices[0].Sidecar.Rows[1:]}}}}
	noise := newFixture(t, jobSpec{namespace: "n", seq: 9, slices: [][]int{{1}}})
	otherSchema := &segment.Slice{Entry: noise.job.Slices[0].Entry, Schema: noiseSchema}
	for _, tc := range []struct {
		name string
		job  *engine.Job
		want error
	}{
		{"no slices", &engine.Job{ID: "empty", Namespace: "events"}, ErrBadJob},
		{"CDC column conflict", conflict, ErrColumnConflict},
		{"sidecar short of the rows", short, ErrBadJob},
		{"two schemas", &engine.Job{ID: "two", Namespace: "events", Slices: []*segment.Slice{plain.job.Slices[0], otherSchema}}, ErrBadJob},
		{"a type Parquet cannot hold", unsupported, ErrUnencodable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeParquet(tc.job)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrUnencodable) {
				t.Fatalf("got %v, want %v (and ErrUnencodable)", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.job.ID) || !strings.Contains(err.Error(), tc.job.Namespace) {
				t.Fatalf("error %q does not name job %s and namespace %s", err, tc.job.ID, tc.job.Namespace)
			}
		})
	}
}

// conflictJob is a CDC job whose schema already has a _cdc_op column.
func conflictJob(t *testing.T) *engine.Job {
	schema := arrow.NewSchema([]arrow.Field{{Name: "_cdc_op", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("mine")
	rec := b.NewRecordBatch()
	t.Cleanup(rec.Release)
	s := &segment.Slice{Entry: segment.IndexEntry{Rows: 1}, Schema: schema, Batches: []arrow.RecordBatch{rec},
		Sidecar: &segment.Sidecar{Rows: []segment.CDCRow{{Kind: segment.Insert}}}}
	return &engine.Job{ID: "conflict", Namespace: "orders", Slices: []*segment.Slice{s}}
}

// unsupportedJob holds a run-end encoded column, which arrow-go's Parquet
// writer refuses.
func unsupportedJob(t *testing.T) *engine.Job {
	mem := memory.DefaultAllocator
	runEnds := array.NewInt32Builder(mem)
	defer runEnds.Release()
	runEnds.Append(2)
	values := array.NewInt64Builder(mem)
	defer values.Release()
	values.Append(7)
	re, v := runEnds.NewArray(), values.NewArray()
	defer re.Release()
	defer v.Release()
	col := array.NewRunEndEncodedArray(re, v, 2, 0)
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "r", Type: col.DataType()}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	t.Cleanup(rec.Release)
	s := &segment.Slice{Entry: segment.IndexEntry{Rows: 2}, Schema: schema, Batches: []arrow.RecordBatch{rec}}
	return &engine.Job{ID: "ree", Namespace: "runs", Slices: []*segment.Slice{s}}
}

// withFieldIDs is schema with field ids 1, 2, … on its columns, as the
// Iceberg sink's files carry them.
func withFieldIDs(schema *arrow.Schema) *arrow.Schema {
	fields := slices.Clone(schema.Fields())
	for i := range fields {
		fields[i].Metadata = arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{fmt.Sprint(i + 1)})
	}
	meta := schema.Metadata()
	return arrow.NewSchema(fields, &meta)
}

// EncodeWith writes each batch of the job, its CDC columns appended,
// through convert — here one that gives every column a field id, as the
// Iceberg sink does. The file holds the job's rows in order, the field
// ids, and the job's metadata, so judgeFile takes it for the job (it
// compares skipprd.content). Within one row group, it is byte for byte
// the Parquet lake's file but for the ids: the same writer.
func TestEncodeWithConverts(t *testing.T) {
	for _, spec := range []jobSpec{plainSpec, cdcSpec, mixedSpec} {
		t.Run(spec.namespace, func(t *testing.T) {
			f := newFixture(t, spec)
			src, err := FileSchema(f.job)
			if err != nil {
				t.Fatal(err)
			}
			dst := withFieldIDs(src)
			var batches int
			b, err := EncodeWith(f.job, dst, JobMetadata(f.job), func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
				if !rec.Schema().Equal(src) {
					t.Errorf("convert got a batch of %v, want %v", rec.Schema(), src)
				}
				batches++
				return array.NewRecordBatch(dst, rec.Columns(), rec.NumRows()), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := countBatches(f.job); batches != want {
				t.Fatalf("convert saw %d batches, the job has %d", batches, want)
			}
			checkArrow(t, b, f.job, cdcRowsOf(f))
			if v, err := judgeFile(f.job, "the file", footerOf(t, b)); err != nil || v != (verdict{}) {
				t.Fatalf("judgeFile = %+v, %v; want the file taken for the job", v, err)
			}
			checkFieldIDs(t, b, src.NumFields())
			lake, err := EncodeParquet(f.job)
			if err != nil {
				t.Fatal(err)
			}
			same, err := EncodeWith(f.job, src, JobMetadata(f.job), func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
				rec.Retain()
				return rec, nil
			})
			if err != nil || !bytes.Equal(same, lake) {
				t.Fatalf("EncodeWith without a change differs from EncodeParquet (err %v)", err)
			}
		})
	}
}

func countBatches(job *engine.Job) (n int) {
	for _, s := range job.Slices {
		n += len(s.Batches)
	}
	return n
}

// checkFieldIDs checks that the file's n top-level columns carry field
// ids 1..n in its Parquet schema.
func checkFieldIDs(t *testing.T, b []byte, n int) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	root := rdr.MetaData().Schema.Root()
	if root.NumFields() != n {
		t.Fatalf("%d columns, want %d", root.NumFields(), n)
	}
	for i := range n {
		if id := root.Field(i).FieldID(); id != int32(i+1) {
			t.Fatalf("column %s has field id %d, want %d", root.Field(i).Name(), id, i+1)
		}
	}
}

// A convert may drop rows (the Iceberg sink splits a job by day): the
// file holds what it returned. Its errors, and batches that are not of
// the file's columns, fail the encoding naming the job.
func TestEncodeWithFiltersAndFails(t *testing.T) {
	f := newFixture(t, cdcSpec)
	src, err := FileSchema(f.job)
	if err != nil {
		t.Fatal(err)
	}
	firstRows := func(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return rec.NewSlice(0, 1), nil }
	b, err := EncodeWith(f.job, src, JobMetadata(f.job), firstRows)
	if err != nil {
		t.Fatal(err)
	}
	got := readArrow(t, b)
	defer got.Release()
	if got.NumRows() != int64(countBatches(f.job)) {
		t.Fatalf("%d rows, want one per batch (%d)", got.NumRows(), countBatches(f.job))
	}
	ids := got.Column(0).(*array.Int64)
	row := 0
	for i, s := range f.job.Slices {
		for _, batch := range s.Batches {
			if want := batch.Column(0).(*array.Int64).Value(0); ids.Value(row) != want {
				t.Fatalf("slice %d: row %d has id %d, want the batch's first, %d", i, row, ids.Value(row), want)
			}
			row++
		}
	}

	boom := errors.New("boom")
	for name, convert := range map[string]func(arrow.RecordBatch) (arrow.RecordBatch, error){
		"convert fails": func(arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, boom },
		"fewer columns": func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
			return array.NewRecordBatch(arrow.NewSchema(src.Fields()[:1], nil), rec.Columns()[:1], rec.NumRows()), nil
		},
	} {
		_, err := EncodeWith(f.job, src, JobMetadata(f.job), convert)
		if !errors.Is(err, ErrUnencodable) || !strings.Contains(err.Error(), f.job.ID) {
			t.Errorf("%s: err = %v, want one wrapping ErrUnencodable naming the job", name, err)
		}
	}
	if _, err := FileSchema(conflictJob(t)); !errors.Is(err, ErrUnencodable) || !errors.Is(err, ErrColumnConflict) {
		t.Errorf("FileSchema of a job with a _cdc_op column: err = %v, want ErrUnencodable and ErrColumnConflict", err)
	}
}
