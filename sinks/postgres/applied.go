package postgres

import (
	"fmt"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Found is what a DB found of a job under its id in the applied-jobs
// table.
type Found uint8

const (
	// NotFound: the id is not there (Applied only).
	NotFound Found = iota
	// Committed: this Apply committed the job.
	Committed
	// FoundApplied: the id is there with the job's content: an earlier
	// attempt landed.
	FoundApplied
	// FoundLegacy: the id is there in a row of a build before contents
	// were recorded (content NULL), naming the job's table and row
	// count: trusted as applied.
	FoundLegacy
)

func (f Found) String() string {
	switch f {
	case NotFound:
		return "not found"
	case Committed:
		return "committed"
	case FoundApplied:
		return "found applied"
	case FoundLegacy:
		return "found in a legacy row"
	}
	return fmt.Sprintf("Found(%d)", uint8(f))
}

// AppliedRow is a row of the applied-jobs table: what a job's id was
// recorded with. Content, Pipeline and WALID are "" where NULL: a row of
// a build before contents were recorded has none, and a legacy job (a
// zero Origin) has no pipeline or WAL id.
type AppliedRow struct {
	Table                    string
	Rows                     int64
	Content, Pipeline, WALID string
}

// rowOf is the row tx records.
func rowOf(tx *Tx) AppliedRow {
	r := AppliedRow{Table: tx.Table, Rows: tx.Rows, Content: tx.Content}
	if !tx.Origin.IsZero() {
		r.Pipeline, r.WALID = tx.Origin.Pipeline, tx.Origin.WAL.String()
	}
	return r
}

// origin describes the job a row records.
func (r AppliedRow) origin() string {
	if r.Pipeline == "" && r.WALID == "" {
		return segment.Origin{}.String()
	}
	return fmt.Sprintf("pipeline %s, WAL %s", r.Pipeline, r.WALID)
}

// judge compares the row found under tx.JobID (in where, the table's
// name for messages) with tx. The same content ⇒ FoundApplied; no content
// recorded ⇒ FoundLegacy if the table and row count are tx's; anything
// else is another job under the id: an error wrapping
// engine.ErrCannotApply and engine.ErrIDCollision.
func judge(tx *Tx, where string, got AppliedRow) (Found, error) {
	want := rowOf(tx)
	switch {
	case got.Content != "" && got.Content == want.Content:
		return FoundApplied, nil
	case got.Content != "":
		return NotFound, fmt.Errorf("%w: %w: postgres: job %s: %s holds it with content %s (%s; table %q, %d rows), this job's is %s (%s; table %q, %d rows)",
			engine.ErrCannotApply, engine.ErrIDCollision, tx.JobID, where, got.Content, got.origin(), got.Table, got.Rows,
			want.Content, want.origin(), want.Table, want.Rows)
	case got.Table == want.Table && got.Rows == want.Rows:
		return FoundLegacy, nil
	}
	return NotFound, fmt.Errorf("%w: %w: postgres: job %s: %s holds it in a row without a content (a build before contents were recorded wrote it) for table %q, %d rows; this job (content %s, %s) is for table %q, %d rows",
		engine.ErrCannotApply, engine.ErrIDCollision, tx.JobID, where, got.Table, got.Rows,
		want.Content, want.origin(), want.Table, want.Rows)
}
