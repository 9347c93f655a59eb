// Package engine is skipprd's deterministic core: the live accumulator,
// the WAL writers (S3 and disk), the compaction scheduler, reclaim,
// recovery and the offsets view, with every effect behind a port.
//
// The engine is a single-threaded state machine. It never starts a
// goroutine, never uses channels, select or sync, never reads the wall
// clock or global randomness, never touches the OS, the network or the AWS
// SDK, and never lets map iteration order decide anything. Effects are
// requested through ports and complete later through callbacks delivered
// on the engine's own loop. The very same code therefore runs in
// production (storage/ runs the loop and does the blocking work on worker
// goroutines) and inside the simulator (sim/ delivers completions from a
// seeded event queue), where a seed reproduces any run exactly.
// lint_test.go enforces these rules on every package under engine/.
//
// # Glossary
//
// One word, one meaning; these are distinct states of an ingest unit or a
// segment, in the order they happen — on the S3 WAL submitted, appended,
// committed, acked; on the disk WAL submitted, synced (which is
// committed), acked, then appended; both then applied and reclaimed:
//
//   - submitted: handed to the engine by a source; the engine may still
//     refuse it (ErrResourceExhausted).
//   - synced: disk WAL only — covered by a completed group-commit fsync
//     of the unit's log entry (the unit is committed and acked then, and
//     only then joins the memtable: the live accumulator).
//   - appended: in the live accumulator (memory only; lost on crash). On
//     the S3 WAL before it is committed; on the disk WAL after.
//   - committed: durable in the WAL. S3 mode: both {id}.seg and
//     {id}.seg.commit exist. Disk mode: synced. Recovery finds every
//     committed unit; nothing else is owned. A unit the disk WAL replays
//     after a restart is committed again only when its generation's
//     segment commits: an entry read back is not proof it is durable
//     (after a failed fsync the page cache may return bytes the disk
//     never got), so until then its keys are pending and a retry waits.
//   - acked: the source has been told the unit is committed. Never before
//     committed.
//   - applied: a slice has been written to its sink under its
//     compaction_id and its bit is set in the completion bitmap.
//   - reclaimed: every slice of a segment is applied and its objects are
//     deleted (.seg.commit first, then .seg, then the bitmap).
//
// Refusals are backpressure, never loss: a unit is refused with
// ErrResourceExhausted when admission memory is full, when the WAL holds
// LiveSegmentsMax segments not yet reclaimed (a sink slower than ingest,
// or down), when its offset key already has an unanswered unit, when the
// snapshot limits and the writer queue are full, when it could grow the
// source offsets past what _offsets holds (Config.OffsetsViewMax), or
// when it brings a new idempotency key while the key store uses its
// quarter of the memory pool (some 2.7 bytes a key: about 95 million
// keys on a 1 GiB pool). Idempotency keys have no count limit. The
// local-disk WAL adds its own refusals: ErrResourceExhausted while the
// unit's log partition holds more than PartitionBytesMax, and
// ErrPartitionHalted while that partition is halted on corruption.
//
// Reads are verified: every object read carries its own check (checksums,
// the lengths a marker promises), an answer that fails it is read again
// like a failed request, and only an object that fails it on every try is
// corrupt (read.go).
//
// Compaction jobs span segments: a lane's PARTs wait in its open job
// until the writer cuts it — by its sink's file size or flush interval,
// by the WAL pressure valve, at a close or a schema change — in the
// marker of the segment that ends it, so a job's membership and id are
// fixed by committed bytes before its first apply (cut.go, compact.go,
// jobs.go). Compaction takes the oldest job first across lanes, so
// segments complete, and are reclaimed, in order; a segment ending a job
// is reclaimed only once that job's bits are durable in its other live
// segments.
//
// A superseded writer that is still running (a zombie: it froze while a
// successor recovered) can neither ack nor delete: it reads the writer
// object after every marker lands and before every round of deletes, and
// fails closed with ErrFenced. An unheard marker PUT is never PUT again,
// only read (settled), since the successor may have owned, applied and
// reclaimed it meanwhile; and a writer whose segment vanished under it
// (body and marker gone) drops it (fence.go).
//
// The engine fails closed — nothing more is acked or deleted, every unit
// it holds is answered ErrClosed, Err reports why, and only a restart
// (recovery from the store) resumes — when an object the whole log
// depends on is corrupt (ErrCorrupt: the writer object, a marker during
// recovery or settling, the offsets checkpoint, an idempotency-key
// manifest, run or block),
// when a newer writer has claimed the pipeline (ErrFenced), and when one
// of its own invariants is broken (ErrInvariant: a bug, caught by a check
// placed where the invariant can break, with the values involved; see
// assert.go). A caller misusing the API (Start called twice) gets a panic
// instead: the state is not in question, the call is. Damage that only
// part of the log depends on halts only that part, with an alert: a job
// whose body stays unreadable is refused, its segment kept and its lane
// stopped (compact.go); a segment whose bitmap stays unreadable is kept
// for good (recovery.go) — its PARTs before a live cut of their lane, or
// before a live segment of another group of it, are taken as applied,
// and a job cut later that holds any other of its PARTs is refused, its
// lane stopped (settleLost, settleShaped, unboundedLost: compact.go);
// a local-disk log partition found corrupt halts
// alone (ErrPartitionHalted; wal_disk_recover.go).
//
// Alerts are events, not a flag: failing closed and every halt above
// raise one Alert — a kind (AlertKind: corruption, bitmap-unreadable,
// wal-partition-halted, cannot-apply, fenced, invariant, failed-closed)
// and the error naming the reason — into a queue bounded by AlertsMax
// that drops its oldest. AlertsSince(seq) drains it and says how many a
// slow reader missed; Stats.AlertsByKind counts every alert, dropped or
// not (alerts.go).
//
// Close is graceful: it commits and acks what is held (cutting every open
// job), applies what it can
// (a job failing during the close is left for the next start) and gives
// reclaims Config.StopGrace (CloseReclaimGrace by default);
// whatever is left is recovered like after a crash.
//
// A segment is one committed snapshot of the accumulator: a body of PARTs
// (one per partition key) described in package segment. A slice is one
// PART addressed by its ordinal.
//
// # Where things are
//
//   - engine.go: the Engine, New, its loop-facing methods and Close. The
//     Engine's state is split by stage, each a struct that owns its fields
//     and their invariants, declared beside the code that runs it:
//     admission (ingest.go), writing (flush.go), compaction (compact.go,
//     with check), checkpointing (checkpoint.go, with check) and
//     reporting (stats.go). Multi-step procedures are staged records
//     whose every step asserts its stage: recovery (recovery.go), a
//     snapshot's commit protocol (snapshot.stage, persist.go), a log
//     segment's creation (package wal's open) and a multipart upload
//     (multipart).
//   - ports.go, errors.go: the ports and their contracts; sentinels.
//   - counting.go: the object-store port wrapped to count every request
//     (retries included), so that recovery's cost can be stated, and to
//     check each one before it goes out (its key under the pipeline's
//     root, a bounded read, a part numbered within S3's limit).
//   - assert.go: how invariants are checked (fail closed with
//     ErrInvariant, or panic) and the checks that need more than a line.
//   - ingest.go, accumulator.go: Submit, admission, duplicates, the live
//     accumulator.
//   - durable.go: the seam between "a unit is durable (ack)" and "a
//     snapshot is a committed segment (compaction)": the S3 WAL's s3Log
//     and the local-disk WAL's diskLog. Where the disk log acts on an
//     event, s3Log checks the state the event implies in S3 mode (no
//     generation, no replay, nothing held for a log).
//   - wal_disk.go, wal_disk_hooks.go, wal_disk_unit.go: the local-disk
//     WAL's policy — admission, acks, the memtable's generations, seal and
//     flushed records, valves — over wal.Log, package wal's log core
//     (partitions, segment files, group commit, poisoning, pins,
//     deletion), which reports back through logHooks; wal_disk_recover.go,
//     wal_disk_replay.go: reading the log back and replaying it. The
//     log's bytes are package wal's too.
//   - flush.go, persist.go, retry.go: the coalescing writer and the commit
//     protocol (body, create-only marker, fence check, ack); regroup.go:
//     what a failed persist takes back, within a segment's limits.
//   - epoch.go, writer.go, fence.go: writer epochs, seals, fencing of
//     superseded writers (at commit and before deletes), segments another
//     writer reclaimed.
//   - read.go: verified reads (re-read what fails its check).
//   - coverage.go: coverage marks on the rare branches, counted per engine
//     for the simulator's coverage report.
//   - recovery.go, sweep.go: recovery from markers, bitmaps and the
//     offsets checkpoint; the orphan sweeper.
//   - planner.go: the cut planner, where the writer ends lanes' open
//     jobs (a pure decision); cut.go: the engine's side of it (inputs,
//     the interval timer, marks); jobs.go: compaction ids and contents.
//   - compact.go, apply.go, reclaim.go, cache.go, memory.go: compaction
//     jobs and lanes, body loading (cache, GET, stream), completion
//     bitmaps, reclaim, the memory pool; stream.go: a body larger than
//     the cache read in verified ranged chunks.
//   - checkpoint.go: the offsets checkpoint's coalesced write rounds
//     (_offsets, then the key store), recovery reads, the bucket sweeper.
//   - keystore.go, keystore_io.go, keystore_lookup.go, keystore_merge.go:
//     the idempotency keys of the window — recent keys in memory,
//     immutable runs of key hashes on the store, listed per time bucket
//     by a manifest; lookups on a filter hit, size-tiered merges, expiry.
//   - offsets_view.go, floors.go, keys.go, config.go, stats.go: the
//     source offsets (with what is durable in _offsets; a floor retires
//     the keys of its family it covers, and is never pending), key
//     layout, configuration,
//     counters (totals, per namespace in name order, latency histograms
//     of fixed buckets, the memory pool's use).
//   - alerts.go: the alert queue and its kinds.
//   - tape.go: a read-only picture of the live segments, their PARTs and
//     the flush delay, for the operator's live view.
package engine
