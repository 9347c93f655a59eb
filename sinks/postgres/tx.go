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
	// Content and Origin are the job's (engine.Job): recorded beside
	// JobID, and compared when JobID is found already applied.
	Content string
	Origin  segment.Origin
	Table   string // the job's namespace
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
	if why := nameProblem(job.Namespace); why != "" {
		return nil, fmt.Errorf("%w: postgres: job %s: table %q: a table name %s", engine.ErrCannotApply, job.ID, job.Namespace, why)
	}
	if job.Namespace == AppliedJobsTable {
		return nil, fmt.Errorf("%w: postgres: job %s: table %q is the sink's applied-jobs table", engine.ErrCannotApply, job.ID, job.Namespace)
	}
	first := job.Slices[0]
	cdc := first.Sidecar != nil
	tx := &Tx{JobID: job.ID, Content: job.Content, Origin: job.Origin, Table: job.Namespace, Schema: first.Schema, CDC: cdc}
	for i, s := range job.Slices {
		if !s.Schema.Equal(first.Schema) || (s.Sidecar != nil) != cdc {
			return nil, fmt.Errorf("%w: postgres: job %s: %s differs from slice 0 in schema or CDC-ness", engine.ErrCannotApply, job.ID, sliceName(i, s))
		}
		tx.Batches = append(tx.Batches, s.Batches...)
		tx.Rows += s.Entry.Rows
		if cdc {
			if int64(len(s.Sidecar.Rows)) != s.Entry.Rows {
				return nil, fmt.Errorf("%w: postgres: job %s: %s has %d rows and %d CDC rows", engine.ErrCannotApply, job.ID, sliceName(i, s), s.Entry.Rows, len(s.Sidecar.Rows))
			}
			if err := checkIdentities(job.ID, sliceName(i, s), s.Sidecar.Rows); err != nil {
				return nil, err
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

// IdentityBytesMax bounds a CDC identity. It is the primary key of a CDC
// table, and a btree entry must fit in a third of a page (about 2700
// bytes, less its header); a longer identity would fail on the server at
// every retry, so the job is refused. The segment format allows 4096.
const IdentityBytesMax = 2048

// checkIdentities refuses a slice whose CDC identities are too long.
func checkIdentities(jobID, slice string, rows []segment.CDCRow) error {
	for r, row := range rows {
		if len(row.Identity) > IdentityBytesMax {
			return fmt.Errorf("%w: postgres: job %s: %s row %d: a CDC identity of %d bytes, limit %d", engine.ErrCannotApply, jobID, slice, r, len(row.Identity), IdentityBytesMax)
		}
	}
	return nil
}

// sliceName names the i-th slice of a job in messages: its place in the
// job, and its ordinal, which alone is ambiguous in a job that spans
// segments.
func sliceName(i int, s *segment.Slice) string {
	return fmt.Sprintf("slice %d (ordinal %d)", i, s.Entry.Ordinal)
}
