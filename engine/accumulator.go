package engine

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// unit is one submitted ingest unit while the engine holds it: in the
// live accumulator, in a sealed snapshot, or being persisted.
type unit struct {
	idem    string          // idempotency key ("" for replayable sources)
	ns      string          // its partition key's namespace (for NamespaceStats)
	offsets segment.Offsets // the source offsets this unit holds (see Unit.Offsets)
	dones   []func(error)   // the submitter, plus any retries of the same idempotency key
	bytes   int64
	rows    int64
	since   time.Duration // Monotonic time the unit was appended

	// Disk WAL only: the log partition, the sequence number and the log
	// segment of its entry, set when the entry is durable (and the unit
	// acked, dones emptied).
	part uint32
	seq  uint64
	seg  *wal.Segment
	// replayed: rebuilt from the log at recovery. Its entry may be in the
	// page cache only (an fsync error the last process never rolled past),
	// so it is not taken as committed until its generation commits: its
	// keys stay pending and a retry waits for that commit (persist.go).
	replayed bool
}

// livePart is the accumulating content of one partition key.
//
// INVARIANT: every batch has schema Schema (up to field metadata: the key
// holds its fingerprint); cdc ⇔ the part has a sidecar, and then
// len(sidecar) equals the rows of batches (batchSet.accepts, check).
type livePart struct {
	key     segment.PartitionKey
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	cdc     bool
	sidecar []segment.CDCRow
	rows    int64 // Σ batches' rows
}

// batchSet is what a snapshot commits: parts in first-append order, the
// max-merged offsets, and the units whose ACKs wait for it. The live
// accumulator is a batchSet; sealing moves it into a snapshot.
//
// INVARIANT: index[p.key] is p's position in parts; bytes is the sum of
// units' bytes (check, where a set is rebuilt).
type batchSet struct {
	parts   []*livePart
	index   map[segment.PartitionKey]int
	offsets segment.Offsets
	units   []*unit
	bytes   int64
	gen     uint64 // disk WAL: the memtable generation (log dirty maps)
}

func newBatchSet() *batchSet {
	return &batchSet{index: map[segment.PartitionKey]int{}}
}

func (s *batchSet) empty() bool { return len(s.units) == 0 }

// part returns the part for key, creating it.
func (s *batchSet) part(key segment.PartitionKey, schema *arrow.Schema, cdc bool) *livePart {
	if i, ok := s.index[key]; ok {
		return s.parts[i]
	}
	p := &livePart{key: key, schema: schema, cdc: cdc}
	s.index[key] = len(s.parts)
	s.parts = append(s.parts, p)
	return p
}

// cdcOf reports whether key's part (if any) carries a sidecar.
func (s *batchSet) cdcOf(key segment.PartitionKey) (cdc, present bool) {
	if i, ok := s.index[key]; ok {
		return s.parts[i].cdc, true
	}
	return false, false
}

// add appends a unit's content. Content that would break its part's
// invariant — CDC and plain rows in one part, a sidecar of another length
// than the rows — is an error, and nothing is changed; so is a unit that
// joins twice in a row (a log handing the same durable unit over again),
// which would commit its rows twice: O(1), the last unit only.
func (s *batchSet) add(u *unit, in Unit) error {
	if n := len(s.units); n > 0 && s.units[n-1] == u {
		return invariantError("a unit joins a set once: unit %d of partition %d (%d bytes) is its last already, of %d", u.seq, u.part, u.bytes, n)
	}
	if err := s.accepts(in); err != nil {
		return err
	}
	p := s.part(in.Key, in.Schema, in.Sidecar != nil)
	if p.key != in.Key || len(s.index) != len(s.parts) {
		return invariantError("index[p.key] is p's position: unit for %v finds part %v; %d parts, %d index entries", in.Key, p.key, len(s.parts), len(s.index))
	}
	p.batches = append(p.batches, in.Batches...)
	for _, b := range in.Batches {
		p.rows += b.NumRows()
	}
	if in.Sidecar != nil {
		p.sidecar = append(p.sidecar, in.Sidecar.Rows...)
	}
	if p.cdc && int64(len(p.sidecar)) != p.rows {
		return invariantError("a CDC part's sidecar has a row per row: part %v holds %d sidecar rows for %d rows after a unit of %d batches", p.key, len(p.sidecar), p.rows, len(in.Batches))
	}
	if len(pendingKeys(in.Offsets)) < len(in.Offsets) {
		s.offsets = segment.MaxMerge(s.offsets, in.Offsets) // a floor drops what it covers
	} else {
		for _, o := range in.Offsets {
			s.offsets = s.offsets.Advance(o.Key, o.Value)
		}
	}
	s.units = append(s.units, u)
	s.bytes += u.bytes
	return nil
}

