package postgres

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Tx is one job's transaction, planned from the job alone (Plan): pure
// data that a DB applies atomically. Its batches and CDC rows are the
// job's, borrowed until the engine's done runs.
type Tx struct {
	JobID string
	Table string // the job's namespace
	// Columns are the columns the rows carry, CDC bookkeeping first when
	// CDC (see Columns); Schema is the batches' Arrow schema.
	Columns []Column
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch
	// CDC jobs apply by identity and order token; Changes then has one
	// entry per row across Batches.
	CDC     bool
	Changes []segment.CDCRow
	Rows    int64
}

// Plan turns a job into its transaction. A job whose schema has no
// mapping, or whose slices disagree on schema or CDC-ness, is refused
// (engine.ErrCannotApply): replaying it could never succeed.
func Plan(job *engine.Job) (*Tx, error) {
	if len(job.Slices) == 0 {
		return nil, fmt.Errorf("%w: postgres: job %s has no slices", engine.ErrCannotApply, job.ID)
	}
	first := job.Slices[0]
	cdc := first.Sidecar != nil
	tx := &Tx{JobID: job.ID, Table: job.Namespace, Schema: first.Schema, CDC: cdc}
	for i, s := range job.Slices {
		if !s.Schema.Equal(first.Schema) || (s.Sidecar != nil) != cdc {
			return nil, fmt.Errorf("%w: postgres: job %s: slice %d differs from slice 0 in schema or CDC-ness", engine.ErrCannotApply, job.ID, i)
		}
		tx.Batches = append(tx.Batches, s.Batches...)
		tx.Rows += s.Entry.Rows
		if cdc {
			if int64(len(s.Sidecar.Rows)) != s.Entry.Rows {
				return nil, fmt.Errorf("%w: postgres: job %s: slice %d has %d rows and %d CDC rows", engine.ErrCannotApply, job.ID, i, s.Entry.Rows, len(s.Sidecar.Rows))
			}
			tx.Changes = append(tx.Changes, s.Sidecar.Rows...)
		}
	}
	cols, err := Columns(job.Namespace, first.Schema, cdc)
	if err != nil {
		return nil, err
	}
	tx.Columns = cols
	return tx, nil
}
