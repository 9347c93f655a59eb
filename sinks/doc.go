// Package sinks holds sink implementations: Parquet on object storage and
// in a local directory (arrow-go pqarrow), Postgres, and an in-memory sink
// for tests and the simulator.
//
// Every sink is replay-safe on compaction_id: applying the same job twice
// leaves the destination as if it was applied once (an object key derived
// from the id written with If-None-Match: *, a temp file renamed into a
// name derived from the id, or the id inserted into an applied-ids table in
// the rows' own transaction).
package sinks
