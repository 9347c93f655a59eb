package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/skipprd/skipprd/engine/wal"
)

// Recovery of the disk WAL runs before the S3-style recovery of the
// segment store (recovery.go) and finishes after it:
//
//  1. readLog reads every partition's segments in number order and scans
//     them (package wal). A bad entry with nothing valid after it is a
//     torn tail: cut there. A bad entry followed by a valid one is
//     corruption: the partition halts — alert, writes refused, and it is
//     frozen as found: none of its units is delivered (not the damaged
//     entry, nothing after it, and not what precedes it either, since the
//     records that say which of those were already flushed may be the
//     damaged ones) and none of its segments is deleted, until an
//     operator has looked at it. A
//     segment whose header's first_seq is at or below sequence numbers
//     already read supersedes them: those entries were a poisoned batch
//     whose units were answered ErrUnknownOutcome.
//  2. The S3-style recovery seals older epochs at least up to every
//     generation the log sealed and did not see flushed (logIDs), so
//     replaying such a generation under its own id commits a valid marker.
//  3. replay decides each logged generation: owned (its segment is in
//     the store) ⇒ log it flushed everywhere, by this process, before the
//     segment may be reclaimed (a flushed record read back may be in the
//     page cache only); flushed (a flushed record in every partition
//     where its seal was read) ⇒ done; flushed in some of them only (a
//     crash between the partitions' records) ⇒ log it flushed again;
//     complete (its seal is in every partition it names, with all its
//     units) ⇒ persisted again under its own id, same created_at and
//     directory, so its body and compaction ids are the ones it would
//     have had; otherwise its units are unsealed. Unsealed units join the
//     memtable. A replayed unit was acked before the crash, but its log
//     entry read back proves nothing until its generation commits: its
//     offsets enter the view, and a retry of it is answered, only at that
//     commit (wal_disk_replay.go).
//  4. Each partition rolls to a new segment: recovery never appends to a
//     segment it read.

// logScan is what readLog found.
type logScan struct {
	parts   []*partScan
	seals   map[SnapshotID]*sealScan
	flushed map[SnapshotID]uint64 // partitions holding a flushed record of the id
}

// flushedEverywhere reports whether every partition where s's seal was
// read holds a flushed record of it. A partition's flushed record comes
// after its seal, and segments are deleted oldest first, so a seal read
// without its flushed record means that record never became durable
// there — it must be logged again before the segment goes, or a later
// recovery finds the seal alone and replays the units as new.
func (sc *logScan) flushedEverywhere(s *sealScan) bool {
	//engine:orderless — ORs bits.
	for part := range s.ranges {
		if sc.flushed[s.id]&(1<<part) == 0 {
			return false
		}
	}
	return true
}

type partScan struct {
	p     *wal.Partition[logJoin]
	scan  *wal.PartitionScan
	units map[uint64]*unitScan // by sequence number; INVARIANT: len = scan.Units() (scanSegment)
}

type unitScan struct {
	rec  wal.UnitRecord
	seg  *wal.Segment
	used bool // claimed by a generation
}

type sealScan struct {
	id      SnapshotID
	created int64
	dir     string
	mask    uint64
	ranges  map[uint32][]wal.SeqRange
	segs    []*wal.Segment // where its seal records are
}

// recoverLog reads the log, retrying transient read failures.
func (l *diskLog) recoverLog(round int, done func(error)) {
	if l.inFlight != 0 || len(l.backlog) != 0 || l.queuedBytes != 0 || round < 0 {
		// Recovery rebuilds the memtable from the log: a unit accepted
		// before it would be in neither.
		l.e.broken("the log is read before any unit is accepted: round %d, %d units in flight, %d backlog, %d bytes queued",
			round, l.inFlight, len(l.backlog), l.queuedBytes)
		done(l.e.err)
		return
	}
	l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
	answered := false
	l.log.Read(l.readSegment, func() { l.e.mark(MarkReadDamaged) }, func(err error) {
		if answered {
			// A second answer would go on with recovery twice, or retry a
			// read that has finished.
			l.e.broken("the log's read answers once: round %d answered again (%v)", round, err)
			return
		}
		answered = true
		switch {
		case err == nil:
			done(nil)
		case l.e.state == stateFailed:
			done(l.e.err)
		case errors.Is(err, ErrInvariant), errors.Is(err, errConfig):
			done(err)
		default:
			l.e.mark(MarkRecoveryRetry)
			fired := false
			l.e.p.Timers.AfterFunc(l.e.backoff(round), func() {
				if fired {
					// A second firing would read the log twice at once, each
					// read into the scan the other replaced.
					l.e.broken("the log read's retry timer fires once: round %d fired again", round+1)
					return
				}
				fired = true
				l.recoverLog(round+1, done)
			})
		}
	})
}

// errConfig: the log on disk does not fit the configuration (a partition
// past WAL_PARTITIONS); retrying does not help.
var errConfig = wal.ErrConfig

// readSegment scans one segment image the log read, starting its
// partition's scan at the partition's first segment.
func (l *diskLog) readSegment(p *wal.Partition[logJoin], seg *wal.Segment, b []byte) {
	if l.scan == nil {
		// Replay took the scan: a segment read after it would be neither
		// replayed nor counted.
		l.e.broken("recovery reads the log's segments while it holds its scan: partition %d segment %d read with none", p.ID(), seg.Num)
		return
	}
	n := len(l.scan.parts)
	if n == 0 || l.scan.parts[n-1].p != p {
		// A partition is read whole, then the next: its scan continues
		// from segment to segment, and one started twice would read its
		// units twice. O(partitions), once per partition.
		for _, ps := range l.scan.parts {
			if ps.p == p {
				l.e.broken("recovery reads a partition's segments together: partition %d read again after %d others", p.ID(), n)
				return
			}
		}
		l.scan.parts = append(l.scan.parts, &partScan{p: p, scan: wal.NewPartitionScan(p.ID()), units: map[uint64]*unitScan{}})
	}
	l.scanSegment(l.scan.parts[len(l.scan.parts)-1], seg, b)
}

