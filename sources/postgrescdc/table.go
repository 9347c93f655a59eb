package postgrescdc

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// table is a captured table during a session. Only the session's own
// goroutine touches it; a flight reports what it acked back to it.
type table struct {
	catalogTable
	streamKey, snapKey string

	// acked is the stream position acked for the table, or recovered.
	// INVARIANT: it only grows; a chunk at or below it is never
	// ingested again.
	acked uint64
	// settled: a unit of the table was acked since Run started, and the
	// host's offset read after it (fly).
	settled bool

	// The transaction in progress: the open chunk's rows and their
	// shape and bytes, and the chunks of this table it has cut so far.
	open      []row
	openShape *shape
	openBytes int64
	txChunks  int
	touched   bool

	// pending: chunks closed and not yet in a flight, in stream order.
	pending     []*chunk
	pendingRows int
}

// chunk is a run of one table's changes that is ingested whole: a
// stream chunk (chunk.go), or one snapshot fetch.
type chunk struct {
	value uint64 // the offset it advances its key to
	shape *shape
	batch arrow.RecordBatch
	cdc   []segment.CDCRow
	bytes int64
}

func (c *chunk) rows() int { return len(c.cdc) }

// newTable returns the session state of ct, its acked position read
// from the source's offsets.
func (s *Source) newTable(ct catalogTable) *table {
	t := &table{
		catalogTable: ct,
		streamKey:    streamKey(s.cfg.Slot, ct.name),
		snapKey:      snapshotKey(s.cfg.Slot, ct.name),
	}
	t.acked, _ = s.pos.Get(t.streamKey)
	t.settled = s.settled[t.streamKey]
	return t
}

// cutGroups groups chunks of a table, in order, into the chunks of
// each unit: whole chunks of one shape within the unit limits.
func (s *Source) cutGroups(chunks []*chunk) [][]*chunk {
	var out [][]*chunk
	start, rows, bytes := 0, 0, int64(0)
	for i, c := range chunks {
		if i > start && (!c.shape.equal(chunks[start].shape) ||
			rows+c.rows() > s.cfg.UnitRows || bytes+c.bytes > s.cfg.UnitBytes) {
			out = append(out, chunks[start:i])
			start, rows, bytes = i, 0, 0
		}
		rows += c.rows()
		bytes += c.bytes
	}
	if start < len(chunks) {
		out = append(out, chunks[start:])
	}
	return out
}

// unitOf is the unit of chunks (one shape, in order), advancing key to
// the last chunk's value; each chunk is one of its batches.
func (s *Source) unitOf(t *table, key string, chunks []*chunk) engine.Unit {
	sh := chunks[0].shape
	var cdc []segment.CDCRow
	batches := make([]arrow.RecordBatch, 0, len(chunks))
	for _, c := range chunks {
		if !c.shape.equal(sh) {
			panic("postgrescdc: a unit of chunks of two shapes")
		}
		batches = append(batches, c.batch)
		cdc = append(cdc, c.cdc...)
	}
	return engine.Unit{
		Key: segment.PartitionKey{
			SinkRef:   s.cfg.SinkRef,
			Namespace: t.name.table,
			Partition: "0",
			Schema:    sh.fp,
		},
		Schema:  sh.schema,
		Batches: batches,
		Sidecar: &segment.Sidecar{Rows: cdc},
		Offsets: segment.Offsets{{Key: key, Value: chunks[len(chunks)-1].value}},
	}
}

// releaseUnit drops the source's references to u's batches.
func releaseUnit(u engine.Unit) {
	for _, b := range u.Batches {
		b.Release()
	}
}
