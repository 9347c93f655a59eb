package engine

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// A unit's log entry carries its batches as one Arrow IPC stream. The
// disk WAL keeps, in the memtable, what that stream decodes to — not the
// submitted batches — so a generation rebuilt from the log after a crash
// is the same data in the same form, and its snapshot body (and every
// compaction_id) comes out the same.

// PrepareUnit does, off the engine's loop, the encoding a disk-WAL
// engine would otherwise do on it when the unit is submitted: it returns
// in with its batches replaced by what their Arrow IPC stream decodes to,
// and the stream kept for the log entry. It is a pure function, safe on
// any goroutine. The returned batches are new and the caller's: release
// them after Submit, as any submitted batches (Submit retains what it
// keeps); Offsets and Sidecar are in's. A prepared unit whose Batches
// are changed afterwards is prepared again on the loop; an S3-WAL engine
// takes the batches as they are. Errors wrap ErrInvalidUnit.
func PrepareUnit(in Unit) (Unit, error) {
	// Submit checks the unit again, the decoded schema's fingerprint too.
	if err := validateUnit(in, in.Key.Schema); err != nil {
		return in, fmt.Errorf("%w: %v", ErrInvalidUnit, err)
	}
	out, err := canonicalUnit(in)
	if err != nil {
		return in, fmt.Errorf("%w: %v", ErrInvalidUnit, err)
	}
	out.prepared = slices.Clone(out.Batches)
	return out, nil
}

// preparedIntact says in is as PrepareUnit returned it.
func preparedIntact(in Unit) bool {
	if in.arrow == nil || len(in.prepared) != len(in.Batches) {
		return false
	}
	for i, b := range in.Batches {
		if b != in.prepared[i] {
			return false
		}
	}
	return true
}

// canonicalFor returns in's canonical form for the disk log, owned by
// the engine: a prepared unit's own batches, retained, or new ones.
func canonicalFor(e *Engine, in Unit) (Unit, error) {
	if preparedIntact(in) {
		e.mark(MarkWALPrepared)
		for _, b := range in.Batches {
			b.Retain()
		}
		in.prepared = nil
		return in, nil
	}
	return canonicalUnit(in)
}

// canonicalUnit returns in with its batches replaced by their decoded
// IPC stream (which it keeps in in.arrow, for the log entry).
func canonicalUnit(in Unit) (Unit, error) {
	var buf bytes.Buffer
	// The stream is the buffers, padded, and a few hundred bytes of
	// messages per batch: growing to it on the way costs more than this.
	buf.Grow(int(min(unitBytes(in), unitBytesMax)) + 1024*(1+len(in.Batches)))
	w := ipc.NewWriter(&buf, ipc.WithSchema(in.Schema), ipc.WithAllocator(memory.DefaultAllocator))
	var rows int64
	for _, b := range in.Batches {
		rows += b.NumRows()
		if err := w.Write(b); err != nil {
			return in, fmt.Errorf("encode unit batches for the log: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return in, fmt.Errorf("encode unit batches for the log: %w", err)
	}
	if buf.Len() > wal.EntryPayloadMax-unitRecordOverhead(in) {
		return in, fmt.Errorf("unit's Arrow stream of %d bytes does not fit a WAL entry (limit %d)", buf.Len(), wal.EntryPayloadMax)
	}
	out := in
	out.arrow, out.prepared = buf.Bytes(), nil
	schema, batches, err := decodeUnitArrow(out.arrow)
	if err != nil {
		return in, err
	}
	// Read back: the memtable keeps what the log entry decodes to, so
	// the decoded rows must be the submitted ones (O(batches)).
	var got int64
	for _, b := range batches {
		got += b.NumRows()
	}
	if got != rows {
		releaseUnit(Unit{Batches: batches})
		return in, invariantError("a unit's Arrow stream decodes to its rows: %d rows in %d batches encoded, %d in %d decoded",
			rows, len(in.Batches), got, len(batches))
	}
	out.Schema, out.Batches = schema, batches
	return out, nil
}

// unitRecordOverhead bounds a unit record's bytes besides its stream.
func unitRecordOverhead(in Unit) int {
	n := 64 + 3*256 + len(in.IdempotencyKey)
	for _, o := range in.Offsets {
		n += 10 + len(o.Key)
	}
	n += len(idemPrefix) + 10
	if in.Sidecar != nil {
		for _, r := range in.Sidecar.Rows {
			n += 11 + len(r.Identity)
		}
		n += 16
	}
	return n
}

// decodeUnitArrow decodes a unit's IPC stream. The batches are the
// caller's (released by releaseUnit).
func decodeUnitArrow(b []byte) (*arrow.Schema, []arrow.RecordBatch, error) {
	r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, nil, fmt.Errorf("decode unit batches: %w", err)
	}
	defer r.Release()
	var out []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := r.Err(); err != nil {
		for _, rec := range out {
			rec.Release()
		}
		return nil, nil, fmt.Errorf("decode unit batches: %w", err)
	}
	return r.Schema(), out, nil
}

// unitPayload encodes a canonical unit's log record with sequence number
// 0; the committer patches the sequence in when it forms a batch.
func unitPayload(in Unit) ([]byte, error) {
	return wal.AppendUnit(nil, wal.UnitRecord{
		Key: in.Key, IdempotencyKey: in.IdempotencyKey, Offsets: in.Offsets, Arrow: in.arrow, Sidecar: in.Sidecar,
	})
}

// unitFromRecord rebuilds a canonical unit from its log record.
func unitFromRecord(r wal.UnitRecord) (Unit, error) {
	schema, batches, err := decodeUnitArrow(r.Arrow)
	if err != nil {
		return Unit{}, err
	}
	if fp := segment.FingerprintOf(schema); fp != r.Key.Schema {
		releaseUnit(Unit{Batches: batches})
		return Unit{}, fmt.Errorf("unit %d: schema fingerprint %016x, key says %016x", r.Seq, uint64(fp), uint64(r.Key.Schema))
	}
	return Unit{Key: r.Key, Schema: schema, Batches: batches, Sidecar: r.Sidecar, Offsets: r.Offsets,
		IdempotencyKey: r.IdempotencyKey, arrow: r.Arrow}, nil
}

// releaseUnit drops the engine's reference to a canonical unit's batches.
func releaseUnit(in Unit) {
	for _, b := range in.Batches {
		b.Release()
	}
}
