package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipprd/skipprd/engine"
)

var _ DB = (*PGX)(nil)

// Apply implements DB: one transaction that records tx.JobID in the
// applied-jobs table (or finds it there and writes nothing), creates or
// widens tx.Table, writes the rows by COPY — straight into the table, or
// for CDC through a staging table and one upsert — and commits.
//
// Only a COMMIT whose answer never came back (the connection broke or ctx
// ended after it was sent, or the server ended the session) gives an
// error wrapping ErrAmbiguous; every failure before it is definite.
func (p *PGX) Apply(ctx context.Context, tx *Tx) (Found, error) {
	if err := checkTx(tx); err != nil {
		return NotFound, err
	}
	pc, err := p.pool.Acquire(ctx)
	if err != nil {
		return NotFound, fmt.Errorf("postgres: job %s: %w", tx.JobID, err)
	}
	defer pc.Release()
	conn := pc.Conn()
	found, err := p.apply(ctx, conn, tx)
	if err != nil && !errors.Is(err, ErrAmbiguous) && !errors.Is(err, engine.ErrCannotApply) {
		err = refuseIfPermanent(tx, err)
	}
	return found, err
}

// apply runs tx's transaction on conn.
func (p *PGX) apply(ctx context.Context, conn *pgx.Conn, tx *Tx) (Found, error) {
	dbtx, err := conn.Begin(ctx)
	if err != nil {
		return NotFound, fmt.Errorf("postgres: job %s: begin: %w", tx.JobID, err)
	}
	// After Commit this is a no-op; after a failure it ends the
	// transaction, or closes a connection that cannot (release drops it).
	defer func() { _ = dbtx.Rollback(ctx) }()
	first, err := p.recordJob(ctx, dbtx, tx)
	if err != nil {
		return NotFound, err
	}
	if !first { // applied before, or another job's id: the rollback writes nothing
		return p.judgeRow(ctx, dbtx, tx)
	}
	have, err := p.ensureTable(ctx, dbtx, tx)
	if err != nil {
		return NotFound, err
	}
	if tx.CDC {
		err = p.upsertChanges(ctx, dbtx, tx, have)
	} else {
		err = p.copyRows(ctx, dbtx, tx)
	}
	if err != nil {
		return NotFound, err
	}
	if err := commit(ctx, conn, dbtx, tx.JobID); err != nil {
		return NotFound, err
	}
	return Committed, nil
}

// judgeRow reads the applied-jobs row of tx.JobID, which is there
// (committed: the insert that found it waited for its transaction), and
// compares it with tx (judge).
func (p *PGX) judgeRow(ctx context.Context, dbtx pgx.Tx, tx *Tx) (Found, error) {
	var got AppliedRow
	var content, pipeline, walID *string
	err := dbtx.QueryRow(ctx, `SELECT table_name, rows, content, pipeline, wal_id FROM `+p.ident(AppliedJobsTable)+` WHERE compaction_id = $1`,
		tx.JobID).Scan(&got.Table, &got.Rows, &content, &pipeline, &walID)
	if err != nil {
		// pgx.ErrNoRows: deleted since the insert found it; the retry inserts it.
		return NotFound, fmt.Errorf("postgres: job %s: reading its row in %s: %w", tx.JobID, AppliedJobsTable, err)
	}
	got.Content, got.Pipeline, got.WALID = deref(content), deref(pipeline), deref(walID)
	return judge(tx, p.schema+"."+AppliedJobsTable, got)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullIfEmpty is s for a text column, NULL when empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// commit sends COMMIT unless it is known beforehand that it cannot be
// (ctx ended, the connection is gone): those failures are definite.
func commit(ctx context.Context, conn *pgx.Conn, dbtx pgx.Tx, jobID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: job %s: not committed: %w", jobID, err)
	}
	if conn.IsClosed() {
		return fmt.Errorf("postgres: job %s: not committed: the connection closed before COMMIT", jobID)
	}
	return commitError(jobID, dbtx.Commit(ctx))
}

// recordJob inserts tx.JobID, with its table, row count, content and
// origin, into the applied-jobs table. first is false when the id is
// there already. A transaction inserting the same id concurrently makes
// this wait for its end: then the id is there (it committed) or it is not
// (it rolled back) and this one goes on.
func (p *PGX) recordJob(ctx context.Context, dbtx pgx.Tx, tx *Tx) (first bool, err error) {
	row := rowOf(tx)
	tag, err := dbtx.Exec(ctx, `INSERT INTO `+p.ident(AppliedJobsTable)+` (compaction_id, table_name, rows, content, pipeline, wal_id)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (compaction_id) DO NOTHING`,
		tx.JobID, row.Table, row.Rows, nullIfEmpty(row.Content), nullIfEmpty(row.Pipeline), nullIfEmpty(row.WALID))
	if err != nil {
		return false, fmt.Errorf("postgres: job %s: recording it in %s: %w", tx.JobID, AppliedJobsTable, err)
	}
	return tag.RowsAffected() == 1, nil
}

// commitError classifies Commit's error. The server refusing the commit
// (an ERROR-severity answer, or a commit that turned into a rollback) is
// definite. Anything else — the connection broke, ctx ended, or a FATAL
// ended the session (which can come after the commit record is written,
// e.g. while waiting for a synchronous standby) — may have committed:
// ErrAmbiguous.
//
// pgconn.SafeToRetry cannot tell "COMMIT not sent" here: pgx v5.12's
// simple-protocol Exec, which COMMIT uses, drops the read error when the
// connection breaks after the send and reports the closed connection as
// "conn closed", an error SafeToRetry calls unsent
// (TestPGXAmbiguousCommitLanded catches it). commit rules out the cases
// known unsent before calling Commit instead.
func commitError(jobID string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && severity(pgErr) == "ERROR":
		return fmt.Errorf("postgres: job %s: the server refused COMMIT: %w", jobID, err)
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return fmt.Errorf("postgres: job %s: COMMIT rolled back: %w", jobID, err)
	}
	return fmt.Errorf("postgres: job %s: no answer to COMMIT (%w): %w", jobID, err, ErrAmbiguous)
}

