// Package segment owns the bytes of the write-ahead log's objects: the
// SEGF v3 segment body (.seg), its commit marker (.seg.commit), the SCBL
// completion bitmap, the CDC sidecar, the offsets blob, the offsets
// checkpoint, and the idempotency-key runs and manifests. Everything that
// writes or reads those objects goes through this package; nothing else
// knows their layout.
//
// All integers are little-endian, all lengths explicit. Every count and
// length read from bytes is checked against a named limit (limits.go) and
// against the bytes that remain before anything is allocated for it; every
// encoder refuses input that would exceed those limits, so a writer never
// produces an object its reader rejects. Decoders never panic: they return
// a *FormatError naming the object, the field and its byte offset, which
// matches ErrCorrupt (or ErrUnsupportedVersion) under errors.Is.
//
// # Segment body (.seg), version 3
//
//	+------+-----+---------------+-------------+--------------+
//	| SEGF | u16 | u64           | u32         | offsets blob |
//	|      | 3   | created_at_ms | offsets_len |              |
//	+------+-----+---------------+-------------+--------------+
//	PART × n, n ≤ PartsMax, ordinals 0..n-1 in body order:
//	+------+---------------+-----+-------------+-----------+---------------+-------------+-----------+
//	| PART | u32 ordinal   | key | u64 arrow_  | u64 arrow | u64 sidecar_  | u64 sidecar | u64 rows  |
//	|      |               |     | start       | _len      | start         | _len        |           |
//	+------+---------------+-----+-------------+-----------+---------------+-------------+-----------+
//	| Arrow IPC stream (arrow_len bytes) | CDC sidecar (sidecar_len bytes, 0 if not CDC) |
//	+------------------------------------+-----------------------------------------------+
//	+------+-----------------+-------------------------------------+
//	| FOOT | u32 parts_count | [32] SHA-256 of every byte before it |
//	+------+-----------------+-------------------------------------+
//
// key = u16 len | sink_ref | u16 len | namespace | u16 len | partition
// | u8 bucketed | [i64 bucket_unix_ms] | u64 schema fingerprint.
// The layout is canonical: arrow_start is the byte after the PART header,
// the sidecar follows the stream, the next PART follows the sidecar, and
// the footer follows the last PART. The encoder streams the body through
// SHA-256 as it writes it; ReadIndex walks only the headers (cost O(parts),
// independent of payload bytes); ReadSlice decodes one PART's window.
//
// # Commit marker (.seg.commit), version 3
//
//	SEGC | u16 3 | u64 body_bytes | [32] body_sha256 | u64 created_at_ms
//	| [16] wal_id | u16 pipeline_len | pipeline            (versions 2, 3)
//	| u32 parts_count | u32 offsets_len | offsets blob
//	| parts_count × index entry (a PART header without "PART")
//	| u32 cuts_count | cuts                                 (version 3; cut.go)
//	| [32] SHA-256 of every byte before it
//
// body_sha256 is the body's footer checksum. The marker repeats the index
// and offsets so recovery registers a segment without reading its body;
// CheckBody binds a fetched body to its marker. The origin (origin.go)
// names the log that committed the segment: its WAL id, never zero, and
// its pipeline, 1..PipelineBytesMax bytes of UTF-8. The cuts end lanes'
// compaction jobs that span segments: canonical, one per group, ascending.
// Version 2 — no cuts — is what builds before spanning jobs wrote, and
// version 1 — no origin either — what builds before WAL identities
// wrote; both are still read (Index.Spanning false; Index.Origin zero in
// version 1), and an index encodes as the version its fields need, byte
// for byte.
//
// # Completion bitmap (SCBL), version 1
//
//	SCBL | u16 1 | u32 bit_count | ceil(bit_count/8) bytes, LSB first
//	| [32] SHA-256 of every byte before it
//
// Bits past bit_count are zero. Bits are only ever set (Merge is an OR).
//
// # CDC sidecar, version 1
//
//	CDCS | u16 1 | u32 row_count
//	| row_count × ( u8 kind | u16 identity_len | identity | u64 order_token )
//
// Row i describes Arrow row i of the PART; a count that differs from the
// Arrow rows is ErrRowCountMismatch and the slice is refused.
//
// # Offsets blob
//
//	u32 count | count × ( u16 key_len | key | u64 value ), keys strictly ascending
//
// Canonical: the same logical offsets always encode to the same bytes.
// A key "floor/{family}\x00{mark}" is a floor (floor.go): it covers every
// key of its family at or below the mark, and MaxMerge keeps a family's
// greatest floor without the keys it covers.
//
// # Offsets checkpoint (_offsets), version 1
//
//	OFCP | u16 1 | u64 writer_epoch | u32 offsets_len | offsets blob | [32] SHA-256
//
// (checkpoint.go; an older writer also wrote idempotency keys in it, and
// in per-bucket objects of the same format.)
//
// # Idempotency-key run, version 1
//
//	meta:    IDKR | u16 1 | u32 count | u64 min_value | u64 max_value
//	         | filter (64-byte blocks) | index ([16] first hash per block) | [32] SHA-256
//	block i: ≤ 512 × ( [16] key hash | u64 value ) | [32] SHA-256
//
// Sizes follow from count (keyrun.go): a reader GETs the meta, or one
// block, by range.
//
// # Idempotency-key manifest, version 1
//
//	IDKM | u16 1 | u64 writer_epoch | u32 runs
//	| runs × ( u64 epoch | u64 seq | u32 count | u64 min_value | u64 max_value ) | [32] SHA-256
//
// The runs of one time bucket (keymanifest.go).
package segment
