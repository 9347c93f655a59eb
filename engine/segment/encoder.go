package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Part is one PART to encode: the batches of one partition key.
type Part struct {
	Key     PartitionKey
	Schema  *arrow.Schema       // every batch's schema; FingerprintOf(Schema) == Key.Schema
	Batches []arrow.RecordBatch // may be empty; borrowed, not released
	Sidecar *Sidecar            // nil unless CDC; one row per Arrow row
}

// Encoder streams a .seg body to an io.Writer, hashing as it writes, so
// the SHA-256 costs no second pass over the body. Use NewEncoder, WritePart
// for each PART in order, then Close. After any error the encoder is dead
// and what reached the writer must be discarded.
type Encoder struct {
	dst     *hashingWriter
	mem     memory.Allocator
	index   Index
	scratch []byte
	err     error // sticky
}

// NewEncoder writes the body header and offsets blob. createdAtUnixMs is
// wall time for humans and key names only; nothing orders by it. A nil mem
// means memory.DefaultAllocator (used only by the Arrow IPC writer).
func NewEncoder(w io.Writer, createdAtUnixMs int64, offsets Offsets, mem memory.Allocator) (*Encoder, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	e := &Encoder{
		dst:   &hashingWriter{w: w, h: sha256.New()},
		mem:   mem,
		index: Index{CreatedAtUnixMs: createdAtUnixMs, Offsets: offsets},
	}
	b := append(e.scratch[:0], bodyMagic...)
	b = binary.LittleEndian.AppendUint16(b, BodyVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(createdAtUnixMs))
	b = binary.LittleEndian.AppendUint32(b, uint32(offsets.encodedLen()))
	b, err := AppendOffsets(b, offsets)
	if err != nil {
		return nil, err
	}
	e.scratch = b
	if err := e.write(b); err != nil {
		return nil, err
	}
	return e, nil
}

// WritePart encodes one PART and returns its index entry.
func (e *Encoder) WritePart(p Part) (IndexEntry, error) {
	if e.err != nil {
		return IndexEntry{}, e.err
	}
	entry, err := e.writePart(p)
	if err != nil {
		e.err = fmt.Errorf("encode part %d (%s): %w", len(e.index.Entries), p.Key, err)
		return IndexEntry{}, e.err
	}
	e.index.Entries = append(e.index.Entries, entry)
	return entry, nil
}

func (e *Encoder) writePart(p Part) (IndexEntry, error) {
	rows, err := checkPart(p, len(e.index.Entries))
	if err != nil {
		return IndexEntry{}, err
	}
	// A PART header holds the Arrow stream's length, but the stream is
	// written straight through the hash. A counting pass first measures
	// it; that pass hands the writer every buffer without copying a byte.
	var count countingWriter
	if err := writeIPC(&count, p, e.mem); err != nil {
		return IndexEntry{}, err
	}
	sidecarLen := 0
	if p.Sidecar != nil {
		sidecarLen = p.Sidecar.encodedLen()
	}
	entry := IndexEntry{Ordinal: SliceOrdinal(len(e.index.Entries)), Key: p.Key, ArrowLen: count.n, SidecarLen: int64(sidecarLen), Rows: rows}
	header := appendIndexEntry(append(e.scratch[:0], partMagic...), entry)
	entry.ArrowStart = e.dst.n + int64(len(header))
	entry.SidecarStart = entry.ArrowStart + entry.ArrowLen
	if end := entry.End() + footerBytes; end > BodyBytesMax {
		return IndexEntry{}, tooLargef("body would reach %d bytes, limit %d", end, BodyBytesMax)
	}
	// Re-encode the header now that the offsets are known; its length is
	// unchanged because every offset field is fixed-width.
	e.scratch = appendIndexEntry(append(header[:0], partMagic...), entry)
	if err := e.write(e.scratch); err != nil {
		return IndexEntry{}, err
	}
	if err := writeIPC(e.dst, p, e.mem); err != nil {
		return IndexEntry{}, err
	}
	if got := e.dst.n - entry.ArrowStart; got != entry.ArrowLen {
		return IndexEntry{}, fmt.Errorf("segment: arrow stream wrote %d bytes, counted %d", got, entry.ArrowLen)
	}
	if p.Sidecar != nil {
		e.scratch, _ = AppendSidecar(e.scratch[:0], p.Sidecar) // validated by checkPart
		if err := e.write(e.scratch); err != nil {
			return IndexEntry{}, err
		}
	}
	return entry, nil
}

