package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/sinks"
)

// merged is a rewrite's file: the inputs it holds, in order, its id and
// the file.
type merged struct {
	id     string
	inputs []DataFile
	file   EncodedFile
}

// mergeFiles merges the rewrite inputs of table id (bodies[i] is
// inputs[i]'s bytes, all of one day) into one file: those of one Arrow
// schema — the schema most of them have, the earliest on a tie — their
// rows in input order, with the key-value metadata of a rewrite of them
// (its id as compaction id and content). Fewer than two of one schema:
// no file (merged.inputs says which would have gone in). A file whose
// rows are not the count the table records for it is an error, and so
// is one that does not decode: the table's files are not read as rows
// they do not hold. Pure and CPU-heavy: on the Executor.
func mergeFiles(id Ident, inputs []DataFile, bodies [][]byte) (merged, error) {
	if len(inputs) != len(bodies) || len(inputs) == 0 {
		panic(fmt.Sprintf("iceberg: mergeFiles of %d files with %d bodies", len(inputs), len(bodies)))
	}
	schemas := make([]*arrow.Schema, len(bodies))
	for i, b := range bodies {
		s, err := fileSchema(b)
		if err != nil {
			return merged{}, fmt.Errorf("iceberg: rewrite in table %s: file %s: %w", id, inputs[i].Path, err)
		}
		schemas[i] = s
	}
	use := largestGroup(schemas)
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
	body, err := sinks.EncodeBatches(schemas[use[0]], kv, func(write func(arrow.RecordBatch) error) error {
		for _, i := range use {
			n, err := eachBatch(bodies[i], write)
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
		return merged{}, fmt.Errorf("iceberg: rewrite in table %s: %w", id, err)
	}
	rows, cols, err := footerStats(body)
	if err != nil || rows != want {
		return merged{}, fmt.Errorf("iceberg: rewrite in table %s: the merged file reads back %d rows of %d (%v)", id, rows, want, err)
	}
	m.file = EncodedFile{Day: m.inputs[0].Day, Body: body, Rows: rows, Columns: cols}
	return m, nil
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
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
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
