package wal

import (
	"encoding/binary"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// Kind is a record's first payload byte.
type Kind uint8

const (
	KindHeader  Kind = 1
	KindUnit    Kind = 2
	KindSeal    Kind = 3
	KindFlushed Kind = 4
)

func (k Kind) known() bool { return k >= KindHeader && k <= KindFlushed }

func (k Kind) String() string {
	switch k {
	case KindHeader:
		return "header"
	case KindUnit:
		return "unit"
	case KindSeal:
		return "seal"
	case KindFlushed:
		return "flushed"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Record is a decoded record: *Header, *UnitRecord, *SealRecord or
// *FlushedRecord.
type Record interface {
	Kind() Kind
}

// Header is the first record of every segment file.
//
// INVARIANT: Partition < PartitionsMax; Segment ≤ SegmentNumberMax;
// SegmentBytesMin ≤ SegmentBytes ≤ SegmentBytesMax.
type Header struct {
	Partition    uint32
	Segment      uint64 // the file's number (its name carries it too)
	FirstSeq     uint64 // the seq the next unit record is expected to carry
	SegmentBytes uint64 // the file's nominal (preallocated) size
}

// UnitRecord is one ingest unit.
//
// INVARIANT: Key.Validate() == nil; len(IdempotencyKey) ≤
// IdempotencyKeyBytesMax (empty: none); Offsets.Validate() == nil;
// Sidecar, if not nil, is valid; the encoded payload is at most
// EntryPayloadMax bytes.
type UnitRecord struct {
	Seq            uint64
	Key            segment.PartitionKey
	IdempotencyKey string
	Offsets        segment.Offsets
	Arrow          []byte           // an Arrow IPC stream, opaque here; decoded: aliases the payload
	Sidecar        *segment.Sidecar // nil: not CDC; decoded identities alias the payload
}

// SnapshotRef names a snapshot (a generation): the writer epoch and the
// sequence number within it.
type SnapshotRef struct {
	Epoch, Seq uint64
}

// SeqRange is an inclusive range of unit sequence numbers.
//
// INVARIANT: Lo ≤ Hi.
type SeqRange struct {
	Lo, Hi uint64
}

// SealRecord closes a generation in this partition.
//
// INVARIANT: len(Dir) ≤ DirBytesMax; len(Ranges) ≤ RangesMax; every range
// has Lo ≤ Hi.
type SealRecord struct {
	Snapshot      SnapshotRef
	CreatedUnixMs int64
	Dir           string     // the segment's folder in the store
	Partitions    uint64     // bitmask of the WAL partitions holding units of the generation
	Ranges        []SeqRange // this partition's units of the generation, in content order
}

// FlushedRecord says a generation is committed as a segment.
type FlushedRecord struct {
	Snapshot SnapshotRef
}

func (*Header) Kind() Kind        { return KindHeader }
func (*UnitRecord) Kind() Kind    { return KindUnit }
func (*SealRecord) Kind() Kind    { return KindSeal }
func (*FlushedRecord) Kind() Kind { return KindFlushed }

// Validate reports whether h satisfies its invariant.
func (h Header) Validate() error {
	switch {
	case h.Partition >= PartitionsMax:
		return invalidf("header: partition %d, limit %d", h.Partition, PartitionsMax-1)
	case h.Segment > SegmentNumberMax:
		return invalidf("header: segment number %d, limit %d", h.Segment, uint64(SegmentNumberMax))
	case h.SegmentBytes < SegmentBytesMin || h.SegmentBytes > SegmentBytesMax:
		return invalidf("header: segment_bytes %d outside %d..%d", h.SegmentBytes, SegmentBytesMin, SegmentBytesMax)
	}
	return nil
}

// AppendHeader appends h's payload to dst.
func AppendHeader(dst []byte, h Header) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return dst, err
	}
	dst = append(dst, byte(KindHeader))
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, h.Partition)
	dst = binary.LittleEndian.AppendUint64(dst, h.Segment)
	dst = binary.LittleEndian.AppendUint64(dst, h.FirstSeq)
	return binary.LittleEndian.AppendUint64(dst, h.SegmentBytes), nil
}

