// Package sinks holds the engine's destinations (engine.Sink): Parquet
// objects on an object store, Parquet files in a local directory, and an
// in-memory destination for tests and the simulator; the Postgres sink is
// package sinks/postgres. Set maps sink_ref names to them and is the
// engine's engine.Sinks.
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
//     from the job (ObjectKey), created with If-None-Match: *. A 412 means an
//     earlier attempt landed: success.
//   - ParquetDir (dir.go) writes one file per job: a temp file named after
//     the job and the writer, fsynced, renamed to the final name, the folder
//     synced. A final file that exists is applied: success. Two writers on
//     one folder (a zombie and its successor) never share a temp file.
//   - Memory (memory.go) keeps each job ID once, in first-apply order.
//
// # Files
//
// EncodeParquet (parquet.go) turns a job into one Parquet file: the
// slices' Arrow columns in order, plus _cdc_op, _cdc_identity and
// _cdc_order for CDC jobs; the same job always gives the same bytes. Keys
// and paths are Hive-style by the segment's creation date (key.go):
//
//	{prefix}/{namespace}/p_year=YYYY/p_month=MM/p_day=DD/{job.ID}.parquet
package sinks
