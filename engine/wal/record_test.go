package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
	"pgregory.net/rapid"
)

func TestRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawRecord(t)
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, "prefix")
		b, err := encodeRecord(bytes.Clone(prefix), r)
		if err != nil {
			t.Fatalf("%s: %v", describe(r), err)
		}
		if !bytes.Equal(b[:len(prefix)], prefix) {
			t.Fatal("encoder changed dst")
		}
		payload := b[len(prefix):]
		got, err := DecodeRecord("t", payload)
		if err != nil {
			t.Fatalf("%s: %v", describe(r), err)
		}
		if got.Kind() != r.Kind() || describe(got) != describe(r) {
			t.Fatalf("decoded\n %s\nwant\n %s", describe(got), describe(r))
		}
		again, err := encodeRecord(nil, got)
		if err != nil || !bytes.Equal(again, payload) {
			t.Fatalf("re-encoding the decoded record: %v\n %x\nwant\n %x", err, again, payload)
		}
		if h, ok := r.(*Header); ok && len(payload) != HeaderBytes {
			t.Fatalf("header %v encodes to %d bytes, HeaderBytes = %d", h, len(payload), HeaderBytes)
		}
	})
}

// Decoded byte slices alias the payload but cannot grow into the bytes
// after them: an append to a decoded Arrow stream must not overwrite the
// sidecar length that follows it.
func TestDecodedArrowIsClipped(t *testing.T) {
	u := &UnitRecord{Key: segment.PartitionKey{SinkRef: "s", Namespace: "n"}, Arrow: []byte("arrow")}
	payload, err := AppendUnit(nil, *u)
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRecord("t", payload)
	if err != nil {
		t.Fatal(err)
	}
	arrow := r.(*UnitRecord).Arrow
	if cap(arrow) != len(arrow) {
		t.Fatalf("decoded Arrow has capacity %d for %d bytes", cap(arrow), len(arrow))
	}
	_ = append(arrow, 0xff, 0xff, 0xff, 0xff)
	if _, err := DecodeRecord("t", payload); err != nil {
		t.Fatalf("appending to a decoded Arrow stream damaged the payload: %v", err)
	}
}

func TestPutUnitSeq(t *testing.T) {
	u := UnitRecord{Seq: 0, Key: segment.PartitionKey{SinkRef: "s", Namespace: "n"}, Arrow: []byte{1}}
	payload, err := AppendUnit(nil, u)
	if err != nil {
		t.Fatal(err)
	}
	PutUnitSeq(payload, 1<<40+7)
	r, err := DecodeRecord("t", payload)
	if err != nil || r.(*UnitRecord).Seq != 1<<40+7 {
		t.Fatalf("got %v, %v; want seq %d", r, err, uint64(1<<40+7))
	}
	flushed, _ := AppendFlushed(nil, FlushedRecord{})
	for _, bad := range [][]byte{nil, payload[:5], flushed} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PutUnitSeq on %x did not panic", bad)
				}
			}()
			PutUnitSeq(bad, 1)
		}()
	}
}

// validKey is a small valid key.
var validKey = segment.PartitionKey{SinkRef: "lake", Namespace: "orders", Partition: "eu"}

