package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

const markerKind = "commit marker"

// markerEntryBytesMin is the smallest encoded index entry: empty partition,
// no time bucket, 1-byte sink_ref and namespace.
const markerEntryBytesMin = 4 + 3*lenPrefixBytes + 2 + 1 + 8 + 5*8

// EncodeMarker returns the .seg.commit object for a body's index:
//
//	"SEGC" | u16 version=1 | u64 body_bytes | [32] body_sha256
//	| u64 created_at_unix_ms | u32 parts_count
//	| u32 offsets_len | offsets blob
//	| parts_count × index entry (the PART headers without their magic)
//	| [32] sha256 of every preceding byte
//
// body_sha256 is the body's footer checksum. Carrying the index and the
// offsets lets recovery register a segment from its marker alone.
func EncodeMarker(ix *Index) ([]byte, error) {
	if len(ix.Entries) > PartsMax {
		return nil, tooLargef("marker: %d parts, limit %d", len(ix.Entries), PartsMax)
	}
	b := make([]byte, 0, markerFixedBytes+ix.Offsets.encodedLen()+len(ix.Entries)*IndexEntryBytesMax/4+sumBytes)
	b = append(b, markerMagic...)
	b = binary.LittleEndian.AppendUint16(b, MarkerVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(ix.BodyBytes))
	b = append(b, ix.BodySum[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(ix.CreatedAtUnixMs))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.Entries)))
	b = binary.LittleEndian.AppendUint32(b, uint32(ix.Offsets.encodedLen()))
	b, err := AppendOffsets(b, ix.Offsets)
	if err != nil {
		return nil, err
	}
	for i, e := range ix.Entries {
		if err := e.Key.Validate(); err != nil {
			return nil, fmt.Errorf("marker entry %d: %w", i, err)
		}
		b = appendIndexEntry(b, e)
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
	c.version("version", MarkerVersion)
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
	c.end("entries")
	if err := c.failed(); err != nil {
		return nil, err
	}
	return ix, nil
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
