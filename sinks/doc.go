// Package sinks holds the engine's destinations (engine.Sink): Parquet
// objects on an object store, Parquet files in a local directory, and an
// in-memory destination for tests and the simulator; the Postgres sink is
// package sinks/postgres, the Iceberg sink sinks/iceberg (which writes
// its data files through ParquetObjects.WriteObject and
// ParquetDir.WriteFile: the same create-only writes, at paths and with
// bytes of its own). Set maps sink_ref names to them and is the engine's
// engine.Sinks.
//
// # The loop contract
//
// Every sink runs on the engine's loop like any port: Apply never blocks,
// and its done runs exactly once, later, on the loop — never inside Apply.
// Blocking and CPU work goes through the ports a sink is given: Parquet
// encoding through engine.Executor, I/O through engine.ObjectStore or
// engine.Disk (a database transaction through engine.Blocking), answers
// of the in-memory sink through engine.Timers, whose callbacks all run on
// the loop. Nothing here starts a goroutine or reads
// a clock, and the one random number (ParquetDir's writer token) comes
// from the engine.Rand it is given, so the same sinks run unchanged inside
// the deterministic simulator.
//
// # Exactly once
//
// The engine replays a job (same compaction_id, same slices) after a crash
// or a failed Apply, possibly many times; each sink makes the replay land
// on what the first attempt did, never beside it, and an error is never a
// partial apply:
//
//   - ParquetObjects (objects.go) writes one object per job at a key derived
//     from the job (ObjectKey), created with If-None-Match: *. A 412 means the
//     key is taken — by an earlier attempt, if the object is this job's: the
//     footer decides (below).
//   - ParquetDir (dir.go) writes one file per job: a temp file named after
//     the job and the writer, fsynced, renamed to the final name, the folder
//     synced. A final file that exists is this job's or not: the footer
//     decides. Two writers on one folder (a zombie and its successor) never
//     share a temp file.
//   - Memory (memory.go) keeps each job ID once, in first-apply order, with
//     its Content.
//
// # A name taken by another job
//
// A job's name (object key, file name, Memory's ID) is its compaction_id.
// Two logs could once make the same id (before WAL identities), so no sink takes an id
// it finds for "applied" on the id alone; each records the job's Content
// and origin beside it and compares (engine.Job):
//
//   - Parquet (existing.go): every file's key-value metadata records
//     skipprd.compaction_id, skipprd.content, skipprd.pipeline and
//     skipprd.wal_id (neither for a legacy job, whose Origin is zero),
//     skipprd.segment (the segment whose cut ends the job) and
//     skipprd.segments (how many segments hold its rows, the first and
//     the last: a job may span segments, engine.Job). Finding the name
//     taken, the sink reads the file's
//     footer through its port (ParquetObjects: HEAD for the size, a ranged
//     GET of the last 64 KiB, one more for a longer footer; ParquetDir:
//     Size and ReadAt of the open file; a footer over 64 MiB is not read)
//     and judges it on the Executor. skipprd.content equal to Job.Content:
//     applied. Another content: a collision. No content (a file of a build
//     before contents were recorded): the footer's row count and Arrow
//     schema (its ARROW:schema; names, nullability and types, not field
//     metadata or list element names) against the job's — equal: applied,
//     counted as LegacyTrusted in Stats; different: a collision. Bytes
//     that are not a Parquet footer: a collision (something foreign holds
//     the name). A collision stands only when a second read of the same
//     ranges returns the same bytes; reads that disagree, and read errors,
//     are ordinary errors the engine retries.
//   - Memory: the Content held under the ID.
//
// A collision is an error wrapping engine.ErrCannotApply and
// engine.ErrIDCollision that names the sink, the job, the object or file,
// and both contents and origins where known; the existing file is left
// as it is. The engine refuses the job, alerts id-collision and keeps its
// segment. The Postgres sink records and compares the same in its
// applied-jobs table (sinks/postgres).
//
// # Files
//
// EncodeParquet (parquet.go) turns a job into one Parquet file: the
// slices' Arrow columns in order, plus _cdc_op, _cdc_identity and
// _cdc_order for CDC jobs, in row groups of at most 2^20 rows and about
// 64 MiB of Arrow data, and the job's own metadata (JobMetadata); the
// same job always gives the same bytes. Keys and paths are Hive-style by
// the creation date of the segment whose cut ends the job (key.go):
//
//	{prefix}/{namespace}/p_year=YYYY/p_month=MM/p_day=DD/{job.ID}.parquet
package sinks
