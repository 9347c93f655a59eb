// Package objects is the replayable object source: it ingests every
// object under an S3 prefix (NewS3Store) or every regular file under a
// local directory, recursively (NewDirStore), into one namespace of one
// sink. It owns listing, reading, cutting objects into units and
// decoding them; it owns no durable state. Where each object resumes is
// the host's offsets view, which only the host writes, with the rows
// (sources/doc.go); the daemon wires a Source to storage.Host.Ingest.
//
// # Formats
//
// By extension (Config.Format "auto", any case): .jsonl and .ndjson are
// JSON lines, .csv is CSV with a header, .parquet is Parquet; or one
// format for every object. JSON lines and CSV are decoded by
// sources/http (httpsrc.Decode: its type inference, its limits, its
// errors), a chunk at a time; Parquet by arrow-go's pqarrow, a span of
// row groups at a time, its schema taken from the file without metadata
// (writers put per-file details there, and the engine keys partitions
// by fields alone). Every unit goes to partition "0" keyed by its
// schema's fingerprint: chunks whose inferred schemas differ go to
// different partition keys, as an HTTP source's bodies do.
//
// # Chunks
//
// A JSON-lines or CSV unit decodes at most Config.ChunkBytes bytes of
// text and Limits.Rows rows, cut between records: a JSON line, or a CSV
// record, which ends at a line break outside quotes (a quoted value may
// hold line breaks). Every CSV chunk is decoded with the header record
// in front, read again from the object's start when a source resumes.
// Blank records (which the decoders skip) never start a chunk, and those
// after a full chunk are covered by it without being decoded, so a
// chunk ends just before a row or at the object's end: no tail of blank
// lines is left without a unit to cover it. A record longer than a chunk
// is an error of the object. A chunk that decodes to more Arrow memory
// than the limits allow (sparse JSON: a column for every field any line
// has) is read again with half the budget, down to one row.
//
// # Offsets
//
// Each object has one offset key, "objects/{Name}/{key}"; a key that
// would make it longer than an offset key may be (256 bytes) is hashed:
// "objects/{Name}#/{sha256 of key, hex}" ('#' is not allowed in Name, so
// no plain key of any source takes that form). The value is, for JSON
// lines and CSV, the byte position just after the last record the units
// so far cover; for Parquet, the number of row groups ingested, with bit
// 63 set on the last unit's (its row-group count is in the footer, so
// without the mark telling whether it is done would cost a read of
// every Parquet object at every poll). An object is done when its value
// reaches its size (text) or has bit 63 (Parquet); a done object is
// passed over without being opened, and an empty (zero-byte) object is
// done from the start. A partly ingested object continues from its
// value. Each unit carries exactly its object's offset, so a unit
// committed before a crash but never acked is recognised by the engine
// when it comes again ("offsets already covered") and acked without
// being stored twice.
//
// # Several objects at once, and the floor
//
// Run lists the store a page at a time (Store.List, in key order) and
// hands each object that is not done to a task, up to Config.InFlight
// at once (dispatch.go; goroutines, or the simulator's coroutines
// through Config.Tasks). Each task ingests its object a unit at a time.
// The tasks share one progress (progress.go), under a lock never held
// across a read, an ingest or a sleep.
//
// With Order "keys" the source also keeps a floor (floorline.go): a key
// under which every object is done. It rises over an object once the
// object is done and a listing of its page was made at least Settle
// after it was first listed (so in a later pass; a pass ends at lineMax
// objects above the floor); listings
// start after it, and every unit carries it as a segment floor
// (engine/segment.FloorKey, family "objects/{Name}/"), which retires the
// offset keys it covers from the host's offsets view and from _offsets.
// So the host holds the floor and the keys of the objects above it,
// however many objects the prefix has had. The contract: names sort by
// arrival, give or take Settle; an object that appears under the floor
// is never listed. A skipped object under the floor is reported once.
// Objects whose offset key is hashed (long keys) keep their key.
//
// Invariants, each checked where it could break:
//   - One unit in flight per object: an object belongs to one task,
//     which awaits each unit's answer before making the next (the
//     engine's offsets are high-water marks; progress.claim checks it).
//   - Offsets only advance, and only on an ack: the source's own copy of
//     its offsets moves when ingest answers nil, to a value above the
//     one it had (claim refuses a unit that is not above).
//   - An object is never taken as done without all its rows acked: done
//     is read from that copy, whose value reaches an object's end only
//     with the ack of its last unit (settle checks it after the last).
//   - The floor covers only objects done: it rises over an object only
//     when finished says so, and a unit at or below it is refused
//     (submit); the simulator checks every floor a unit carries against
//     the engine's offsets.
//   - The store lists keys in ascending order, after the key asked for
//     (dispatch checks every page).
//
// Answers of ingest: engine.ErrResourceExhausted and engine.ErrNotReady
// are retried with the same unit after a backoff (25 ms doubling to
// 1 s), as are engine.ErrUnknownOutcome and any other error (the offset
// makes a retry safe); engine.ErrInvalidUnit is an error of the object;
// engine.ErrClosed before the context ends stops Run with an error. The
// unit in flight is not abandoned when the context ends: ingest runs
// without its cancellation, so a host closing gracefully can ack it.
//
// # Once
//
// With Config.Once a Run is one pass (once.go): the store is listed once,
// to its end, every object of that listing not done is ingested, and Run
// returns nil once every task has ended — each having had every unit it
// handed over answered — without polling again. A second once Run over
// the host's offsets ingests only what the first did not finish. A
// listing or read error of the store ends a once Run with that error
// (there is no next poll to retry at). With Order "keys" the floor does
// not rise in a once pass, which lists each object once: its objects keep
// their offset keys, as with Order "any".
//
// # Operating it
//
// Objects must be immutable once visible. A writer puts one in place by
// writing it under a temporary name and renaming it: names with a path
// segment starting with "." (hidden files and folders), or ending in
// ".tmp" or ".partial", are ignored, as are directories, symbolic links
// and S3 folder markers (keys ending in "/"). An object is read up to
// the size the listing gave; an object changed after it was listed is
// not detected.
//
// An object that cannot be ingested as it is — bad input, an unknown
// extension, a record longer than a chunk, an unreadable Parquet file —
// fails with an *ObjectError naming the source, the object, and the
// object's own line and byte offset (or Parquet row group) and field,
// whatever chunk it was found in. With OnError "stop" (the default) Run
// returns it; units acked before it stay acked, no new object starts,
// and the objects in flight stop after their unit. With "skip" it is logged at error level and counted in
// Stats().ObjectsSkipped, and the source moves on; a skipped object has
// no unit to mark it done, so every restart reports it again (with Order
// "keys", until the floor rises over it) — it is never dropped silently. An object holding no rows (blank lines, a CSV
// header alone, Parquet row groups of no rows) has no unit either: it is
// counted done and remembered in memory, and read again after a restart.
//
// A listing or read error of the store (the network, a file removed) is
// logged and retried at the next poll, from the object's acked position:
// it never skips data, whatever OnError says. Parquet reads go through
// a wrapper that tells such errors from a corrupt file.
//
// With Order "any" (the default) every object leaves one key in the
// host's source offsets for good. They hold a bounded number of keys for
// all sources together (engine Config.OffsetsViewMax, 2^18 by default,
// what one _offsets object holds); past it the host refuses units with
// new keys as backpressure (engine.ErrOffsetsViewFull), the source waits
// and says once in the log why, and that order "keys" lifts the bound.
// (Idempotency keys are not counted there.)
package objects