// AppendUnit appends u's payload to dst. On error dst is returned as it
// was.
func AppendUnit(dst []byte, u UnitRecord) ([]byte, error) {
	if err := u.Key.Validate(); err != nil {
		return dst, fmt.Errorf("wal: unit %d: %w", u.Seq, err)
	}
	if len(u.IdempotencyKey) > IdempotencyKeyBytesMax {
		return dst, tooLargef("unit %d: idempotency key of %d bytes, limit %d", u.Seq, len(u.IdempotencyKey), IdempotencyKeyBytesMax)
	}
	if len(u.Arrow) > EntryPayloadMax {
		return dst, tooLargef("unit %d: Arrow stream of %d bytes, limit %d", u.Seq, len(u.Arrow), EntryPayloadMax)
	}
	start := len(dst)
	out := append(dst, byte(KindUnit))
	out = binary.LittleEndian.AppendUint64(out, u.Seq)
	out = segment.AppendKey(out, u.Key)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(u.IdempotencyKey)))
	out = append(out, u.IdempotencyKey...)
	out, err := appendSized(out, func(b []byte) ([]byte, error) { return segment.AppendOffsets(b, u.Offsets) })
	if err != nil {
		return dst, fmt.Errorf("wal: unit %d: %w", u.Seq, err)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(u.Arrow)))
	out = append(out, u.Arrow...)
	if u.Sidecar == nil {
		out = binary.LittleEndian.AppendUint32(out, 0)
	} else if out, err = appendSized(out, func(b []byte) ([]byte, error) { return segment.AppendSidecar(b, u.Sidecar) }); err != nil {
		return dst, fmt.Errorf("wal: unit %d: %w", u.Seq, err)
	}
	if n := len(out) - start; n > EntryPayloadMax {
		return dst, tooLargef("unit %d: payload of %d bytes, limit %d", u.Seq, n, EntryPayloadMax)
	}
	return out, nil
}

// PutUnitSeq overwrites the sequence number of an encoded unit payload
// (AppendUnit's output) in place, so a writer can encode a unit once and
// number it when it joins a batch.
//
// REQUIRES: payload is a unit payload (panics otherwise).
func PutUnitSeq(payload []byte, seq uint64) {
	if len(payload) < unitFixedBytes || Kind(payload[0]) != KindUnit {
		panic(fmt.Sprintf("wal: PutUnitSeq on a %d-byte payload that is not a unit record", len(payload)))
	}
	binary.LittleEndian.PutUint64(payload[kindBytes:], seq)
}

// appendSized appends a u32 length and what appendBody appends, the
// length patched in afterwards.
func appendSized(dst []byte, appendBody func([]byte) ([]byte, error)) ([]byte, error) {
	at := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst, err := appendBody(dst)
	if err != nil {
		return nil, err
	}
	n := len(dst) - at - 4
	if n > EntryPayloadMax {
		return nil, tooLargef("embedded object of %d bytes, limit %d", n, EntryPayloadMax)
	}
	binary.LittleEndian.PutUint32(dst[at:], uint32(n))
	return dst, nil
}

// Validate reports whether s satisfies its invariant.
func (s SealRecord) Validate() error {
	if len(s.Dir) > DirBytesMax {
		return tooLargef("seal %d.%d: dir of %d bytes, limit %d", s.Snapshot.Epoch, s.Snapshot.Seq, len(s.Dir), DirBytesMax)
	}
	if len(s.Ranges) > RangesMax {
		return tooLargef("seal %d.%d: %d ranges, limit %d", s.Snapshot.Epoch, s.Snapshot.Seq, len(s.Ranges), RangesMax)
	}
	for i, r := range s.Ranges {
		if r.Lo > r.Hi {
			return invalidf("seal %d.%d: range %d is %d..%d", s.Snapshot.Epoch, s.Snapshot.Seq, i, r.Lo, r.Hi)
		}
	}
	return nil
}

