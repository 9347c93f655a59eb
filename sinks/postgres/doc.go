// Package postgres is the Postgres sink: each compaction job becomes one
// transaction that writes its rows and records its compaction_id — with
// its content and origin — in an applied-jobs table, so a replayed job
// commits nothing new, and another job under the same id is refused.
//
// The sink (sink.go) plans a job into a Tx (tx.go) — pure data: the
// table, its columns by the type mapping in types.go (PGType's comment
// holds the mapping table), the rows and, for a CDC job, each row's
// change — and runs it through an engine.Blocking port against a DB: the
// real server through pgx (PGX), or the in-memory Model (model.go) the
// simulator drives. A commit whose outcome is unknown (ErrAmbiguous) is
// settled by looking the job id up, never by guessing.
//
// Files:
//
//	types.go       Column, PGType (the mapping), Columns, Reconcile, limits
//	tx.go          Tx and Plan: what a job writes, refused early when it never could
//	sink.go        DB, ErrAmbiguous, Sink: one transaction per job, settle by lookup
//	applied.go     Found, AppliedRow, judge: an id found applied, compared with the job
//	model.go       Model and ApplyChange: the reference the real server must match
//	pgx_open.go    PGX, OpenPGX: connection, session settings, the applied-jobs table
//	               (created, or given the columns an older build's lacks)
//	pgx_pool.go    the bounded connection pool (pgxpool)
//	pgx_apply.go   Apply (the transaction, COMMIT's error classes) and Applied
//	pgx_schema.go  CREATE TABLE / ADD COLUMN under a per-table advisory lock
//	pgx_copy.go    COPY of a plain job, streaming its Arrow batches
//	pgx_values.go  one Arrow value → the Go value pgx encodes, or why it cannot be
//	pgx_cdc.go     a CDC job: COPY into a staging table, then one upsert
//
// One job on the server:
//
//	BEGIN
//	INSERT INTO skipprd_applied_jobs (compaction_id, table_name, rows,
//	    content, pipeline, wal_id) … ON CONFLICT DO NOTHING
//	    no row inserted → SELECT the row, ROLLBACK, and judge:
//	        content = the job's                     → applied: FoundApplied, nil
//	        content NULL (an older build's row) and
//	        table_name, rows = the job's            → applied: FoundLegacy, nil
//	        otherwise                               → ErrCannotApply + ErrIDCollision
//	read the table's columns; Reconcile
//	    needs DDL → pg_advisory_xact_lock(table), read again, CREATE / ALTER
//	plain: COPY table FROM STDIN (binary, row by row from the batches)
//	CDC:   CREATE TEMP TABLE … ON COMMIT DROP; COPY; INSERT … SELECT DISTINCT ON
//	       … ON CONFLICT DO UPDATE … WHERE older
//	COMMIT
//
// The applied-jobs table: compaction_id text PRIMARY KEY, table_name
// text, rows bigint, applied_at timestamptz, content text, pipeline text,
// wal_id text (pipeline and wal_id NULL for a legacy job, whose Origin is
// zero). OpenPGX creates it, or — for a table an older build made, without
// the last three — adds them (ALTER TABLE … ADD COLUMN IF NOT EXISTS, only
// when one is missing, under the table's advisory DDL lock); the old rows
// keep NULL there and are judged on table_name and rows. The Model keeps
// the same rows and judges them the same way.
//
// Invariants:
//   - A job's rows and its applied-jobs row commit in one transaction:
//     the table holds a job's rows iff the applied-jobs table holds its id.
//   - CDC rows follow ApplyChange: a change lands only over a row whose
//     order token is lower; deletes leave tombstones. Replaying any prefix
//     of a CDC stream any number of times converges to the same table.
//     A CDC row reflects its change alone: columns of the table its job
//     lacks are set to NULL. Order tokens are stored exactly, numeric(20,0).
//   - A column conflict, a CDC job into a plain table (or the reverse), a
//     name Postgres would truncate or reject, a CDC identity over
//     IdentityBytesMax, or a value Postgres cannot hold refuses the job
//     (engine.ErrCannotApply) naming the table and column; nothing of it
//     is written.
//   - Only a COMMIT that was sent and not answered (or answered by a
//     FATAL) is ErrAmbiguous; every failure before it is definite.
//     Applied waits for a transaction still in flight on the job's id,
//     so the lookup's answer is final; it judges the row it finds as
//     Apply does, so an id found with another job's content is a
//     collision, never "landed".
//   - DDL on a table is serialized by its advisory lock; jobs that need
//     none take no lock, as columns are only ever added.
//
// Tests run against a real server (internal/pgtest: a database per
// test; skipped loudly without a server, failed under CI=true). The
// ambiguous-commit tests put a TCP proxy between pgx and the server that
// cuts the connection just before or just after forwarding COMMIT; a
// rapid property checks the server's CDC table against Model over random
// replays.
package postgres