// Every encoder refuses what its decoder would reject, and leaves dst as
// it was.
func TestEncodersRefuse(t *testing.T) {
	unit := func(edit func(u *UnitRecord)) func([]byte) ([]byte, error) {
		u := UnitRecord{Key: validKey, Arrow: []byte{1}}
		edit(&u)
		return func(dst []byte) ([]byte, error) { return AppendUnit(dst, u) }
	}
	header := func(edit func(h *Header)) func([]byte) ([]byte, error) {
		h := Header{SegmentBytes: DefaultSegmentBytes}
		edit(&h)
		return func(dst []byte) ([]byte, error) { return AppendHeader(dst, h) }
	}
	seal := func(edit func(s *SealRecord)) func([]byte) ([]byte, error) {
		var s SealRecord
		edit(&s)
		return func(dst []byte) ([]byte, error) { return AppendSeal(dst, s) }
	}
	for _, c := range []struct {
		name   string
		encode func([]byte) ([]byte, error)
		want   error
	}{
		{"header partition", header(func(h *Header) { h.Partition = PartitionsMax }), segment.ErrInvalid},
		{"header segment number", header(func(h *Header) { h.Segment = SegmentNumberMax + 1 }), segment.ErrInvalid},
		{"header segment_bytes below", header(func(h *Header) { h.SegmentBytes = SegmentBytesMin - 1 }), segment.ErrInvalid},
		{"header segment_bytes above", header(func(h *Header) { h.SegmentBytes = SegmentBytesMax + 1 }), segment.ErrInvalid},
		{"unit key", unit(func(u *UnitRecord) { u.Key.SinkRef = "" }), segment.ErrInvalid},
		{"unit key bucket", unit(func(u *UnitRecord) { u.Key.BucketUnixMs = 1 }), segment.ErrInvalid},
		{"unit idempotency key", unit(func(u *UnitRecord) { u.IdempotencyKey = strings.Repeat("k", IdempotencyKeyBytesMax+1) }), segment.ErrTooLarge},
		{"unit offsets unsorted", unit(func(u *UnitRecord) { u.Offsets = segment.Offsets{{Key: "b"}, {Key: "a"}} }), segment.ErrInvalid},
		{"unit offsets empty key", unit(func(u *UnitRecord) { u.Offsets = segment.Offsets{{Key: ""}} }), segment.ErrInvalid},
		{"unit arrow", unit(func(u *UnitRecord) { u.Arrow = make([]byte, EntryPayloadMax+1) }), segment.ErrTooLarge},
		{"unit payload", unit(func(u *UnitRecord) { u.Arrow = make([]byte, EntryPayloadMax) }), segment.ErrTooLarge},
		{"unit sidecar kind", unit(func(u *UnitRecord) { u.Sidecar = &segment.Sidecar{Rows: []segment.CDCRow{{Kind: 9}}} }), segment.ErrInvalid},
		{"seal dir", seal(func(s *SealRecord) { s.Dir = strings.Repeat("d", DirBytesMax+1) }), segment.ErrTooLarge},
		{"seal ranges", seal(func(s *SealRecord) { s.Ranges = make([]SeqRange, RangesMax+1) }), segment.ErrTooLarge},
		{"seal range lo > hi", seal(func(s *SealRecord) { s.Ranges = []SeqRange{{1, 1}, {3, 2}} }), segment.ErrInvalid},
	} {
		dst := []byte("prefix")
		out, err := c.encode(dst)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if string(out) != "prefix" {
			t.Errorf("%s: dst changed to %d bytes", c.name, len(out))
		}
	}
}

// The encoders accept exactly what the decoder accepts, at the edges of
// every limit: whatever encodes, decodes to the same record.
func TestEncodedIsDecodable(t *testing.T) {
	edge := func(t *rapid.T, label string, limit int) int {
		return rapid.SampledFrom([]int{0, 1, limit - 1, limit, limit + 1}).Draw(t, label)
	}
	rapid.Check(t, func(t *rapid.T) {
		var r Record
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			r = &Header{
				Partition:    uint32(edge(t, "partition", PartitionsMax)),
				Segment:      rapid.SampledFrom([]uint64{0, SegmentNumberMax, SegmentNumberMax + 1}).Draw(t, "segment"),
				SegmentBytes: uint64(rapid.SampledFrom([]int{0, SegmentBytesMin - 1, SegmentBytesMin, SegmentBytesMax, SegmentBytesMax + 1}).Draw(t, "segment_bytes")),
			}
		case 1:
			u := drawUnit(t)
			u.IdempotencyKey = strings.Repeat("i", edge(t, "idem_len", IdempotencyKeyBytesMax))
			u.Key.Namespace = strings.Repeat("n", edge(t, "namespace_len", segment.KeyFieldBytesMax))
			r = u
		case 2:
			s := drawSeal(t)
			s.Dir = strings.Repeat("d", edge(t, "dir_len", DirBytesMax))
			if rapid.Bool().Draw(t, "swap") && len(s.Ranges) > 0 {
				s.Ranges[0].Lo, s.Ranges[0].Hi = s.Ranges[0].Hi, s.Ranges[0].Lo
			}
			r = s
		}
		payload, err := encodeRecord(nil, r)
		if err != nil {
			return
		}
		got, err := DecodeRecord("t", payload)
		if err != nil {
			t.Fatalf("encoder accepted what the decoder rejects: %s: %v", describe(r), err)
		}
		if describe(got) != describe(r) {
			t.Fatalf("decoded %s, want %s", describe(got), describe(r))
		}
	})
}