// accepts checks that in can join its part (livePart's INVARIANT). The
// schema needs no check here: a part's key holds its schema's
// fingerprint, and Submit checks every batch against the unit's schema
// and the unit's schema against the key (validateUnit).
func (s *batchSet) accepts(in Unit) error {
	if in.Sidecar != nil {
		var rows int64
		for _, b := range in.Batches {
			rows += b.NumRows()
		}
		if int64(len(in.Sidecar.Rows)) != rows {
			return invariantError("a CDC part's sidecar has a row per row: part %v gets %d sidecar rows for %d rows", in.Key, len(in.Sidecar.Rows), rows)
		}
	}
	if i, ok := s.index[in.Key]; ok && s.parts[i].cdc != (in.Sidecar != nil) {
		return invariantError("a part is all CDC or all plain: part %v is cdc=%v, a unit brings a sidecar=%v", in.Key, s.parts[i].cdc, in.Sidecar != nil)
	}
	return nil
}

// check verifies the set's invariants whole: each part at its index, its
// rows the sum of its batches', its sidecar one row per row when CDC;
// bytes the sum of its units'. It costs a pass over the set: it runs
// where a set is rebuilt (prepend), not per unit.
func (s *batchSet) check() error {
	if len(s.index) != len(s.parts) {
		return invariantError("index[p.key] is p's position: %d parts, %d index entries", len(s.parts), len(s.index))
	}
	for i, p := range s.parts {
		var rows int64
		for _, b := range p.batches {
			rows += b.NumRows()
		}
		switch {
		case s.index[p.key] != i:
			return invariantError("index[p.key] is p's position: part %v at %d, index says %d", p.key, i, s.index[p.key])
		case rows != p.rows:
			return invariantError("a part's rows are its batches': part %v counts %d, batches hold %d", p.key, p.rows, rows)
		case p.cdc && int64(len(p.sidecar)) != rows || !p.cdc && len(p.sidecar) > 0:
			return invariantError("a CDC part's sidecar has a row per row: part %v cdc=%v, %d sidecar rows, %d rows", p.key, p.cdc, len(p.sidecar), rows)
		}
	}
	var bytes int64
	for _, u := range s.units {
		bytes += u.bytes
	}
	if bytes != s.bytes {
		return invariantError("bytes is the sum of units' bytes: %d, units hold %d", s.bytes, bytes)
	}
	return nil
}

// prepend puts older content o in front of s, part by part, so that order
// within each partition key is kept when a failed snapshot's content
// returns to the accumulator ahead of newer units.
func (s *batchSet) prepend(o *batchSet) error {
	if o == s {
		return invariantError("a set is prepended another set's content: %d units prepended to themselves", len(s.units))
	}
	merged := newBatchSet()
	for _, src := range []*batchSet{o, s} {
		for _, p := range src.parts {
			m := merged.part(p.key, p.schema, p.cdc)
			m.batches = append(m.batches, p.batches...)
			m.sidecar = append(m.sidecar, p.sidecar...)
			m.rows += p.rows
		}
		merged.units = append(merged.units, src.units...)
		merged.bytes += src.bytes
	}
	merged.offsets = segment.MaxMerge(o.offsets, s.offsets)
	merged.gen = s.gen
	*s = *merged
	return s.check()
}

// encodeParts returns the parts in the form the segment encoder takes.
func (s *batchSet) encodeParts() []segment.Part {
	out := make([]segment.Part, len(s.parts))
	for i, p := range s.parts {
		out[i] = segment.Part{Key: p.key, Schema: p.schema, Batches: p.batches}
		if p.cdc {
			out[i].Sidecar = &segment.Sidecar{Rows: p.sidecar}
		}
	}
	return out
}

// releaseOffLoop drops a committed set's references off the loop where
// the executor can (Background): a generation of thousands of small
// units is as many Release calls, some milliseconds that every unit
// waiting for an fsync would spend behind it on the loop. The set is the
// work's alone: it was sealed, and its units are answered.
func (e *Engine) releaseOffLoop(s *batchSet) {
	if s == e.live {
		e.broken("only a sealed set is released: the live accumulator (%d units, %d parts) released", len(s.units), len(s.parts))
		return
	}
	if len(s.parts) == 0 && len(s.units) > 0 {
		// Every unit joins a part (add): a set of units without parts
		// was released before, and its batches must not be released twice.
		e.broken("a set is released once: %d units, %d bytes, their parts released already", len(s.units), s.bytes)
		return
	}
	parts := s.parts
	s.parts = nil
	release := func() {
		for _, p := range parts {
			for _, b := range p.batches {
				b.Release()
			}
			p.batches = nil
		}
	}
	if bg, ok := e.p.Exec.(Background); ok {
		bg.Background(release)
		return
	}
	release()
}

// unitBytes estimates what a unit costs in memory and in the body.
func unitBytes(in Unit) int64 {
	var n int64
	for _, b := range in.Batches {
		for _, col := range b.Columns() {
			n += dataBytes(col.Data())
		}
	}
	if in.Sidecar != nil {
		for _, r := range in.Sidecar.Rows {
			n += int64(11 + len(r.Identity))
		}
	}
	for _, o := range in.Offsets {
		n += int64(10 + len(o.Key))
	}
	return n + 64
}

// dataBytes sums the buffer sizes of an array and its children.
func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
