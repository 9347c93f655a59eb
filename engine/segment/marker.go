package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

const markerKind = "commit marker"

// markerEntryBytesMin is the smallest encoded index entry: empty partition,
// no time bucket, 1-byte sink_ref and namespace.
const markerEntryBytesMin = 4 + 3*lenPrefixBytes + 2 + 1 + 8 + 5*8

// EncodeMarker returns the .seg.commit object for a body's index:
//
//	"SEGC" | u16 version=3 | u64 body_bytes | [32] body_sha256
//	| u64 created_at_unix_ms
//	| [16] wal_id | u16 pipeline_len | pipeline          (versions 2, 3)
//	| u32 parts_count
//	| u32 offsets_len | offsets blob
//	| parts_count × index entry (the PART headers without their magic)
//	| u32 cuts_count | cuts                               (version 3; cut.go)
//	| [32] sha256 of every preceding byte
//
// body_sha256 is the body's footer checksum. Carrying the index and the
// offsets lets recovery register a segment from its marker alone. The
// origin (versions 2 and 3) names the log that committed the segment; the
// cuts (version 3) end lanes' spanning jobs. An index without Spanning
// encodes as version 2, and one without an origin as version 1, byte for
// byte what builds before cuts and before origins wrote.
func EncodeMarker(ix *Index) ([]byte, error) {
	if len(ix.Entries) > PartsMax {
		return nil, tooLargef("marker: %d parts, limit %d", len(ix.Entries), PartsMax)
	}
	version, err := markerVersion(ix)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, markerFixedBytes+markerOriginBytesMax+ix.Offsets.encodedLen()+len(ix.Entries)*IndexEntryBytesMax/4+
		4+len(ix.Cuts)*cutBytesMin*2+sumBytes)
	b = append(b, markerMagic...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint64(b, uint64(ix.BodyBytes))
	b = append(b, ix.BodySum[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(ix.CreatedAtUnixMs))
	if version >= MarkerVersionOrigin {
		b = append(b, ix.Origin.WAL[:]...)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(ix.Origin.Pipeline)))
		b = append(b, ix.Origin.Pipeline...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.Entries)))
	b = binary.LittleEndian.AppendUint32(b, uint32(ix.Offsets.encodedLen()))
	b, err = AppendOffsets(b, ix.Offsets)
	if err != nil {
		return nil, err
	}
	for i, e := range ix.Entries {
		if err := e.Key.Validate(); err != nil {
			return nil, fmt.Errorf("marker entry %d: %w", i, err)
		}
		b = appendIndexEntry(b, e)
	}
	if version == MarkerVersion {
		b = appendCuts(b, ix.Cuts)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// DecodeMarker parses and verifies a .seg.commit object. The returned
// index passes the same layout checks as one read from a body, so a marker
// can stand in for its body's metadata (recovery reads markers only).
func DecodeMarker(name string, b []byte) (*Index, error) {
	if len(b) > MarkerBytesMax {
		return nil, &FormatError{Kind: markerKind, Object: name, Field: "marker", Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes, limit %d", len(b), MarkerBytesMax)}
	}
	c := newCursor(markerKind, name, b, 0)
	c.magic("magic", markerMagic)
	version := c.versionIn("version", MarkerVersionLegacy, MarkerVersion)
	if err := c.failed(); err != nil {
		return nil, err
	}
	if err := checkTrailingSum(c, "sha256"); err != nil {
		return nil, err
	}
	ix := &Index{}
	ix.BodyBytes = int64(c.bounded("body_bytes", 8, BodyBytesMax))
	if c.err == nil && ix.BodyBytes < bodyBytesMin {
		c.pos -= 8
		c.fail("body_bytes", ErrCorrupt, "%d, smallest body is %d", ix.BodyBytes, bodyBytesMin)
	}
	ix.BodySum = c.sum("body_sha256")
	ix.CreatedAtUnixMs = int64(c.u64("created_at_unix_ms"))
	if version >= MarkerVersionOrigin {
		ix.Origin = c.origin()
	}
	parts := int(c.bounded("parts_count", 4, uint64(min(PartsMax, c.remaining()/markerEntryBytesMin))))
	offsetsLen := int(c.bounded("offsets_len", 4, uint64(min(OffsetsBlobBytesMax, c.remaining()))))
	blob := newCursor(markerKind, name, c.take("offsets", offsetsLen), c.at()-int64(offsetsLen))
	ix.Offsets = blob.offsets("offsets")
	blob.end("offsets")
	if err := firstErr(c, blob); err != nil {
		return nil, err
	}
	footStart := ix.BodyBytes - footerBytes
	pos := int64(bodyHeaderBytes + offsetsLen) // where the first PART sits in the body
	for i := range parts {
		c.scope = fmt.Sprintf("entry[%d].", i)
		e := c.indexEntry(i, pos, footStart)
		if c.err != nil {
			return nil, c.err
		}
		ix.Entries = append(ix.Entries, e)
		pos = e.End()
	}
	c.scope = ""
	if c.err == nil && pos != footStart {
		c.fail("body_bytes", ErrCorrupt, "parts end at %d, footer would start at %d", pos, footStart)
	}
	if version == MarkerVersion {
		ix.Spanning = true
		ix.Cuts = c.cuts()
	}
	c.end("entries")
	if err := c.failed(); err != nil {
		return nil, err
	}
	return ix, nil
}

// markerVersion is the version ix encodes as (see EncodeMarker).
func markerVersion(ix *Index) (uint16, error) {
	switch {
	case ix.Origin.IsZero() && (ix.Spanning || len(ix.Cuts) > 0):
		return 0, fmt.Errorf("marker: cuts need an origin (version %d)", MarkerVersion)
	case ix.Origin.IsZero():
		return MarkerVersionLegacy, nil
	}
	if err := ix.Origin.Validate(); err != nil {
		return 0, fmt.Errorf("marker: %w", err)
	}
	if !ix.Spanning {
		if len(ix.Cuts) > 0 {
			return 0, fmt.Errorf("marker: %d cuts in an index without spanning jobs", len(ix.Cuts))
		}
		return MarkerVersionOrigin, nil
	}
	if err := CheckCuts(ix.Cuts); err != nil {
		return 0, err
	}
	return MarkerVersion, nil
}

// origin reads a version 2 or 3 marker's origin: a zero WAL id or an empty,
// oversized or non-UTF-8 pipeline name is corruption (the encoder never
// writes one).
func (c *cursor) origin() Origin {
	var o Origin
	copy(o.WAL[:], c.take("wal_id", len(o.WAL)))
	start := c.pos
	o.Pipeline = string(c.bytes("pipeline", PipelineBytesMax))
	if c.err == nil && o.WAL.IsZero() {
		c.pos = start - len(o.WAL)
		c.fail("wal_id", ErrCorrupt, "zero WAL id in a version %d or %d marker", MarkerVersionOrigin, MarkerVersion)
	}
	if c.err == nil && (o.Pipeline == "" || !utf8.ValidString(o.Pipeline)) {
		c.pos = start
		c.fail("pipeline", ErrCorrupt, "pipeline name %q: want 1..%d bytes of UTF-8", o.Pipeline, PipelineBytesMax)
	}
	return o
}

// checkTrailingSum verifies that the last 32 bytes of the cursor's window
// are the SHA-256 of everything before them, then shrinks the window to
// exclude them.
func checkTrailingSum(c *cursor, field string) error {
	if len(c.buf) < c.pos+sumBytes {
		c.fail(field, ErrTruncated, "%d bytes cannot hold a checksum", len(c.buf))
		return c.err
	}
	end := len(c.buf) - sumBytes
	if sha256.Sum256(c.buf[:end]) != [sumBytes]byte(c.buf[end:]) {
		c.pos = end
		c.fail(field, ErrChecksum, "stored checksum does not match the preceding %d bytes", end)
		return c.err
	}
	c.buf = c.buf[:end]
	return nil
}

func firstErr(cs ...*cursor) error {
	for _, c := range cs {
		if err := c.failed(); err != nil {
			return err
		}
	}
	return nil
}
