package segment

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Index is a segment's metadata: everything in a body except the payloads.
// The encoder returns it, ReadIndex parses it from a body, and the commit
// marker carries a copy of it.
type Index struct {
	CreatedAtUnixMs int64
	Offsets         Offsets
	Entries         []IndexEntry
	BodyBytes       int64
	// BodySum is the footer checksum: SHA-256 of every body byte before it.
	BodySum [sumBytes]byte
	// Origin is the log that committed the segment, as its marker says;
	// zero in an index read from a body (bodies do not carry it) and in a
	// version 1 marker's.
	Origin Origin
	// Spanning (version 3 markers): the segment's PARTs join their lanes'
	// open jobs, which end where a Cut says (cut.go); Cuts are the jobs
	// this segment ends. False (versions 1 and 2, and an index read from a
	// body): every group of PARTs is a job of its own, as builds before
	// spanning jobs had it.
	Spanning bool
	Cuts     []Cut
}

// Equal reports whether two indexes describe the same body (the origin
// and the cuts, which only the marker carries, are not compared).
func (ix *Index) Equal(o *Index) bool {
	return ix.CreatedAtUnixMs == o.CreatedAtUnixMs && ix.BodyBytes == o.BodyBytes &&
		ix.BodySum == o.BodySum && slices.Equal(ix.Offsets, o.Offsets) &&
		slices.Equal(ix.Entries, o.Entries)
}

// Bytes is an in-memory body. It implements io.ReaderAt, and the decoders
// recognise it to hash and slice without copying.
type Bytes []byte

// ReadAt implements io.ReaderAt.
func (b Bytes) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, fmt.Errorf("segment: read at %d of %d bytes: %w", off, len(b), io.ErrUnexpectedEOF)
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

const bodyKind = "segment body"

// ReadIndex parses a body's header, offsets, PART headers and footer
// without touching the payloads: it reads O(parts) small windows, so its
// cost does not grow with payload bytes. It does not verify the checksum;
// use OpenBody or CheckBody for that.
func ReadIndex(name string, r io.ReaderAt, size int64) (*Index, error) {
	if size < bodyBytesMin || size > BodyBytesMax {
		sentinel := ErrCorrupt
		if size < bodyBytesMin {
			sentinel = ErrTruncated
		}
		return nil, &FormatError{Kind: bodyKind, Object: name, Field: "body", Err: sentinel,
			Detail: fmt.Sprintf("%d bytes, valid bodies are %d..%d", size, bodyBytesMin, BodyBytesMax)}
	}
	ix := &Index{BodyBytes: size}
	footStart := size - footerBytes
	partsCount, err := readFooter(name, r, footStart, ix)
	if err != nil {
		return nil, err
	}
	pos, err := readBodyHeader(name, r, footStart, ix)
	if err != nil {
		return nil, err
	}
	// Each PART header is at most partHeaderBytesMax; read that much (or up
	// to the footer) and parse it in place.
	buf := make([]byte, partHeaderBytesMax)
	for i := 0; pos < footStart; i++ {
		if i >= partsCount {
			return nil, &FormatError{Kind: bodyKind, Object: name, Field: "part", Offset: pos, Err: ErrCorrupt,
				Detail: fmt.Sprintf("more than the footer's %d parts", partsCount)}
		}
		window := buf[:min(int64(len(buf)), footStart-pos)]
		if err := readFull(name, r, window, pos); err != nil {
			return nil, err
		}
		c := newCursor(bodyKind, name, window, pos)
		c.scope = fmt.Sprintf("part[%d].", i)
		c.magic("magic", partMagic)
		e := c.indexEntry(i, pos, footStart)
		if err := c.failed(); err != nil {
			return nil, err
		}
		ix.Entries = append(ix.Entries, e)
		pos = e.End()
	}
	if len(ix.Entries) != partsCount {
		return nil, &FormatError{Kind: bodyKind, Object: name, Field: "footer.parts_count", Offset: footStart + magicBytes,
			Err: ErrCorrupt, Detail: fmt.Sprintf("footer says %d parts, body holds %d", partsCount, len(ix.Entries))}
	}
	return ix, nil
}

// readFooter parses "FOOT" | u32 parts_count | [32] sha256 into ix.
func readFooter(name string, r io.ReaderAt, footStart int64, ix *Index) (int, error) {
	var buf [footerBytes]byte
	if err := readFull(name, r, buf[:], footStart); err != nil {
		return 0, err
	}
	c := newCursor(bodyKind, name, buf[:], footStart)
	c.magic("footer.magic", footMagic)
	n := int(c.bounded("footer.parts_count", 4, PartsMax))
	ix.BodySum = c.sum("footer.sha256")
	return n, c.failed()
}