// scanSegment decodes one segment image into ps and the scan, under the
// log's rules (wal.PartitionScan).
func (l *diskLog) scanSegment(ps *partScan, seg *wal.Segment, b []byte) {
	e, p := l.e, ps.p
	if err := ps.scan.Halted; err != nil {
		// The log reads no more of a partition once its scan halted it
		// (Resume): frozen as found, counted and alerted once.
		e.broken("a halted partition's segments are scanned no more: partition %d segment %d read after its halt on %v", p.ID(), seg.Num, err)
		return
	}
	torn := ps.scan.Add(seg.Num, seg.Path, b, wal.PartitionHooks{
		Unit: func(_ uint64, rec *wal.UnitRecord) {
			if ps.units[rec.Seq] != nil {
				// The scan drops a superseded entry (Drop) before the entry
				// that replaces it: a unit held twice would be replayed as
				// the later one, the earlier forgotten.
				e.broken("recovery holds each logged unit once: partition %d sequence %d delivered again (segment %d) without its drop", p.ID(), rec.Seq, seg.Num)
				return
			}
			ps.units[rec.Seq] = &unitScan{rec: *rec, seg: seg}
		},
		Seal: func(_ uint64, rec *wal.SealRecord) { l.addSeal(p.ID(), seg, *rec) },
		Flushed: func(_ uint64, rec *wal.FlushedRecord) {
			l.scan.flushed[SnapshotID{rec.Snapshot.Epoch, rec.Snapshot.Seq}] |= 1 << p.ID()
		},
		Drop: func(seq uint64) {
			delete(ps.units, seq)
			e.mark(MarkWALStaleDiscarded)
		},
	})
	if torn {
		e.mark(MarkWALTornTail)
	}
	if uint64(len(ps.units)) != ps.scan.Units() {
		e.broken("the units recovery holds are the log's: partition %d holds %d, its scan %d", p.ID(), len(ps.units), ps.scan.Units())
		return
	}
	p.Resume(ps.scan)
	if err := ps.scan.Halted; err != nil {
		e.mark(MarkWALCorrupt)
		e.stats.WALCorruptions++
		e.alert(AlertWALHalted, fmt.Errorf("%w: WAL partition %d halted: %v", ErrCorrupt, p.ID(), err))
	}
}

func (l *diskLog) addSeal(part uint32, seg *wal.Segment, r wal.SealRecord) {
	id := SnapshotID{r.Snapshot.Epoch, r.Snapshot.Seq}
	if r.Partitions&(1<<part) == 0 {
		// beforePersist logs a seal only in partitions its mask names.
		l.e.broken("a seal record is logged in a partition its mask names: snapshot %s read in partition %d, mask %#x", id, part, r.Partitions)
		return
	}
	if len(r.Ranges) == 0 {
		// beforePersist logs a seal only in partitions holding units of
		// its generation: one naming none would rebuild nothing there.
		l.e.broken("a seal record names units of its partition: snapshot %s read in partition %d with no range", id, part)
		return
	}
	s := l.scan.seals[id]
	if s != nil && (s.created != r.CreatedUnixMs || s.dir != r.Dir || s.mask != r.Partitions) {
		// One snapshot, one seal: a replay rebuilds it from the first read.
		l.e.broken("every seal record of a snapshot agrees: snapshot %s sealed with created %d, dir %q, mask %#x, and again in partition %d with %d, %q, %#x",
			id, s.created, s.dir, s.mask, part, r.CreatedUnixMs, r.Dir, r.Partitions)
		return
	}
	if s == nil {
		s = &sealScan{id: id, created: r.CreatedUnixMs, dir: r.Dir, mask: r.Partitions, ranges: map[uint32][]wal.SeqRange{}}
		l.scan.seals[id] = s
	}
	s.ranges[part] = r.Ranges
	s.segs = append(s.segs, seg)
}

// logIDs are the generations the log sealed and did not see flushed
// everywhere, in id order: recovery seals their epochs at least that far.
//
// REQUIRES: the log was read and not yet replayed (its scan is held):
// without it, no epoch would be sealed past a generation the log holds,
// and its replay could meet a new snapshot's id.
func (l *diskLog) logIDs() []SnapshotID {
	if l.scan == nil {
		l.e.broken("the log's sealed generations are asked for between reading the log and replaying it: no scan")
		return nil
	}
	var out []SnapshotID
	//engine:orderless — collected, then sorted.
	for id, s := range l.scan.seals {
		if !l.scan.flushedEverywhere(s) {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, SnapshotID.Compare)
	return out
}

// holds reports whether the log has a generation sealed as id: its
// segment, if owned, waits until this process has logged it flushed
// (replay), whatever flushed records recovery read — those may be in the
// page cache only.
//
// REQUIRES: the log was read and not yet replayed (an owned segment is
// registered by recovery, before replay).
func (l *diskLog) holds(id SnapshotID) bool {
	if l.scan == nil {
		l.e.broken("an owned segment asks the log about its generation between reading the log and replaying it: segment %s, no scan", id)
		return false
	}
	return l.scan.seals[id] != nil
}
