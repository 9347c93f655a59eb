package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/sinks"
)

// merged is a rewrite's file: the inputs it holds, in order, its id and
// the file.
type merged struct {
	id     string
	inputs []DataFile
	file   EncodedFile
}

// mergeFiles merges the rewrite inputs of table id, whose current
// schema is table (bodies[i] is inputs[i]'s bytes, all of one day), into
// one file, their rows in input order, with the key-value metadata of a
// rewrite of them (its id as compaction id and content). The file has
// every column any input has (the table's, in its order, with their
// field ids); an input without a column gives nulls, and a column an
// older schema made narrower is widened (planMerge). When two inputs
// would write a column as different Arrow types (a struct whose fields
// differ) only the inputs of one Arrow schema are merged — the schema
// most of them have, the earliest on a tie — and fewer than two of it
// give no file (merged.inputs says which would have gone in). A file
// whose rows are not the count the table records for it is an error,
// and so is one that does not decode: the table's files are not read as
// rows they do not hold. Pure and CPU-heavy: on the Executor.
func mergeFiles(id Ident, table *icego.Schema, inputs []DataFile, bodies [][]byte) (merged, error) {
	if len(inputs) != len(bodies) || len(inputs) == 0 {
		panic(fmt.Sprintf("iceberg: mergeFiles of %d files with %d bodies", len(inputs), len(bodies)))
	}
	fail := func(err error) (merged, error) {
		return merged{}, fmt.Errorf("iceberg: rewrite in table %s: %w", id, err)
	}
	schemas := make([]*arrow.Schema, len(bodies))
	use := make([]int, len(bodies))
	for i, b := range bodies {
		s, err := fileSchema(b)
		if err != nil {
			return fail(fmt.Errorf("file %s: %w", inputs[i].Path, err))
		}
		schemas[i], use[i] = s, i
	}
	schema, plans, err := planMerge(table, schemas, use)
	if errors.Is(err, errTypesDiffer) {
		use = largestGroup(schemas)
		schema, plans, err = planMerge(table, schemas, use)
	}
	if err != nil {
		return fail(err)
	}
	m := merged{}
	for _, i := range use {
		m.inputs = append(m.inputs, inputs[i])
		if inputs[i].Day != inputs[use[0]].Day {
			panic(fmt.Sprintf("iceberg: rewrite of files of days %d and %d", inputs[use[0]].Day, inputs[i].Day))
		}
	}
	if len(use) < 2 {
		return m, nil
	}
	m.id = rewriteID(id, m.inputs)
	kv := [][2]string{{sinks.MetaCompactionID, rewritePrefix + m.id}, {sinks.MetaContent, m.id},
		{SummaryRewriteFiles, strconv.Itoa(len(use))}}
	var want int64
	body, err := sinks.EncodeBatches(schema, kv, func(write func(arrow.RecordBatch) error) error {
		for k, i := range use {
			n, err := eachBatch(bodies[i], func(b arrow.RecordBatch) error {
				out, err := plans[k].convert(schema, b)
				if err != nil {
					return err
				}
				defer out.Release()
				return write(out)
			})
			if err != nil {
				return fmt.Errorf("file %s: %w", inputs[i].Path, err)
			}
			if n != inputs[i].Rows {
				return fmt.Errorf("file %s holds %d rows, the table says %d", inputs[i].Path, n, inputs[i].Rows)
			}
			want += n
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	rows, cols, err := footerStats(body)
	if err != nil || rows != want {
		return fail(fmt.Errorf("the merged file reads back %d rows of %d (%v)", rows, want, err))
	}
	m.file = EncodedFile{Day: m.inputs[0].Day, Body: body, Rows: rows, Columns: cols}
	return m, nil
}

// errTypesDiffer: two inputs write one column as different Arrow types.
var errTypesDiffer = errors.New("the inputs write a column as different types")

// inputPlan is how one input's batches become the merged file's: per
// merged column, the input's column and its conversion (col -1: none,
// nulls).
type inputPlan struct {
	col  []int
	conv []convFunc
}

// planMerge is the merged file's schema for the inputs use of schemas,
// and each one's plan: the table's columns any of them has, in the
// table's order, each of the Arrow type the sink writes the table's
// type as (converter, from the input's type) — which must be one type
// for all of them (errTypesDiffer).
func planMerge(table *icego.Schema, schemas []*arrow.Schema, use []int) (*arrow.Schema, []inputPlan, error) {
	type column struct {
		dst  arrow.DataType
		conv map[int]convFunc // by input
		at   map[int]int      // the column's index in each input having it
	}
	byID := map[int]*column{}
	for _, i := range use {
		for j, f := range schemas[i].Fields() {
			col, ok := tableColumn(table, f)
			if !ok {
				return nil, nil, fmt.Errorf("a file's column %q is not in the table's schema %s", f.Name, table)
			}
			dst, conv, err := converter(f.Name, f.Type, col.Type)
			if err != nil {
				return nil, nil, fmt.Errorf("column %q: %w", f.Name, err)
			}
			c, ok := byID[col.ID]
			if !ok {
				c = &column{dst: dst, conv: map[int]convFunc{}, at: map[int]int{}}
				byID[col.ID] = c
			} else if !arrow.TypeEqual(c.dst, dst, arrow.CheckMetadata()) {
				return nil, nil, fmt.Errorf("column %q is %s in one file, %s in another: %w", f.Name, c.dst, dst, errTypesDiffer)
			}
			c.conv[i], c.at[i] = conv, j
		}
	}
	var fields []arrow.Field
	var cols []*column
	for _, f := range table.Fields() {
		if c, ok := byID[f.ID]; ok {
			fields = append(fields, arrow.Field{Name: f.Name, Type: c.dst, Nullable: true, Metadata: fieldID(f.ID)})
			cols = append(cols, c)
		}
	}
	plans := make([]inputPlan, len(use))
	for k, i := range use {
		for _, c := range cols {
			at, ok := c.at[i]
			if !ok {
				at = -1
			}
			plans[k].col, plans[k].conv = append(plans[k].col, at), append(plans[k].conv, c.conv[i])
		}
	}
	return arrow.NewSchema(fields, nil), plans, nil
}

// tableColumn is the table's top-level column a file's field is: by its
// field id, else (a file without ids) by name.
func tableColumn(table *icego.Schema, f arrow.Field) (icego.NestedField, bool) {
	if v, ok := f.Metadata.GetValue(fieldIDKey); ok {
		if id, err := strconv.Atoi(v); err == nil {
			for _, c := range table.Fields() {
				if c.ID == id {
					return c, true
				}
			}
			return icego.NestedField{}, false
		}
	}
	return table.FindFieldByName(f.Name)
}

// convert is b, a batch of the plan's input, as a batch of schema: each
// column converted, nulls where the input has none.
func (p inputPlan) convert(schema *arrow.Schema, b arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, len(p.col))
	defer releaseAll(&cols)
	n := int(b.NumRows())
	for k, at := range p.col {
		if at < 0 {
			cols = append(cols, array.MakeArrayOfNull(memory.DefaultAllocator, schema.Field(k).Type, n))
			continue
		}
		c, err := p.conv[k](b.Column(at))
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", schema.Field(k).Name, err)
		}
		cols = append(cols, c)
	}
	return array.NewRecordBatch(schema, cols, int64(n)), nil
}

// largestGroup is the indexes of the schemas equal (fields, types and
// field ids) to the one most of them are equal to, ascending; the
// earliest group wins a tie.
func largestGroup(schemas []*arrow.Schema) []int {
	var groups [][]int
	for i, s := range schemas {
		g := 0
		for g < len(groups) && !sameFields(schemas[groups[g][0]], s) {
			g++
		}
		if g == len(groups) {
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	best := groups[0]
	for _, g := range groups[1:] {
		if len(g) > len(best) {
			best = g
		}
	}
	return best
}

// sameFields reports whether a and b have the same fields: names, types
// (nested fields' metadata too) and metadata (the field ids).
func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		if !a.Field(i).Equal(b.Field(i)) {
			return false
		}
	}
	return true
}

// fileSchema is the Arrow schema of the Parquet file body.
func fileSchema(body []byte) (*arrow.Schema, error) {
	r, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	return fr.Schema()
}

// eachBatch decodes the Parquet file body a row group at a time and
// hands each batch to write; it returns the rows written.
func eachBatch(body []byte, write func(arrow.RecordBatch) error) (int64, error) {
	r, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	// A batch's builders are reserved for BatchSize rows: a small file
	// (what a rewrite reads) asks for no more than it holds.
	batch := min(64<<10, max(1, r.NumRows()))
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{BatchSize: batch}, memory.DefaultAllocator)
	if err != nil {
		return 0, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	var rows int64
	for rr.Next() {
		b := rr.RecordBatch()
		if err := write(b); err != nil {
			return rows, err
		}
		rows += b.NumRows()
	}
	if err := rr.Err(); err != nil {
		return rows, err
	}
	return rows, nil
}