// AppendSeal appends s's payload to dst.
func AppendSeal(dst []byte, s SealRecord) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return dst, err
	}
	dst = append(dst, byte(KindSeal))
	dst = binary.LittleEndian.AppendUint64(dst, s.Snapshot.Epoch)
	dst = binary.LittleEndian.AppendUint64(dst, s.Snapshot.Seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.CreatedUnixMs))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s.Dir)))
	dst = append(dst, s.Dir...)
	dst = binary.LittleEndian.AppendUint64(dst, s.Partitions)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.Ranges)))
	for _, r := range s.Ranges {
		dst = binary.LittleEndian.AppendUint64(dst, r.Lo)
		dst = binary.LittleEndian.AppendUint64(dst, r.Hi)
	}
	return dst, nil
}

// AppendFlushed appends f's payload to dst. Every FlushedRecord is valid;
// the error is there for symmetry with the other encoders.
func AppendFlushed(dst []byte, f FlushedRecord) ([]byte, error) {
	dst = append(dst, byte(KindFlushed))
	dst = binary.LittleEndian.AppendUint64(dst, f.Snapshot.Epoch)
	return binary.LittleEndian.AppendUint64(dst, f.Snapshot.Seq), nil
}

// DecodeRecord parses one entry's payload (Entry.Payload); name is used in
// errors (e.g. the file and the entry's offset). Every length is checked
// against its limit and against the bytes that remain before it is used,
// and bytes after the record are an error. A failure is a *FormatError.
// UnitRecord.Arrow and sidecar identities alias payload.
func DecodeRecord(name string, payload []byte) (Record, error) {
	c := &cursor{name: name, buf: payload}
	if len(payload) > EntryPayloadMax {
		c.fail("payload", segment.ErrCorrupt, "%d bytes, limit %d", len(payload), EntryPayloadMax)
		return nil, c.err
	}
	kind := c.take("kind", kindBytes)
	if kind == nil {
		return nil, c.err
	}
	var r Record
	switch k := Kind(kind[0]); k {
	case KindHeader:
		r = c.header()
		c.end("header.trailing")
	case KindUnit:
		r = c.unit()
		c.end("unit.trailing")
	case KindSeal:
		r = c.seal()
		c.end("seal.trailing")
	case KindFlushed:
		r = c.flushed()
		c.end("flushed.trailing")
	default:
		c.pos = 0
		c.fail("kind", segment.ErrCorrupt, "unknown record kind %d", k)
	}
	if err := c.failed(); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *cursor) header() *Header {
	start := c.pos
	if m := c.take("header.magic", magicBytes); m != nil && string(m) != magic {
		c.pos = start
		c.fail("header.magic", segment.ErrCorrupt, "magic %q, want %q", m, magic)
	}
	start = c.pos
	if v := c.u16("header.version"); c.err == nil && v != Version {
		c.pos = start
		c.fail("header.version", segment.ErrUnsupportedVersion, "version %d, this build reads %d", v, Version)
	}
	h := &Header{}
	start = c.pos
	if h.Partition = c.u32("header.partition"); c.err == nil && h.Partition >= PartitionsMax {
		c.pos = start
		c.fail("header.partition", segment.ErrCorrupt, "%d, limit %d", h.Partition, PartitionsMax-1)
	}
	start = c.pos
	if h.Segment = c.u64("header.segment"); c.err == nil && h.Segment > SegmentNumberMax {
		c.pos = start
		c.fail("header.segment", segment.ErrCorrupt, "%d, limit %d", h.Segment, uint64(SegmentNumberMax))
	}
	h.FirstSeq = c.u64("header.first_seq")
	start = c.pos
	if h.SegmentBytes = c.u64("header.segment_bytes"); c.err == nil &&
		(h.SegmentBytes < SegmentBytesMin || h.SegmentBytes > SegmentBytesMax) {
		c.pos = start
		c.fail("header.segment_bytes", segment.ErrCorrupt, "%d outside %d..%d", h.SegmentBytes, SegmentBytesMin, SegmentBytesMax)
	}
	return h
}