// unitFields encodes a unit and returns its payload and the offset of
// every length field and of the key.
func unitFields(t *testing.T, u UnitRecord) ([]byte, map[string]int) {
	t.Helper()
	b, err := AppendUnit(nil, u)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{"seq": 1, "key": 9}
	p := 9 + len(segment.AppendKey(nil, u.Key))
	at["idem_len"] = p
	p += 2 + len(u.IdempotencyKey)
	at["offsets_len"] = p
	at["offsets"] = p + 4
	p += 4 + int(binary.LittleEndian.Uint32(b[p:]))
	at["arrow_len"] = p
	p += 4 + len(u.Arrow)
	at["sidecar_len"] = p
	at["sidecar"] = p + 4
	return b, at
}

// Every length the decoder reads is checked against its limit and against
// the bytes that remain, and the error names the field.
func TestDecoderLimits(t *testing.T) {
	sidecar := &segment.Sidecar{Rows: []segment.CDCRow{{Kind: segment.Insert, Identity: []byte("id"), Order: 1}}}
	unit, at := unitFields(t, UnitRecord{Seq: 5, Key: validKey, IdempotencyKey: "idem",
		Offsets: segment.Offsets{{Key: "k", Value: 1}}, Arrow: []byte("arrow"), Sidecar: sidecar})
	header, _ := AppendHeader(nil, Header{Partition: 1, Segment: 2, FirstSeq: 3, SegmentBytes: DefaultSegmentBytes})
	seal, _ := AppendSeal(nil, SealRecord{Dir: "dir", Ranges: []SeqRange{{1, 2}, {5, 9}}})
	flushed, _ := AppendFlushed(nil, FlushedRecord{Snapshot: SnapshotRef{1, 2}})
	const sealDirLen, sealRangeCount = 1 + 24, 1 + 24 + 2 + 3 + 8

	put16 := func(b []byte, at int, v uint16) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint16(b[at:], v)
		return b
	}
	put32 := func(b []byte, at int, v uint32) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[at:], v)
		return b
	}
	put64 := func(b []byte, at int, v uint64) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint64(b[at:], v)
		return b
	}
	rest := func(b []byte, at int) uint32 { return uint32(len(b) - at - 4) }
	// A seal with RangesMax+1 ranges' worth of bytes, so that the limit,
	// not the end, refuses the count.
	hugeSeal := append(put32(seal, sealRangeCount, RangesMax+1), make([]byte, (RangesMax+1)*rangeBytes)...)

	for _, c := range []struct {
		name, field string
		in          []byte
		want        error
	}{
		{"empty payload", "kind", nil, segment.ErrTruncated},
		{"payload over limit", "payload", make([]byte, EntryPayloadMax+1), segment.ErrCorrupt},
		{"kind 0", "kind", []byte{0}, segment.ErrCorrupt},
		{"kind 5", "kind", []byte{5, 0, 0}, segment.ErrCorrupt},

		{"header magic", "header.magic", append([]byte{1, 'S', 'W', 'A', 'X'}, header[5:]...), segment.ErrCorrupt},
		{"header version", "header.version", put16(header, 5, 2), segment.ErrUnsupportedVersion},
		{"header partition", "header.partition", put32(header, 7, PartitionsMax), segment.ErrCorrupt},
		{"header segment", "header.segment", put64(header, 11, SegmentNumberMax+1), segment.ErrCorrupt},
		{"header segment_bytes below", "header.segment_bytes", put64(header, 27, SegmentBytesMin-1), segment.ErrCorrupt},
		{"header segment_bytes above", "header.segment_bytes", put64(header, 27, SegmentBytesMax+1), segment.ErrCorrupt},
		{"header truncated", "header.segment_bytes", header[:HeaderBytes-1], segment.ErrTruncated},
		{"header trailing", "header.trailing", append(bytes.Clone(header), 0), segment.ErrCorrupt},

		{"unit seq truncated", "unit.seq", unit[:5], segment.ErrTruncated},
		{"unit key field over limit", "unit.key.sink_ref_len", put16(unit, at["key"], segment.KeyFieldBytesMax+1), segment.ErrCorrupt},
		{"unit key past end", "unit.key.schema", unit[:at["idem_len"]-1], segment.ErrTruncated},
		{"unit idem over limit", "unit.idempotency_key_len", put16(unit, at["idem_len"], IdempotencyKeyBytesMax+1), segment.ErrCorrupt},
		{"unit idem past end", "unit.idempotency_key", put16(unit[:at["idem_len"]+4], at["idem_len"], 3), segment.ErrTruncated},
		{"unit offsets over limit", "unit.offsets_len", put32(unit, at["offsets_len"], segment.OffsetsBlobBytesMax+1), segment.ErrCorrupt},
		{"unit offsets past end", "unit.offsets", put32(unit, at["offsets_len"], rest(unit, at["offsets_len"])+1), segment.ErrTruncated},
		{"unit offsets count past end", "unit.offsets.count", put32(unit, at["offsets"], 1000), segment.ErrCorrupt},
		{"unit arrow over limit", "unit.arrow_len", put32(unit, at["arrow_len"], EntryPayloadMax+1), segment.ErrCorrupt},
		{"unit arrow past end", "unit.arrow", put32(unit, at["arrow_len"], rest(unit, at["arrow_len"])+1), segment.ErrTruncated},
		{"unit sidecar over limit", "unit.sidecar_len", put32(unit, at["sidecar_len"], EntryPayloadMax+1), segment.ErrCorrupt},
		{"unit sidecar past end", "unit.sidecar", put32(unit, at["sidecar_len"], rest(unit, at["sidecar_len"])+1), segment.ErrTruncated},
		{"unit sidecar row count past end", "unit.sidecar.row_count", put32(unit, at["sidecar"]+6, 1000), segment.ErrCorrupt},
		{"unit sidecar short", "unit.sidecar.rows", put32(append(bytes.Clone(unit), 0), at["sidecar_len"], rest(unit, at["sidecar_len"])+1), segment.ErrCorrupt},
		{"unit trailing", "unit.trailing", append(bytes.Clone(unit), 0), segment.ErrCorrupt},

		{"seal dir over limit", "seal.dir_len", put16(seal, sealDirLen, DirBytesMax+1), segment.ErrCorrupt},
		{"seal dir past end", "seal.dir", put16(seal, sealDirLen, uint16(len(seal)-sealDirLen-2+1)), segment.ErrTruncated},
		{"seal range count over limit", "seal.range_count", hugeSeal, segment.ErrCorrupt},
		{"seal range count past end", "seal.range_count", put32(seal, sealRangeCount, 3), segment.ErrTruncated},
		{"seal range hi below lo", "seal.ranges[1].hi", put64(seal, len(seal)-8, 4), segment.ErrCorrupt},
		{"seal trailing", "seal.trailing", append(bytes.Clone(seal), 0), segment.ErrCorrupt},

		{"flushed truncated", "flushed.snapshot_seq", flushed[:len(flushed)-1], segment.ErrTruncated},
		{"flushed trailing", "flushed.trailing", append(bytes.Clone(flushed), 0), segment.ErrCorrupt},
	} {
		r, err := DecodeRecord(c.name, c.in)
		var fe *FormatError
		switch {
		case r != nil:
			t.Errorf("%s: accepted: %s", c.name, describe(r))
		case !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, c.want):
			t.Errorf("%s: got %v, want %v naming %s", c.name, err, c.want, c.field)
		case c.want != segment.ErrUnsupportedVersion && !errors.Is(err, segment.ErrCorrupt):
			t.Errorf("%s: %v does not match segment.ErrCorrupt", c.name, err)
		case fe.Object != c.name || !strings.Contains(err.Error(), c.field):
			t.Errorf("%s: message %q does not name the record and the field", c.name, err)
		case fe.Offset < 0 || fe.Offset > int64(len(c.in)):
			t.Errorf("%s: offset %d outside the %d-byte payload", c.name, fe.Offset, len(c.in))
		}
	}
	// Controls: the unmodified payloads decode.
	for _, b := range [][]byte{header, unit, seal, flushed} {
		if _, err := DecodeRecord("control", b); err != nil {
			t.Errorf("control: %v", err)
		}
	}
}
