package segment

// Named limits. Every count and length read from bytes is checked against
// one of these before anything is allocated for it, and every encoder
// refuses input that would exceed them, so a writer can never produce an
// object its own reader rejects. limits_test.go checks the relations.
const (
	// BodyBytesMax bounds a .seg body. The writer targets 4–64 MiB; one
	// oversized ingest unit may overshoot the target, never this.
	BodyBytesMax = 1 << 30

	// PartsMax bounds PARTs per segment (distinct partition keys in one
	// snapshot) and therefore bits per completion bitmap.
	PartsMax = 1 << 14

	// KeyFieldBytesMax bounds sink_ref, namespace and partition. They end
	// up in Hive-style object keys, whose total length S3 caps at 1024.
	KeyFieldBytesMax = 256

	// PipelineBytesMax bounds a pipeline name in a commit marker's origin
	// (the daemon allows 128 bytes; the format leaves room).
	PipelineBytesMax = 256

	// PartRowsMax bounds rows per PART (and CDC sidecar rows).
	PartRowsMax = 1<<31 - 1

	// OffsetKeyBytesMax and OffsetsEntriesMax bound the offsets blob.
	// Idempotency keys of non-replayable sources are offsets too, so a busy
	// HTTP source can put many entries in one snapshot.
	OffsetKeyBytesMax   = 256
	OffsetsEntriesMax   = 1 << 16
	OffsetsBlobBytesMax = offsetsCountBytes + OffsetsEntriesMax*(lenPrefixBytes+OffsetKeyBytesMax+8)

	// SidecarIdentityBytesMax bounds one CDC event identity (a primary key
	// or a source event id); u16-prefixed on the wire.
	SidecarIdentityBytesMax = 4096

	// IndexEntryBytesMax bounds one encoded index entry (a PART header
	// without its magic); it is also how much a PART header read fetches.
	IndexEntryBytesMax = 4 + // slice_ordinal
		3*(lenPrefixBytes+KeyFieldBytesMax) + // sink_ref, namespace, partition
		1 + 8 + // time bucket flag + start
		8 + // schema fingerprint
		5*8 // arrow start/len, sidecar start/len, rows

	// MarkerBytesMax bounds a .seg.commit object.
	MarkerBytesMax = markerFixedBytes + markerOriginBytesMax + OffsetsBlobBytesMax + PartsMax*IndexEntryBytesMax +
		4 + CutsMax*cutBytesMax + sumBytes

	// BitmapBytesMax bounds an SCBL object.
	BitmapBytesMax = bitmapFixedBytes + PartsMax/8 + sumBytes
)

// Fixed sizes of the wire layouts (see doc.go).
const (
	magicBytes        = 4
	versionBytes      = 2
	lenPrefixBytes    = 2
	offsetsCountBytes = 4
	sumBytes          = 32

	// "SEGF" | u16 version | u64 created_at_unix_ms | u32 offsets_len
	bodyHeaderBytes = magicBytes + versionBytes + 8 + 4
	// "PART" | index entry
	partHeaderBytesMax = magicBytes + IndexEntryBytesMax
	// "FOOT" | u32 parts_count | [32] sha256
	footerBytes = magicBytes + 4 + sumBytes
	// smallest well-formed body: header, empty offsets blob, footer
	bodyBytesMin = bodyHeaderBytes + offsetsCountBytes + footerBytes

	// "SEGC" | u16 version | u64 body_bytes | [32] body_sha256
	// | u64 created_at_unix_ms | u32 parts_count | u32 offsets_len
	markerFixedBytes = magicBytes + versionBytes + 8 + sumBytes + 8 + 4 + 4
	// version 2: [16] wal_id | u16 pipeline_len | pipeline
	markerOriginBytesMax = WALIDBytes + lenPrefixBytes + PipelineBytesMax

	// "SCBL" | u16 version | u32 bit_count
	bitmapFixedBytes = magicBytes + versionBytes + 4

	// "CDCS" | u16 version | u32 row_count
	sidecarHeaderBytes = magicBytes + versionBytes + 4
	// u8 kind | u16 identity_len | u64 order_token (identity may be empty)
	sidecarRowBytesMin = 1 + lenPrefixBytes + 8
)

// Magic numbers and the versions this build writes and reads.
const (
	bodyMagic    = "SEGF"
	partMagic    = "PART"
	footMagic    = "FOOT"
	markerMagic  = "SEGC"
	bitmapMagic  = "SCBL"
	sidecarMagic = "CDCS"

	BodyVersion = 3
	// MarkerVersion is what this build writes: an origin and cuts
	// (spanning jobs). MarkerVersionOrigin — an origin, no cuts — and
	// MarkerVersionLegacy — neither — are what earlier builds wrote; both
	// are still read and written (an index without Spanning, or without an
	// origin), byte for byte as those builds did.
	MarkerVersion       = 3
	MarkerVersionOrigin = 2
	MarkerVersionLegacy = 1
	BitmapVersion       = 1
	SidecarVersion      = 1
)