func (c *cursor) unit() *UnitRecord {
	u := &UnitRecord{Seq: c.u64("unit.seq")}
	if c.err != nil {
		return u
	}
	k, n, err := segment.DecodeKey(c.name, c.buf[c.pos:])
	if err != nil {
		c.err = lift(c.name, "unit.", int64(c.pos), err)
		return u
	}
	u.Key = k
	c.pos += n
	idemLen := c.bounded("unit.idempotency_key_len", 2, IdempotencyKeyBytesMax)
	u.IdempotencyKey = string(c.take("unit.idempotency_key", idemLen))

	blobLen := c.bounded("unit.offsets_len", 4, segment.OffsetsBlobBytesMax)
	blobAt := c.pos
	if blob := c.take("unit.offsets", blobLen); c.err == nil {
		if u.Offsets, err = segment.DecodeOffsets(c.name, blob, 0); err != nil {
			c.err = lift(c.name, "unit.", int64(blobAt), err)
		}
	}

	arrowLen := c.bounded("unit.arrow_len", 4, EntryPayloadMax)
	u.Arrow = c.take("unit.arrow", arrowLen)

	sidecarLen := c.bounded("unit.sidecar_len", 4, EntryPayloadMax)
	sidecarAt := c.pos
	if sidecar := c.take("unit.sidecar", sidecarLen); c.err == nil && sidecarLen > 0 {
		if u.Sidecar, err = segment.DecodeSidecar(c.name, sidecar, 0); err != nil {
			c.err = lift(c.name, "unit.sidecar.", int64(sidecarAt), err)
		}
	}
	return u
}

func (c *cursor) seal() *SealRecord {
	s := &SealRecord{}
	s.Snapshot.Epoch = c.u64("seal.snapshot_epoch")
	s.Snapshot.Seq = c.u64("seal.snapshot_seq")
	s.CreatedUnixMs = int64(c.u64("seal.created_unix_ms"))
	dirLen := c.bounded("seal.dir_len", 2, DirBytesMax)
	s.Dir = string(c.take("seal.dir", dirLen))
	s.Partitions = c.u64("seal.partitions")
	// Each range takes rangeBytes: bound the count by what remains too,
	// before allocating for it.
	start := c.pos
	n := c.bounded("seal.range_count", 4, RangesMax)
	if c.err == nil && n > c.remaining()/rangeBytes {
		c.pos = start
		c.fail("seal.range_count", segment.ErrTruncated, "%d ranges need %d bytes, %d remain", n, n*rangeBytes, c.remaining()-4)
	}
	if c.err != nil || n == 0 {
		return s
	}
	s.Ranges = make([]SeqRange, n)
	for i := range s.Ranges {
		r := SeqRange{Lo: c.u64("seal.range.lo"), Hi: c.u64("seal.range.hi")}
		if c.err == nil && r.Lo > r.Hi {
			c.pos -= 8
			c.fail(fmt.Sprintf("seal.ranges[%d].hi", i), segment.ErrCorrupt, "range %d..%d: hi below lo", r.Lo, r.Hi)
			return s
		}
		s.Ranges[i] = r
	}
	return s
}

func (c *cursor) flushed() *FlushedRecord {
	f := &FlushedRecord{}
	f.Snapshot.Epoch = c.u64("flushed.snapshot_epoch")
	f.Snapshot.Seq = c.u64("flushed.snapshot_seq")
	return f
}