func severity(e *pgconn.PgError) string {
	if e.SeverityUnlocalized != "" {
		return e.SeverityUnlocalized
	}
	return e.Severity
}

// permanentSQLStates are the server errors no retry of the same job can
// get past: data exceptions (class 22: a value the column's type cannot
// hold), program limits (class 54: too many columns, an index entry too
// big), and an ON CONFLICT target without a unique index (42P10: a CDC
// table someone else created). The sink checks what it can before
// writing; these catch the rest instead of retrying for ever.
var permanentSQLStates = []string{"22", "54", "42P10"}

// refuseIfPermanent wraps err in engine.ErrCannotApply when the server's
// answer says no retry can succeed.
func refuseIfPermanent(tx *Tx, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || severity(pgErr) != "ERROR" {
		return err
	}
	for _, prefix := range permanentSQLStates {
		if strings.HasPrefix(pgErr.Code, prefix) {
			return fmt.Errorf("%w: postgres: table %q: %w", engine.ErrCannotApply, tx.Table, err)
		}
	}
	return err
}

// checkTx checks what a Tx must hold for its SQL to be safe: names Plan
// accepted, column types PGType produces (they are spliced into DDL), and
// one change per row. A Tx that fails was not made by Plan: a
// programming error, reported as a refusal rather than a panic because
// Tx is exported.
func checkTx(tx *Tx) error {
	if why := nameProblem(tx.Table); why != "" || tx.Table == AppliedJobsTable {
		return fmt.Errorf("%w: postgres: job %s: table %q is not a table name the sink writes", engine.ErrCannotApply, tx.JobID, tx.Table)
	}
	for _, c := range tx.Columns {
		if nameProblem(c.Name) != "" || !knownType(c.Type) {
			return cannotApply(tx.Table, c.Name, "column of type %q was not planned by Plan", c.Type)
		}
	}
	if tx.CDC != hasCDC(tx.Columns) || (tx.CDC && (len(tx.Columns) < len(cdcColumns) || !slices.Equal(tx.Columns[:len(cdcColumns)], cdcColumns))) {
		return fmt.Errorf("%w: postgres: job %s: the CDC bookkeeping columns are not the planned ones", engine.ErrCannotApply, tx.JobID)
	}
	var rows int64
	for _, b := range tx.Batches {
		rows += b.NumRows()
		if int(b.NumCols()) != len(tx.Schema.Fields()) {
			return fmt.Errorf("%w: postgres: job %s: a batch has %d columns, the schema %d", engine.ErrCannotApply, tx.JobID, b.NumCols(), len(tx.Schema.Fields()))
		}
	}
	dataCols := len(tx.Columns)
	if tx.CDC {
		dataCols -= len(cdcColumns)
	}
	switch {
	case rows != tx.Rows:
		return fmt.Errorf("%w: postgres: job %s: batches hold %d rows, the job says %d", engine.ErrCannotApply, tx.JobID, rows, tx.Rows)
	case tx.CDC && int64(len(tx.Changes)) != rows:
		return fmt.Errorf("%w: postgres: job %s: %d rows and %d CDC changes", engine.ErrCannotApply, tx.JobID, rows, len(tx.Changes))
	case dataCols != len(tx.Schema.Fields()):
		return fmt.Errorf("%w: postgres: job %s: %d data columns for %d fields", engine.ErrCannotApply, tx.JobID, dataCols, len(tx.Schema.Fields()))
	}
	return nil
}

// Applied implements DB on a connection of its own (the one whose COMMIT
// went unanswered is dropped by then).
//
// A plain SELECT could answer too early: the job's transaction may still
// be in flight on the server — its client gone, its COMMIT received but
// not yet done — and a SELECT does not see it. So Applied inserts the id
// in a transaction it always rolls back: the insert waits for any
// transaction holding the id, then goes in (it did not commit:
// NotFound) or conflicts (it committed), and the row found is compared
// with tx: another job's content under the id is a collision, not
// "landed".
func (p *PGX) Applied(ctx context.Context, tx *Tx) (Found, error) {
	pc, err := p.pool.Acquire(ctx)
	if err != nil {
		return NotFound, fmt.Errorf("postgres: looking job %s up: %w", tx.JobID, err)
	}
	defer pc.Release()
	conn := pc.Conn()
	dbtx, err := conn.Begin(ctx)
	if err != nil {
		return NotFound, fmt.Errorf("postgres: looking job %s up: begin: %w", tx.JobID, err)
	}
	defer func() { _ = dbtx.Rollback(ctx) }() // the answer stands even if this fails: the server rolls back a dropped session
	tag, err := dbtx.Exec(ctx, `INSERT INTO `+p.ident(AppliedJobsTable)+` (compaction_id, table_name, rows) VALUES ($1, '', 0) ON CONFLICT (compaction_id) DO NOTHING`, tx.JobID)
	if err != nil {
		return NotFound, fmt.Errorf("postgres: looking job %s up in %s: %w", tx.JobID, AppliedJobsTable, err)
	}
	if tag.RowsAffected() == 1 {
		return NotFound, nil
	}
	return p.judgeRow(ctx, dbtx, tx)
}
