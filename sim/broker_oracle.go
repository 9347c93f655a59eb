package sim

import (
	"fmt"
	"strings"
)

// The broker oracle: what a broker source (broker.go) may leave out of
// the WAL, checked against the broker's truth (broker_log.go), never
// against what the source says of itself.
//
//   - a gap the source reports must be records retention removed: a
//     non-empty range of the partition, all below its start;
//   - at the end, every record of a partition up to the last one
//     committed is committed (once: checkCommits), or inside a
//     reported gap, or — for a partition the source began without an
//     offset — below where it began, when nothing of the partition
//     below there was committed; anything else is a hole;
//   - a record read but never committed is excused only inside a
//     reported gap, below such a beginning, or past the last committed
//     record of a partition of a source that stopped on a gap.

// brokerGapReported records a gap the source reported (what the Kafka
// source logs or returns); a gap holding records retention did not
// remove fails the world.
func (w *World) brokerGapReported(s *source, g brokerGap) {
	b := s.brk
	if g.from == 0 || g.from >= g.to || g.to > b.start[g.p] {
		w.oracle.fail("source %s reported records %d..%d of partition %d lost to retention, but its log starts at %d: retention removed no record from %d",
			s.spec.Name, g.from, int64(g.to)-1, g.p, b.start[g.p], max(g.from, b.start[g.p]))
	}
	b.gaps = append(b.gaps, g)
}

// inGap reports whether record seq of partition p is inside a gap the
// source reported.
func (s *source) inGap(p int, seq uint64) bool {
	if s.brk == nil {
		return false
	}
	for _, g := range s.brk.gaps {
		if g.p == p && g.from <= seq && seq < g.to {
			return true
		}
	}
	return false
}

// begunAt is the highest record at which the source began partition p
// without an offset of it (1: from its first record).
func (s *source) begunAt(p int) uint64 {
	at := uint64(1)
	if s.brk != nil {
		for _, st := range s.brk.starts {
			if st.p == p {
				at = max(at, st.at)
			}
		}
	}
	return at
}

// committed reports whether a unit is in a marker that counts.
func (o *Oracle) committed(uid UID) bool {
	u := o.units[uid]
	return u != nil && o.hasValidMarker(uid)
}

// committedTo is the last record of partition p of broker source s
// that is committed (0: none).
func (o *Oracle) committedTo(s *source, p int) uint64 {
	for seq := s.highest[p]; seq > 0; seq-- {
		if o.committed(makeUID(s.idx, p, seq)) {
			return seq
		}
	}
	return 0
}

// brokerExcused reports whether a unit a source produced may be left
// uncommitted: a record of a broker source inside a gap it reported,
// below where it began a partition without an offset, or past the last
// committed record of its partition when the source stopped on a gap.
func (o *Oracle) brokerExcused(uid UID) bool {
	s := o.w.sourceOf(uid)
	if s.brk == nil {
		return false
	}
	p, seq := uid.partition(), uid.seq()
	return s.inGap(p, seq) || seq < s.begunAt(p) || s.brk.stopped && seq > o.committedTo(s, p)
}

// notDelivered reports whether a unit a recovery's offsets cover was
// never delivered: a broker source's record it reported lost, or never
// read (tablecheck.go's acknowledged units).
func (o *Oracle) notDelivered(uid UID) bool {
	return o.brokerExcused(uid) && !o.committed(uid)
}

// checkBrokerHoles runs when the world has converged: every record of
// every broker source's partitions up to the last committed one is
// committed, or excused by a reported gap or a beginning without an
// offset; no record below such a beginning is committed.
func (o *Oracle) checkBrokerHoles() {
	for _, s := range o.w.sources {
		if !s.broker() {
			continue
		}
		for p := range s.next {
			o.checkPartitionHoles(s, p)
		}
	}
}

func (o *Oracle) checkPartitionHoles(s *source, p int) {
	last, begun := o.committedTo(s, p), s.begunAt(p)
	var from uint64 // the first record of the hole being walked
	for seq := uint64(1); seq <= last+1; seq++ {
		uid := makeUID(s.idx, p, seq)
		ok := seq > last || o.committed(uid) || s.inGap(p, seq) || seq < begun
		if seq < begun && o.committed(uid) {
			o.fail("source %s began partition %d at record %d, its log's start, as if it held no offset of it; but record %d of it was committed", s.spec.Name, p, begun, seq)
			return
		}
		switch {
		case !ok && from == 0:
			from = seq
		case ok && from != 0:
			o.fail("source %s partition %d: records %d..%d were never committed, and no reported gap holds them (committed up to %d, gaps %s): a silent hole",
				s.spec.Name, p, from, seq-1, last, s.gapsOf(p))
			return
		}
	}
}

// gapsOf lists the gaps the source reported of partition p, for a
// message.
func (s *source) gapsOf(p int) string {
	var out []string
	if s.brk != nil {
		for _, g := range s.brk.gaps {
			if g.p == p {
				out = append(out, fmt.Sprintf("%d..%d", g.from, g.to-1))
			}
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}
