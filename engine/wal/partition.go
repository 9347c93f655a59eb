package wal

import (
	"errors"
	"fmt"
)

// PartitionScan folds the segment files of one log partition, read in
// number order, into the records a recovery acts on, under the log's
// rules (doc.go) — the one place they are applied, for the engine's
// recovery and for any reader that only looks (the daemon's start-up
// check):
//
//   - every file starts with its own header (this partition, this
//     segment number), and no other header follows;
//   - units carry consecutive sequence numbers from the header's
//     first_seq;
//   - a header whose first_seq is at or below sequence numbers already
//     read supersedes them: those units were a poisoned batch, never
//     acked (Drop);
//   - a first_seq past the next expected number while units are held is
//     a gap;
//   - damage — a corrupt scan, a record that does not decode, a broken
//     rule — halts the partition: Halted holds the first reason, the
//     entries before it in that file are still delivered, and later
//     files are not read. A torn tail is cut (Add reports it).
//
// INVARIANT: the units held — delivered and not dropped — are the
// sequence numbers [lo, NextSeq), n of them (n = NextSeq - lo, or 0).
// Add panics at the end of a file that leaves it broken: no bytes read
// can, only a caller that moved NextSeq (or a bug of the scan's own).
type PartitionScan struct {
	Partition uint32
	// NextSeq is the sequence number the next unit is expected to carry:
	// a new file of the partition starts there.
	NextSeq uint64
	// Halted is the first damage found; nil while the partition reads clean.
	Halted error
	lo, n  uint64
}

// PartitionHooks receive what Add reads, in log order. Any may be nil.
// The records alias the image passed to Add.
type PartitionHooks struct {
	Unit    func(seg uint64, rec *UnitRecord)
	Seal    func(seg uint64, rec *SealRecord)
	Flushed func(seg uint64, rec *FlushedRecord)
	// Drop: the unit of sequence seq, delivered before, was superseded by
	// a later header (a poisoned batch).
	Drop func(seq uint64)
}

// NewPartitionScan starts the scan of partition part.
func NewPartitionScan(part uint32) *PartitionScan {
	return &PartitionScan{Partition: part, NextSeq: 1}
}

// ErrPartitionDamaged wraps every reason Halted holds that is not a
// corrupt scan (a *CorruptError).
var ErrPartitionDamaged = errors.New("wal: partition damaged")

// Add reads the image of segment file num (path names it in errors) and
// reports whether its tail was torn. After the partition halted, Add
// reads nothing.
func (s *PartitionScan) Add(num uint64, path string, image []byte, h PartitionHooks) (torn bool) {
	if s.Halted != nil {
		return false
	}
	r := Scan(path, image)
	if r.Corrupt != nil {
		s.Halted = r.Corrupt // the entries before it are still used
	}
	var next uint64 // the sequence number the next unit here must carry
	for i, ent := range r.Entries {
		rec, err := DecodeRecord(path, ent.Payload)
		if err != nil {
			s.halt(err)
			return r.Torn
		}
		hd, isHeader := rec.(*Header)
		switch {
		case i == 0 && !isHeader:
			s.halt(fmt.Errorf("%w: %s: first entry is not a header", ErrPartitionDamaged, path))
			return r.Torn
		case i == 0:
			if hd.Partition != s.Partition || hd.Segment != num {
				s.halt(fmt.Errorf("%w: %s: header names partition %d segment %d", ErrPartitionDamaged, path, hd.Partition, hd.Segment))
				return r.Torn
			}
			if !s.supersede(path, hd.FirstSeq, h.Drop) {
				return r.Torn
			}
			next = hd.FirstSeq
			continue
		case isHeader:
			s.halt(fmt.Errorf("%w: %s: a header at offset %d", ErrPartitionDamaged, path, ent.Offset))
			return r.Torn
		}
		switch rec := rec.(type) {
		case *UnitRecord:
			if rec.Seq != next {
				s.halt(fmt.Errorf("%w: %s: unit at offset %d has sequence %d, expected %d (no gaps)", ErrPartitionDamaged, path, ent.Offset, rec.Seq, next))
				return r.Torn
			}
			if s.n == 0 {
				s.lo = rec.Seq
			}
			s.n++
			if h.Unit != nil {
				h.Unit(num, rec)
			}
			next++
		case *SealRecord:
			if h.Seal != nil {
				h.Seal(num, rec)
			}
		case *FlushedRecord:
			if h.Flushed != nil {
				h.Flushed(num, rec)
			}
		}
	}
	if next > 0 {
		s.NextSeq = max(s.NextSeq, next)
	}
	if s.n > 0 && s.lo+s.n != s.NextSeq {
		panic(fmt.Sprintf("wal: the units held are [lo, NextSeq): partition %d holds %d from %d, next sequence %d", s.Partition, s.n, s.lo, s.NextSeq))
	}
	return r.Torn
}

// Units is how many units the partition holds: delivered, not dropped.
func (s *PartitionScan) Units() uint64 { return s.n }

// supersede applies a header's first_seq: units held at or above it were
// a poisoned batch (never acked) and are dropped; a first_seq past the
// next expected number while units are held is a gap.
func (s *PartitionScan) supersede(path string, first uint64, drop func(uint64)) bool {
	if s.n > 0 && first > s.NextSeq {
		s.halt(fmt.Errorf("%w: %s: first sequence %d, but the log before it ends at %d (a gap)", ErrPartitionDamaged, path, first, s.NextSeq-1))
		return false
	}
	for seq := max(first, s.lo); s.n > 0 && seq < s.lo+s.n; seq++ {
		if drop != nil {
			drop(seq)
		}
	}
	if s.n > 0 && first < s.lo+s.n {
		s.n = first - min(first, s.lo)
	}
	s.NextSeq = first
	return true
}

func (s *PartitionScan) halt(err error) {
	if s.Halted == nil {
		s.Halted = err
	}
}