// checkPart validates p before any byte of it is written and returns its
// row count.
func checkPart(p Part, ordinal int) (int64, error) {
	if ordinal >= PartsMax {
		return 0, tooLargef("%d parts, limit %d", ordinal+1, PartsMax)
	}
	if err := p.Key.Validate(); err != nil {
		return 0, err
	}
	if p.Schema == nil {
		return 0, invalidf("part has no schema")
	}
	if fp := FingerprintOf(p.Schema); fp != p.Key.Schema {
		return 0, invalidf("schema fingerprint %016x, key says %016x", uint64(fp), uint64(p.Key.Schema))
	}
	var rows int64
	for i, b := range p.Batches {
		if !b.Schema().Equal(p.Schema) {
			return 0, invalidf("batch %d schema differs from the part schema", i)
		}
		rows += b.NumRows()
	}
	if rows > PartRowsMax {
		return 0, tooLargef("%d rows, limit %d", rows, PartRowsMax)
	}
	if p.Sidecar != nil {
		if err := p.Sidecar.Validate(); err != nil {
			return 0, err
		}
		if int64(len(p.Sidecar.Rows)) != rows {
			return 0, invalidf("sidecar has %d rows, batches have %d", len(p.Sidecar.Rows), rows)
		}
	}
	return rows, nil
}

func writeIPC(w io.Writer, p Part, mem memory.Allocator) error {
	iw := ipc.NewWriter(w, ipc.WithSchema(p.Schema), ipc.WithAllocator(mem))
	for i, b := range p.Batches {
		if err := iw.Write(b); err != nil {
			iw.Close()
			return fmt.Errorf("segment: write batch %d: %w", i, err)
		}
	}
	if err := iw.Close(); err != nil {
		return fmt.Errorf("segment: close arrow stream: %w", err)
	}
	return nil
}

// Close writes the footer and returns the body's index. The returned
// Index is exactly what the commit marker carries.
func (e *Encoder) Close() (*Index, error) {
	if e.err != nil {
		return nil, e.err
	}
	e.err = fmt.Errorf("segment: encoder closed")
	b := append(e.scratch[:0], footMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.index.Entries)))
	if err := e.write(b); err != nil {
		return nil, err
	}
	e.dst.h.Sum(e.index.BodySum[:0])
	if _, err := e.dst.w.Write(e.index.BodySum[:]); err != nil {
		return nil, fmt.Errorf("segment: write footer: %w", err)
	}
	e.index.BodyBytes = e.dst.n + sumBytes
	ix := e.index
	return &ix, nil
}

func (e *Encoder) write(b []byte) error {
	if _, err := e.dst.Write(b); err != nil {
		e.err = fmt.Errorf("segment: write body: %w", err)
		return e.err
	}
	return nil
}

// Encode writes a whole body from parts.
func Encode(w io.Writer, createdAtUnixMs int64, offsets Offsets, parts []Part, mem memory.Allocator) (*Index, error) {
	e, err := NewEncoder(w, createdAtUnixMs, offsets, mem)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if _, err := e.WritePart(p); err != nil {
			return nil, err
		}
	}
	return e.Close()
}

// hashingWriter forwards to w and hashes what w accepted.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}

type countingWriter struct{ n int64 }

func (cw *countingWriter) Write(p []byte) (int, error) {
	cw.n += int64(len(p))
	return len(p), nil
}
