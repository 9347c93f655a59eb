package postgres

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine/segment"
)

// copyRows appends a plain job's rows to its table with one COPY.
func (p *PGX) copyRows(ctx context.Context, dbtx pgx.Tx, tx *Tx) error {
	names := make([]string, len(tx.Columns))
	for i, c := range tx.Columns {
		names[i] = c.Name
	}
	src := newRowSource(tx, false)
	n, err := dbtx.CopyFrom(ctx, pgx.Identifier{p.schema, tx.Table}, names, src)
	return copyResult(tx, src, n, err, "COPY into "+p.ident(tx.Table))
}

// copyResult is the outcome of a COPY from src: the source's own error
// first (a value Postgres cannot hold refuses the job, naming it), then
// pgx's, then a row count that is not the job's.
func copyResult(tx *Tx, src *rowSource, n int64, err error, what string) error {
	switch {
	case src.err != nil:
		return src.err
	case err != nil:
		return fmt.Errorf("postgres: job %s: %s: %w", tx.JobID, what, err)
	case n != tx.Rows:
		return fmt.Errorf("postgres: job %s: %s wrote %d rows, the job has %d", tx.JobID, what, n, tx.Rows)
	}
	return nil
}

// rowSource is a pgx.CopyFromSource over a Tx's batches. It converts one
// row at a time into a reused slice (pgx encodes a row before asking for
// the next), so a job is never materialized as Go values.
//
// For a CDC job each row starts with its change's identity, order token,
// tombstone flag and position in the job (the staging table's columns).
type rowSource struct {
	tx    *Tx
	cdc   bool
	b     int         // the batch of the current row
	i     int         // the current row within tx.Batches[b]
	row   int64       // the current row within the job; -1 before Next
	convs []valueFunc // the converters of tx.Batches[b]'s columns
	vals  []any
	err   error // the first value Postgres cannot hold
}

func newRowSource(tx *Tx, cdc bool) *rowSource {
	n := len(tx.Schema.Fields())
	if cdc {
		n += stagePrefixColumns
	}
	return &rowSource{tx: tx, cdc: cdc, i: -1, row: -1, vals: make([]any, 0, n)}
}

// Next implements pgx.CopyFromSource.
func (s *rowSource) Next() bool {
	if s.err != nil {
		return false
	}
	s.i++
	for s.b < len(s.tx.Batches) && int64(s.i) >= s.tx.Batches[s.b].NumRows() {
		s.b, s.i, s.convs = s.b+1, 0, nil
	}
	if s.b == len(s.tx.Batches) {
		return false
	}
	if s.convs == nil {
		s.convs = converters(s.tx.Batches[s.b])
	}
	s.row++
	return true
}

// Values implements pgx.CopyFromSource.
func (s *rowSource) Values() ([]any, error) {
	vals := s.vals[:0]
	if s.cdc {
		ch := s.tx.Changes[s.row]
		vals = append(vals, byteaValue(ch.Identity), uint64Value(ch.Order), ch.Kind == segment.Delete, s.row)
	}
	batch := s.tx.Batches[s.b]
	for c := range int(batch.NumCols()) {
		col := batch.Column(c)
		if col.IsNull(s.i) {
			vals = append(vals, nil)
			continue
		}
		v, err := s.convs[c](s.i)
		if err != nil {
			s.err = cannotApply(s.tx.Table, s.tx.Schema.Field(c).Name, "row %d: %v", s.row, err)
			return nil, s.err
		}
		vals = append(vals, v)
	}
	s.vals = vals
	return vals, nil
}

// Err implements pgx.CopyFromSource.
func (s *rowSource) Err() error { return s.err }

func converters(b arrow.RecordBatch) []valueFunc {
	convs := make([]valueFunc, b.NumCols())
	for c := range convs {
		convs[c] = converter(b.Column(c))
	}
	return convs
}