// readBodyHeader parses the fixed header and the offsets blob into ix and
// returns the offset of the first PART.
func readBodyHeader(name string, r io.ReaderAt, footStart int64, ix *Index) (int64, error) {
	var buf [bodyHeaderBytes]byte
	if err := readFull(name, r, buf[:], 0); err != nil {
		return 0, err
	}
	c := newCursor(bodyKind, name, buf[:], 0)
	c.magic("magic", bodyMagic)
	c.version("version", BodyVersion)
	ix.CreatedAtUnixMs = int64(c.u64("created_at_unix_ms"))
	n := int64(c.bounded("offsets_len", 4, uint64(min(OffsetsBlobBytesMax, footStart-bodyHeaderBytes))))
	if err := c.failed(); err != nil {
		return 0, err
	}
	blob := make([]byte, n)
	if err := readFull(name, r, blob, bodyHeaderBytes); err != nil {
		return 0, err
	}
	o, err := DecodeOffsets(name, blob, bodyHeaderBytes)
	if err != nil {
		return 0, err
	}
	ix.Offsets = o
	return bodyHeaderBytes + n, nil
}

// readFull reads len(p) bytes at off. A short read is a truncated object.
func readFull(name string, r io.ReaderAt, p []byte, off int64) error {
	if b, ok := r.(Bytes); ok {
		if off < 0 || off+int64(len(p)) > int64(len(b)) {
			return truncatedAt(name, off, len(p))
		}
		copy(p, b[off:])
		return nil
	}
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return truncatedAt(name, off, len(p))
	}
	return fmt.Errorf("segment: read %q at %d: %w", name, off, err)
}

func truncatedAt(name string, off int64, n int) error {
	return &FormatError{Kind: bodyKind, Object: name, Field: "body", Offset: off, Err: ErrTruncated,
		Detail: fmt.Sprintf("cannot read %d bytes", n)}
}

// VerifyBody checks a body's footer checksum: SHA-256 over every byte
// before the checksum must equal the checksum. It reads the whole body
// once; an in-memory Bytes body is hashed in place.
func VerifyBody(name string, r io.ReaderAt, size int64, want [sumBytes]byte) error {
	if size < sumBytes {
		return truncatedAt(name, 0, sumBytes)
	}
	h := sha256.New()
	if b, ok := r.(Bytes); ok && int64(len(b)) >= size {
		h.Write(b[:size-sumBytes])
	} else if _, err := io.CopyBuffer(h, io.NewSectionReader(r, 0, size-sumBytes), make([]byte, 1<<20)); err != nil {
		return fmt.Errorf("segment: hash %q: %w", name, err)
	}
	var got [sumBytes]byte
	h.Sum(got[:0])
	if got != want {
		return &FormatError{Kind: bodyKind, Object: name, Field: "footer.sha256", Offset: size - sumBytes,
			Err: ErrChecksum, Detail: fmt.Sprintf("body hashes to %x, want %x", got[:8], want[:8])}
	}
	return nil
}

// Body is a segment body whose checksum has been verified, with its index.
// It is the only way to reach ReadSlice: Arrow IPC is decoded from
// verified bytes only, because arrow-go's IPC reader trusts the flatbuffer
// lengths in its input (a flipped bit there can make it allocate without
// bound). The checksum turns such a flip into ErrChecksum first.
type Body struct {
	name  string
	r     io.ReaderAt
	Index *Index
}

// OpenBody parses a body's index and verifies its checksum.
func OpenBody(name string, r io.ReaderAt, size int64) (*Body, error) {
	ix, err := ReadIndex(name, r, size)
	if err != nil {
		return nil, err
	}
	if err := VerifyBody(name, r, size, ix.BodySum); err != nil {
		return nil, err
	}
	return &Body{name: name, r: r, Index: ix}, nil
}

// CheckBody verifies a body against the index its commit marker carries:
// same length, same checksum, same header, offsets and PART index. A body
// that passes is the body the marker committed.
func CheckBody(marker *Index, name string, r io.ReaderAt, size int64) (*Body, error) {
	if size != marker.BodyBytes {
		return nil, &FormatError{Kind: bodyKind, Object: name, Field: "body", Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes, commit marker says %d", size, marker.BodyBytes)}
	}
	b, err := OpenBody(name, r, size)
	if err != nil {
		return nil, err
	}
	if !b.Index.Equal(marker) {
		return nil, &FormatError{Kind: bodyKind, Object: name, Field: "index", Err: ErrCorrupt,
			Detail: "body index differs from the commit marker's copy"}
	}
	b.Index.Origin = marker.Origin
	return b, nil
}

var _ io.ReaderAt = Bytes(nil)
