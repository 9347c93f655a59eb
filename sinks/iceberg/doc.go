// Package iceberg is the Iceberg sink: each compaction job becomes one
// snapshot of an Apache Iceberg table — one table per namespace — that
// adds the job's Parquet data files and records the job's compaction_id,
// committed through a catalog's optimistic commit, exactly once.
//
// # One Apply
//
//	prepare (Blocking)   load the table, or create it from the job's
//	                     columns (partitioned by day of PartitionSpec's
//	                     column: _ingested_at by default); look for the job
//	                     (lookup.go) — found: done; add or widen columns
//	                     (Reconcile, Evolve) until the table holds the job's
//	encode (Executor)    EncodeFiles: the job's rows, each column cast to
//	                     its table column's type and tagged with its field
//	                     id, one file per partition day
//	write (Files)        each file once, at a path that is a function of
//	                     the table and the job: {table}/data/{field}=
//	                     {YYYY-MM-DD}/{job ID}.parquet, through the
//	                     engine's object store or disk (files.go)
//	commit (Blocking)    Append pinned to the snapshot prepare read; any
//	                     error: load and look before anything else
//	                     (commit.go); then expire old snapshots now and then
//
// # Exactly once
//
// A snapshot records its job in its summary (skipprd.compaction-id,
// skipprd.content, skipprd.pipeline, skipprd.wal-id, skipprd.segment),
// and the same commit moves a table property, the high-water mark of the
// job's log and sink (skipprd.applied.{wal-id}.{sink}). A job is applied
// when a retained snapshot names it with its content, or when its log's
// mark is at or past it (lane order: engine/compact.go). Every Append is
// pinned to a table state in which the job was looked for and not found,
// so no two attempts of a job — a retry after a lost answer, a zombie
// and its successor, two pipelines' hosts — both land: the first moves
// the table and the other's pin fails; the look after the failure finds
// the job. iceberg-go's own commit retries stay off: a retry inside the
// library would be blind. A snapshot naming the job with another content
// is a collision (engine.ErrCannotApply, engine.ErrIDCollision).
//
// Many pipelines can append to one table: each commit is pinned, a
// conflict with another writer's snapshot rebases onto it (after a look),
// and each log keeps its own mark.
//
// # Schema
//
// A table is created from the first job's columns (types.go has the
// mapping). A later job's new column is added (optional); an int column
// meeting a long widens to long, float to double; a column no change can
// make hold the job's values refuses the job (ErrCannotHold, wrapping
// engine.ErrCannotApply) naming the table and the column. Columns are
// only ever added or widened by this sink, so field ids are stable: a
// file written before a rebase keeps its ids (commit.go checks).
//
// # Bounded metadata
//
// After a commit, once a table retains ExpireSlack snapshots past its
// Retention (the newest 100 by default), the sink expires the oldest.
// Manifests are merged and old metadata files deleted by the catalog's
// table properties (package sqlcatalog). A replay of a job whose
// snapshot was expired is found by its log's mark.
//
// Every SmallFiles.Every commits to a table, the oldest day holding
// SmallFiles.MinFiles small files has them rewritten into one, a
// "replace" snapshot of its own, exactly once (rewrite.go): its inputs
// read twice and compared, the merged file named by a hash of them, the
// commit pinned, and after any error a look at which files are live.
//
// # Catalogs
//
// Catalog (catalog.go) is the seam: package sqlcatalog implements it on
// iceberg-go's SQL catalog (PostgreSQL for many hosts, SQLite for one);
// Model (model.go) is the seeded in-memory catalog the simulator and the
// tests drive, with faults: failures, lost answers, outages, and another
// pipeline committing first.
//
// Invariants:
//   - A table's snapshots name each compaction id at most once (the
//     simulator's oracle reads every snapshot ever committed).
//   - A log's mark only moves forward: appendFor panics, with the values,
//     if a commit would move it back.
//   - A data file is written before the snapshot that lists it commits,
//     and never rewritten with other bytes (the writers are create-only,
//     and a file found in place is judged by its footer's content).
//   - A rewrite's file holds exactly its inputs' rows: each input
//     decodes to the row count the table records for it, and the merged
//     file reads back their sum (merge.go checks both).
package iceberg
