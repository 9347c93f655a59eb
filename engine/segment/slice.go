package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Slice is one decoded PART: its record batches and CDC sidecar.
type Slice struct {
	Entry   IndexEntry
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch // owned by the Slice; see Release
	Sidecar *Sidecar            // nil unless the PART is CDC
	object  string              // body name, for errors
}

// Release releases the batches. The Slice must not be used afterwards.
func (s *Slice) Release() {
	for _, b := range s.Batches {
		b.Release()
	}
	s.Batches = nil
}

// eosMarker ends every Arrow IPC stream the encoder writes.
var eosMarker = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF), 0)

// ReadSlice decodes only the window of one PART: its Arrow IPC stream and
// sidecar. It checks that the stream's schema matches the key's
// fingerprint, that the stream fills its window exactly, and that the
// Arrow rows, the index entry's row count and the sidecar's row count
// agree (else ErrRowCountMismatch: the slice is refused). Batches
// reference the body's bytes in place (the reader must keep them alive and
// unchanged while the Slice lives); what the decoder allocates comes from
// mem. The caller releases the Slice.
// REQUIRES: o < len(b.Index.Entries).
func (b *Body) ReadSlice(o SliceOrdinal, mem memory.Allocator) (*Slice, error) {
	if int(o) >= len(b.Index.Entries) {
		panic(fmt.Sprintf("segment: slice %d of a body with %d parts", o, len(b.Index.Entries)))
	}
	e := b.Index.Entries[o]
	s := &Slice{Entry: e, object: b.name}
	if err := s.readSidecar(b.name, b.r); err != nil {
		return nil, err
	}
	window, err := readWindow(b.name, b.r, e.ArrowStart, e.ArrowLen)
	if err != nil {
		return nil, err
	}
	if err := s.decodeArrow(window, mem); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

func (s *Slice) readSidecar(name string, r io.ReaderAt) error {
	e := s.Entry
	if !e.HasSidecar() {
		return nil
	}
	b, err := readWindow(name, r, e.SidecarStart, e.SidecarLen)
	if err != nil {
		return err
	}
	sc, err := DecodeSidecar(name, b, e.SidecarStart)
	if err != nil {
		return err
	}
	if int64(len(sc.Rows)) != e.Rows {
		return s.fail("sidecar.row_count", e.SidecarStart, ErrRowCountMismatch,
			"sidecar has %d rows, the part has %d", len(sc.Rows), e.Rows)
	}
	s.Sidecar = sc
	return nil
}

// decodeArrow decodes the IPC stream in window, which comes from a
// verified body. Defence in depth all the same: no message may claim more
// metadata or body than the window, and a panic inside arrow-go becomes
// ErrCorrupt instead of a crash. Batches are not passed through
// array.ValidateRecordFull: the bytes are arrow-go's own writer output
// under a verified checksum, and that validator (v18.8.0) rejects the
// null-typed arrays arrow-go's own reader produces.
func (s *Slice) decodeArrow(window []byte, mem memory.Allocator) (err error) {
	e := s.Entry
	defer func() {
		if p := recover(); p != nil {
			err = s.fail("arrow", e.ArrowStart, ErrCorrupt, "arrow decoder panicked: %v", p)
		}
	}()
	if !bytes.HasSuffix(window, eosMarker) {
		return s.fail("arrow", e.ArrowStart, ErrCorrupt, "stream does not end with the end-of-stream marker")
	}
	// Messages are read in place (windowMessages): every length is
	// bounded by the window, and no body is copied.
	src := &windowMessages{b: window}
	rd, err := ipc.NewReaderFromMessageReader(src, ipc.WithAllocator(mem))
	if err != nil {
		return s.fail("arrow", e.ArrowStart, ErrCorrupt, "%v", err)
	}
	defer rd.Release()
	s.Schema = rd.Schema()
	if fp := FingerprintOf(s.Schema); fp != e.Key.Schema {
		return s.fail("arrow.schema", e.ArrowStart, ErrCorrupt,
			"stream schema fingerprint %016x, key says %016x", uint64(fp), uint64(e.Key.Schema))
	}
	var rows int64
	for rd.Next() {
		b := rd.RecordBatch()
		b.Retain()
		s.Batches = append(s.Batches, b)
		rows += b.NumRows()
	}
	if err := rd.Err(); err != nil {
		return s.fail("arrow", e.ArrowStart, ErrCorrupt, "%v", err)
	}
	if src.rest() != 0 {
		return s.fail("arrow", e.ArrowStart, ErrCorrupt, "%d bytes after the end of the stream", src.rest())
	}
	if rows != e.Rows {
		return s.fail("row_count", e.ArrowStart, ErrRowCountMismatch, "arrow has %d rows, the index says %d", rows, e.Rows)
	}
	return nil
}

func (s *Slice) fail(field string, off int64, sentinel error, format string, args ...any) error {
	return &FormatError{Kind: bodyKind, Object: s.object, Field: fmt.Sprintf("part[%d].%s", s.Entry.Ordinal, field),
		Offset: off, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// readWindow returns body bytes [off, off+n): a sub-slice of an in-memory
// body, else a fresh buffer of n ≤ BodyBytesMax bytes.
func readWindow(name string, r io.ReaderAt, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || n > BodyBytesMax {
		return nil, &FormatError{Kind: bodyKind, Object: name, Field: "window", Offset: off, Err: ErrCorrupt,
			Detail: fmt.Sprintf("window of %d bytes outside 0..%d", n, BodyBytesMax)}
	}
	if b, ok := r.(Bytes); ok {
		if off > int64(len(b)) || n > int64(len(b))-off {
			return nil, truncatedAt(name, off, int(n))
		}
		return b[off : off+n], nil
	}
	p := make([]byte, n)
	if err := readFull(name, r, p, off); err != nil {
		return nil, err
	}
	return p, nil
}
