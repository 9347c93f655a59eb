// Package wal owns the local-disk write-ahead log: its bytes — file
// names, entry framing, the four record kinds, and Scan, recovery's reader
// of one segment file's image — and its core, Log (log.go): partitions of
// segment files, group commit, poisoning, generation pins and deletion,
// over the Disk port (port.go, which package engine re-exports) and the
// engine's timers. The codec does no I/O; Log does its I/O only through
// the ports, on the engine's loop, and knows nothing of acks, memtables or
// recovery policy: it reports what happened through Hooks. The records
// embed the encodings of package segment (partition key, offsets blob,
// CDC sidecar); nothing else knows this layout.
//
// All integers are little-endian, all lengths explicit. Every length and
// count read from bytes is checked against a named limit (limits.go) and
// against the bytes that remain before anything is allocated for it;
// every encoder refuses what the decoder would reject, so a writer never
// writes what its reader refuses. Decoders never panic: DecodeRecord
// returns a *FormatError naming the record, the field and its byte offset
// within the payload; Scan reports corruption as a *CorruptError naming
// the file and both offsets. Both match segment.ErrCorrupt under
// errors.Is, like segment.FormatError (a version this build cannot read
// matches segment.ErrUnsupportedVersion instead).
//
// # Files
//
//	wal/                                   Root
//	wal/partition-{p}/                     p in 0..PartitionsMax-1, decimal, no padding
//	wal/partition-{p}/segment-{n:012}.wal  n in 0..SegmentNumberMax, zero-padded to 12 digits
//
// A segment file has a fixed nominal size (DefaultSegmentBytes unless its
// header says otherwise), is preallocated — every byte after the last
// entry is zero — and is deleted whole. Numbers only grow within a
// partition; gaps in the numbering are normal (deleted segments).
//
// # Entry framing
//
//	+------------+---------------------------+------------+
//	| u32 length | payload (length bytes)    | u32 crc32c |
//	+------------+---------------------------+------------+
//	  1 ≤ length ≤ EntryPayloadMax
//	  crc32c = CRC-32C (Castagnoli) over the 4 length bytes, then the payload
//
// The CRC covers the length, so a damaged length is detected like a
// damaged payload. A zero length is never written: it is how the
// preallocated tail reads.
//
// # Segment file
//
//	+--------------+--------------+-----+--------------+--------------------+
//	| entry:Header | entry:record | ... | entry:record | 0x00 … (prealloc)  |
//	+--------------+--------------+-----+--------------+--------------------+
//	0                                                  End                  segment_bytes
//
// Scan walks entries from byte 0 and stops at the first invalid one (End).
// What follows End decides what the invalid bytes are:
//
//   - only zeros: a clean end; appends continue at End;
//   - a complete entry that fails its CRC — its length is in range, it
//     fits, and its last byte is not zero — with nothing valid after it:
//     corruption (ScanResult.Corrupt, Next = the byte after it). A write
//     torn by a crash stops part way, and the bytes after the tear keep
//     what was there: zeros (segments are preallocated and only ever
//     written past their end), so a torn entry's last byte is zero. An
//     entry written whole and damaged later (a flipped bit in the durable
//     image) keeps its last byte, so the last entry of a segment is not
//     silently dropped when media damage, not a crash, broke it (one in
//     256 such entries has a zero last byte and still reads as torn);
//   - some non-zero byte, but no valid entry anywhere after End: a torn
//     write from a crash (ScanResult.Torn) — discard it, append at End;
//   - a valid entry at some later byte offset: corruption
//     (ScanResult.Corrupt) — a crash keeps a prefix of a file's unsynced
//     writes, the last one possibly torn (the simulated disk's model), so
//     damage followed by a good entry is not a crash's doing: the engine
//     halts instead of dropping the entries that follow. (A disk that
//     kept a later unsynced write but lost an earlier one would read as
//     corruption too: a halt, the safe direction.)
//
// A later entry is valid when its length is in range, it fits, its CRC
// matches and its payload starts with a known kind. The search tries every
// byte offset but skips runs of zeros, so a preallocated tail costs one
// memory compare, and it answers each candidate's CRC in time independent
// of the candidate's length (crc.go), so searching a torn tail of
// random-looking bytes is linear in its size. An opaque payload (Arrow
// bytes) that itself holds a well-framed entry could make a torn tail read
// as corruption: the engine then halts rather than discards, the safe
// direction.
//
// # Records
//
// Every payload starts with a u8 kind; a record spans its payload exactly
// (trailing bytes are an error). Limits are in limits.go.
//
//	KindHeader (1), the first entry of every segment file, HeaderBytes long:
//	+------+------+-----------+---------------+----------------+---------------+-------------------+
//	| u8 1 | SWAL | u16 1     | u32 partition | u64 segment_no | u64 first_seq | u64 segment_bytes |
//	|      |      | (version) | < 64          | ≤ 999…9 (12)   |               | 43 .. 1 GiB       |
//	+------+------+-----------+---------------+----------------+---------------+-------------------+
//
// first_seq is the sequence number the next unit record is expected to
// carry; segment_bytes the file's nominal (preallocated) size. A version
// other than 1 is ErrUnsupportedVersion, not corruption.
//
//	KindUnit (2), one ingest unit:
//	+------+---------+-----+--------------+-----------------+
//	| u8 2 | u64 seq | key | u16 idem_len | idempotency key |
//	|      |         |     | ≤ 256        | (empty: none)   |
//	+------+---------+-----+--------------+-----------------+
//	+-----------------+--------------+---------------+------------------+
//	| u32 offsets_len | offsets blob | u32 arrow_len | Arrow IPC stream |
//	| ≤ segment limit |              | ≤ 64 MiB      | (opaque)         |
//	+-----------------+--------------+---------------+------------------+
//	+-----------------+-------------------------------------+
//	| u32 sidecar_len | CDC sidecar (sidecar_len 0: no CDC) |
//	| ≤ 64 MiB        |                                     |
//	+-----------------+-------------------------------------+
//
// key, offsets blob and sidecar are package segment's encodings
// (segment.AppendKey, segment.AppendOffsets, segment.AppendSidecar), with
// their limits. The Arrow stream is opaque here: it is checked when the
// unit is read back into a segment. A writer may encode a unit once and
// number it later (PutUnitSeq).
//
//	KindSeal (3), the boundary of a generation (one snapshot):
//	+------+--------------------+------------------+---------------------+
//	| u8 3 | u64 snapshot_epoch | u64 snapshot_seq | i64 created_unix_ms |
//	+------+--------------------+------------------+---------------------+
//	+-------------+-----+----------------+-----------------+---------------------------------+
//	| u16 dir_len | dir | u64 partitions | u32 range_count | range_count × (u64 lo | u64 hi) |
//	| ≤ 1024      |     | (bitmask)      | ≤ 65536         | lo ≤ hi                         |
//	+-------------+-----+----------------+-----------------+---------------------------------+
//
// partitions is the bitmask of the WAL partitions holding units of the
// generation; the ranges are the inclusive ranges of unit sequence
// numbers of this partition that belong to it, in content order (ranges
// are not sorted against each other).
//
//	KindFlushed (4): the generation has been committed as a segment.
//	+------+--------------------+------------------+
//	| u8 4 | u64 snapshot_epoch | u64 snapshot_seq |
//	+------+--------------------+------------------+
//
// Decoded records may alias the payload they were decoded from
// (UnitRecord.Arrow and the sidecar's identities do); copy them to keep
// them past the buffer's reuse. Strings never alias.
package wal
