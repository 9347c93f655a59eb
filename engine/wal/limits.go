package wal

import "github.com/skipprd/skipprd/engine/segment"

// Named limits. Every length and count read from bytes is checked against
// one of these (and against the bytes that remain) before anything is
// allocated for it; every encoder refuses input beyond them.
// limits_test.go checks the relations.
const (
	// PartitionsMax bounds the WAL partitions: ids are 0..PartitionsMax-1,
	// and a seal's partitions field is a bitmask of them.
	PartitionsMax = 64

	// SegmentNumberMax is the largest segment number: 12 decimal digits.
	SegmentNumberMax = 999_999_999_999

	// DefaultSegmentBytes is the nominal size of a segment file.
	DefaultSegmentBytes = 32 << 20

	// SegmentBytesMax bounds a segment file's nominal size (a header's
	// segment_bytes): room for a header and the largest entry, with margin,
	// and an int on 32-bit hosts, since Scan reads a whole image.
	SegmentBytesMax = 1 << 30

	// SegmentBytesMin is the smallest nominal size: the header entry.
	SegmentBytesMin = headerEntryBytes

	// EntryPayloadMax bounds one entry's payload, and so one unit record.
	EntryPayloadMax = 64 << 20

	// IdempotencyKeyBytesMax bounds a unit's idempotency key: it becomes an
	// offset key.
	IdempotencyKeyBytesMax = segment.OffsetKeyBytesMax

	// DirBytesMax bounds a seal's dir.
	DirBytesMax = 1024

	// RangesMax bounds a seal's ranges.
	RangesMax = 1 << 16
)

// Fixed sizes of the wire layouts (see doc.go).
const (
	lengthBytes = 4 // entry length prefix
	crcBytes    = 4 // entry checksum
	kindBytes   = 1
	magic       = "SWAL"
	magicBytes  = 4 // len(magic), untyped

	headerEntryBytes = lengthBytes + HeaderBytes + crcBytes

	// u8 kind | u64 epoch | u64 seq | i64 created | u16 dir_len
	// | u64 partitions | u32 range_count
	sealFixedBytes = kindBytes + 8 + 8 + 8 + 2 + 8 + 4
	rangeBytes     = 8 + 8

	// u8 kind | u64 seq | u16 idem_len | u32 offsets_len | u32 arrow_len
	// | u32 sidecar_len (the key and the variable parts come on top)
	unitFixedBytes = kindBytes + 8 + 2 + 4 + 4 + 4
)

// HeaderBytes is the size of a header record's payload (every header has
// it); the header's entry takes EntryBytes(HeaderBytes):
// u8 kind | "SWAL" | u16 version | u32 partition | u64 segment
// | u64 first_seq | u64 segment_bytes.
const HeaderBytes = kindBytes + magicBytes + 2 + 4 + 8 + 8 + 8

// Version is the header version this build writes and reads.
const Version = 1
