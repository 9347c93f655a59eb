// Package postgrescdc is the Postgres change-data-capture source: it
// reads a database's committed inserts, updates and deletes through
// logical replication (the built-in pgoutput plugin, protocol version 1)
// and hands them to the host as CDC units — Arrow rows with a sidecar
// giving each row's kind, identity and order token — one namespace per
// table, all to one sink. The daemon runs a Source with
// storage.Host.Ingest and the host's recovered offsets, and gives it
// storage.Host.Offsets as Config.HostOffsets.
//
// It owns, on the server, the publication (created if missing, never
// altered) and the logical replication slot (created if missing, never
// dropped: dropping it is the operator's act of retiring the source).
// It owns no durable state: where it resumes is the host's offsets view,
// which only the host writes, and the slot's confirmed position, which
// the source moves only up to what the host has acked.
//
// # Rows
//
// A row's identity is its key columns' text forms in column order, each
// behind a u16 length (identity.go): the replica identity key, which is
// the primary key under REPLICA IDENTITY DEFAULT and FULL. Its order
// token is the LSN of the change's WAL record (the XLogData WALStart of
// its message): changes to one row are serialized by the row's lock, so
// a later change of a row has a higher token. An update that changes the
// key is a delete of the old identity and an insert of the new, at one
// token; a delete carries its key columns, the others NULL. Columns map
// to Arrow as types.go lists; every field is nullable. A sink applies a
// change only over a lower order token and keeps deletes as tombstones
// (sinks/postgres.ApplyChange), so replays and overlaps converge.
//
// # Snapshot
//
// The slot is created before any table is read, so every change
// committed after its consistent point is streamed. Each table whose
// snapshot offset is not marked done is then read in one REPEATABLE
// READ transaction through a cursor (ChunkRows rows a fetch, the
// publication's columns and row filter, ONLY the table itself), as
// inserts of order token 0: below every streamed change, so a row the
// stream has touched keeps the stream's version. Snapshot units are
// whole fetches, cut between rows, and carry the key
// pgcdc/{slot}/snapshot/{schema}.{table}, whose value (position.go) has
// bit 63 set on the last unit (an empty table's is a unit of no rows)
// and follows one of two schemes. Streaming starts only once every
// snapshot is acked.
//
// By key: a table whose replica identity key is one int2, int4 or int8
// column (a serial or bigint primary key), every key within
// ±(2^61−1) (for int8 the least and greatest are read first), is read
// ORDER BY the key — its index serves that, without a sort — and a
// unit's value holds the last key in it. A snapshot cut short (a crash,
// a stop) resumes in a new REPEATABLE READ transaction that reads WHERE
// key > last (and the row filter). That is exact. The slot was created
// before the first attempt read anything, and nothing is confirmed to
// it until every snapshot is acked (only streaming confirms, and it
// starts after), so the stream carries every transaction the first
// attempt's snapshot did not see. A row with a key at or below last was
// delivered by the attempt that read it, once, as that attempt's
// snapshot saw it; every later change to a key at or below last — an
// update, a delete, an insert, a key changed to or from it — committed
// after that snapshot and arrives through the stream with a higher
// order token. The resumed read takes only keys above last, each unit's
// above the one before (checked), so no snapshot row is delivered
// twice, and the same holds of each later resumption. A row above
// 2^61−1 that a resumed read meets was not in the snapshot that chose
// to read by key, so the stream carries it: the cursor leaves it out.
//
// Redo: any other table — a text, uuid, numeric or composite key, or an
// int8 key beyond ±(2^61−1) — is read whole as an attempt, value
// attempt<<32 | unit number; a snapshot cut short is redone whole as the
// next attempt, above every value of the one before. Its rows are then
// delivered again: an append-only sink (the Parquet lake, one row per
// CDC record) holds the rows the cut-short attempt had committed twice,
// both with order token 0; a sink applying by identity and order
// token (sinks/postgres) converges, as every change since either
// snapshot is streamed above them. A snapshot by key of a table whose
// key is no longer one integer column cannot resume: ErrSetup.
//
// After a crash the host may replay, pending until they commit, units
// its offsets view does not yet show. A snapshot planned from that view
// would deliver their rows again (by key) or number its attempt as
// theirs and have its own units dropped as covered by them (redo: rows
// lost). With HostOffsets the first unit of each table's snapshot in a
// Run is therefore one row (by key) or none (redo): the host refuses it
// while a replayed unit of its key is pending, then acks it, dropped as
// covered or stored; the host's offset read after it is final, and the
// snapshot resumes after its key, becomes the attempt after its, or, if
// it is done, ends.
//
// When the stream names a table the session does not know but should
// capture (any table of the publication without a table list, a listed
// one otherwise) — it joined the publication, or was created again — the
// source sets up again, once per table, and that session reads it from
// the catalog and snapshots it.
//
// # Positions and chunks
//
// The stream's changes to one table within one transaction are cut into
// chunks: after ChunkRows rows, once ChunkBytes bytes are reached, before
// a row of another schema, and at the commit. Chunk i of the transaction
// committed at LSN c is at Position c<<16 | i (position.go), the value of
// the table's key pgcdc/{slot}/{schema}.{table}. The cut depends only on
// the transaction's changes, so a replay cuts the same chunks at the same
// positions; a chunk at or below the table's acked position is dropped
// whole, any other is ingested whole. After a restart the host may still
// hold, pending until they commit, units it replayed from its log that
// the offsets it showed did not include, and the stream sends their
// chunks again: so each table's first unit of a Run is one chunk, and
// once it is acked the host's offsets are read again (HostOffsets) and
// the chunks they cover are dropped (fly) — a unit grouping replayed
// chunks with later ones would store them twice. The cut a slot was
// started with is recorded (pgcdc/{slot}/chunking) by the first unit
// ever acked, and a configuration that differs is refused: a different
// cut of a partly ingested transaction would drop or repeat rows.
//
// # Flights and confirmation
//
// Closed chunks accumulate per table until a flush is due (UnitRows rows
// in a table, FlushInterval elapsed, or the buffer limits reached). A
// flush is a flight: the accumulated chunks become units of whole chunks
// of one schema (at most UnitRows rows and UnitBytes bytes, offset the
// last chunk's position), a table's units submitted one at a time in
// order, up to IngestConcurrency tables at once. The stream goes on
// being read while a flight is out; one flight at a time, and reading
// pauses when the buffer is full. When every unit of a flight is acked,
// the slot is confirmed (StandbyStatusUpdate: write, flush and apply
// alike) up to the end LSN of the last transaction received whole when
// the flight started. With nothing received and unacked and no
// transaction open, a keepalive's WAL end is confirmed. Status updates go
// out at least every StatusInterval (at most a quarter of the server's
// wal_sender_timeout), waiting or not, and at once when asked.
//
// # Invariants
//
//   - The slot is never confirmed past a transaction with a change not
//     acked: confirmation follows a flight landing whole (flight.land), or
//     a keepalive while nothing is unacked (streamer.idle); it never
//     decreases (confirmTo), starting from the slot's own position.
//   - One unanswered unit per offset key: a table's units go in order
//     within a flight, flights one at a time, snapshots one table at a
//     time; the chunking offset rides on one unit at a time.
//   - Offsets only advance, and only on an ack (Source.acked panics on a
//     value not above the source's own) or to the host's own value
//     (max-merged; a snapshot's settle also refuses a host value below
//     what the source acked: ErrInvariant).
//   - A snapshot by key reads keys in strictly increasing order, each
//     within ±(2^61−1) (both checked: ErrInvariant), so its units'
//     values strictly increase, above every redo value.
//   - No chunk is stored twice: a chunk at or below its table's acked
//     position is dropped, and, given HostOffsets, no unit spans the end
//     of one the host replays after a restart.
//   - Positions only grow along the stream: transactions arrive in
//     increasing commit LSN and a transaction's changes never go back in
//     WAL position (both checked; the source fails closed otherwise), and
//     a commit LSN must be below 2^48 and a table's chunks in one
//     transaction fewer than 2^16.
//   - Memory is bounded: a chunk by ChunkRows and ChunkBytes (a row by
//     MessageBytesMax, which bounds every message the server sends), the
//     buffer by BufferRows and BufferBytes, a flight by the buffer; a
//     large transaction is submitted chunk by chunk as it arrives, never
//     held whole. Every count and length of a pgoutput message is checked
//     against what remains before use (pgoutput.go).
//
// # Once
//
// With Config.Once a Run ends on its own (once.go): its first session
// reads pg_current_wal_lsn() after setting up, and Run returns nil once
// the slot's confirmed position reaches it — every change committed
// before it acked, the flight in progress landed. While it waits with
// nothing unacked it asks the server for keepalives (ReplyRequested),
// whose WAL end it confirms, so WAL without captured changes does not
// hold it for half a wal_sender_timeout.
//
// # Failing closed
//
// Run returns, instead of guessing, on what a new session cannot fix:
// ErrSetup (wal_level is not logical, the server is older than 15, a
// table has no key or is missing from an existing publication, the slot
// is of another kind or lost WAL, the slot is gone while the offsets show
// the source used it, the chunk cut changed, a snapshot cut short by key
// on a table whose key is no longer one integer column); ErrStream (a
// TRUNCATE of a captured table; an update leaving a TOASTed value
// unchanged where the message lacks the old row — REPLICA IDENTITY FULL
// sends it; a key that is NULL or over 4096 bytes; a value with no Arrow
// form, such as a ±infinity date or timestamp); ErrInvariant; a unit the
// host refuses for good; an error of the server other than a lost
// connection, a server starting or stopping, lack of resources, or a
// slot still held by a previous connection — those start a new session
// after a backoff. On ErrStream everything received before the change at
// fault is acked first, and the slot confirmed up to the transaction
// before, where it then rests. The unit in flight when ctx ends is not
// abandoned: ingest runs without the cancellation, and Run returns once
// the host has answered.
//
// # Operating it
//
// The server needs wal_level = logical, a free replication slot and WAL
// sender for each source (max_replication_slots, max_wal_senders), and
// PostgreSQL 15 or later; the user needs the REPLICATION attribute,
// SELECT on the tables, and the right to create the publication (owner
// of the tables, or superuser for FOR ALL TABLES) unless it exists. A
// slot keeps WAL from being removed until the source confirms it: a
// stopped source makes the server's disk grow, and a retired source's
// slot must be dropped (SELECT pg_drop_replication_slot('slot')).
// Setting max_slot_wal_keep_size bounds the WAL a slot holds; a slot
// that passes it loses WAL, and the source then refuses to run.
package postgrescdc
