// Package postgres is the Postgres sink: each compaction job becomes one
// transaction that writes its rows and records its compaction_id in an
// applied-jobs table, so a replayed job commits nothing new.
//
// The sink (sink.go) plans a job into a Tx (tx.go) — pure data: the
// table, its columns by the type mapping in types.go, the rows and, for a
// CDC job, each row's change — and runs it through an engine.Blocking
// port against a DB: the real server through pgx (PGX), or the
// in-memory Model the simulator drives. A commit whose outcome is unknown
// (ErrAmbiguous) is settled by looking the job id up, never by guessing.
//
// Invariants:
//   - A job's rows and its applied-jobs row commit in one transaction:
//     the table holds a job's rows iff the applied-jobs table holds its id.
//   - CDC rows follow ApplyChange: a change lands only over a row whose
//     order token is lower; deletes leave tombstones. Replaying any prefix
//     of a CDC stream any number of times converges to the same table.
//   - A column conflict refuses the job (engine.ErrCannotApply) naming the
//     table and column; nothing of it is written.
package postgres
