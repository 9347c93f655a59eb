package engine

import (
	"bytes"
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
	l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
	l.log.Reset() // a retry starts over
	l.readLog(func(err error) {
		switch {
		case err == nil:
			done(nil)
		case errors.Is(err, ErrInvariant), errors.Is(err, errConfig):
			done(err)
		default:
			l.e.mark(MarkRecoveryRetry)
			l.e.p.Timers.AfterFunc(l.e.backoff(round), func() { l.recoverLog(round+1, done) })
		}
	})
}

var errConfig = errors.New("engine: configuration does not match the log")

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

func (l *diskLog) readLog(done func(error)) {
	l.e.p.Disk.ReadDir(wal.Root, func(names []string, err error) {
		if isNotFound(err) {
			done(nil)
			return
		}
		if err != nil {
			done(fmt.Errorf("read %s: %w", wal.Root, err))
			return
		}
		var ids []uint32
		for _, n := range names {
			id, ok := wal.ParsePartitionDir(n)
			if !ok {
				continue // not ours
			}
			if int(id) >= l.cfg.Partitions {
				done(fmt.Errorf("%w: the log has partition %d, WAL_PARTITIONS is %d: set it to at least %d", errConfig, id, l.cfg.Partitions, id+1))
				return
			}
			ids = append(ids, id)
		}
		l.readParts(ids, done)
	})
}

func (l *diskLog) readParts(ids []uint32, done func(error)) {
	if len(ids) == 0 {
		done(nil)
		return
	}
	p := l.log.Partition(ids[0])
	dir := wal.PartitionDir(p.ID())
	l.e.p.Disk.ReadDir(dir, func(names []string, err error) {
		if err != nil {
			done(fmt.Errorf("read %s: %w", dir, err))
			return
		}
		var nums []uint64
		for _, n := range names {
			if num, ok := wal.ParseSegmentName(n); ok {
				nums = append(nums, num)
			}
		}
		slices.Sort(nums)
		ps := &partScan{p: p, scan: wal.NewPartitionScan(p.ID()), units: map[uint64]*unitScan{}}
		l.scan.parts = append(l.scan.parts, ps)
		l.readSegs(ps, nums, func(err error) {
			if err != nil {
				done(err)
				return
			}
			l.readParts(ids[1:], done)
		})
	})
}

// readSegs reads a partition's segments in order. Every segment file
// stays listed (it is deleted whole later); after corruption the rest are
// not read.
func (l *diskLog) readSegs(ps *partScan, nums []uint64, done func(error)) {
	if len(nums) == 0 {
		done(nil)
		return
	}
	p := ps.p
	num := nums[0]
	name := wal.SegmentPath(p.ID(), num)
	l.readSegment(name, 0, nil, func(b []byte, size int64, err error) {
		if err != nil {
			done(err)
			return
		}
		seg := p.Found(num, name, size)
		if seg == nil { // out of order: broken, failed closed
			done(l.e.err)
			return
		}
		if p.Halted() == nil {
			l.scanSegment(ps, seg, b)
		}
		l.readSegs(ps, nums[1:], done)
	})
}

// readSegment reads a whole segment file. A read whose scan is not clean
// (torn or corrupt) is read again — a read can be damaged where the disk
// is not, and damage never makes an entry valid — up to AttemptsMax
// times, keeping the read with the most valid entries; a clean read, or
// two reads that agree, end it.
//
// The file is fsynced first: a process that died without a power loss
// leaves written but unsynced bytes in the page cache, which recovery
// reads and replays as committed — they must be durable before anything
// is acked because of them.
func (l *diskLog) readSegment(name string, tries int, best []byte, done func([]byte, int64, error)) {
	e := l.e
	e.p.Disk.Open(name, OpenMode{Write: true}, func(f File, err error) {
		if err != nil {
			done(nil, 0, fmt.Errorf("open %s: %w", name, err))
			return
		}
		f.Sync(func(err error) {
			if err != nil {
				f.Close(func(error) { done(nil, 0, fmt.Errorf("sync %s: %w", name, err)) })
				return
			}
			l.readOpen(name, f, tries, best, done)
		})
	})
}

func (l *diskLog) readOpen(name string, f File, tries int, best []byte, done func([]byte, int64, error)) {
	e := l.e
	f.Size(func(size int64, err error) {
		if err == nil && size > l.cfg.SegmentBytes+wal.EntryPayloadMax+4*DirectAlign {
			err = fmt.Errorf("%w: log segment %s has %d bytes, more than any segment this log writes", ErrCorrupt, name, size)
		}
		if err != nil {
			f.Close(func(error) { done(nil, 0, err) })
			return
		}
		buf := make([]byte, size)
		f.ReadAt(buf, 0, func(n int, err error) {
			if n < 0 || n > len(buf) {
				e.broken("a read returns at most the bytes asked: %s read %d of %d", name, n, len(buf))
				f.Close(func(error) { done(nil, 0, e.err) })
				return
			}
			f.Close(func(error) {
				if err != nil {
					done(nil, 0, fmt.Errorf("read %s: %w", name, err))
					return
				}
				buf = buf[:n]
				r := wal.Scan(name, buf)
				same := best != nil && bytes.Equal(best, buf) // two reads agree: the disk holds this
				if best != nil && len(wal.Scan(name, best).Entries) > len(r.Entries) {
					buf = best
				}
				if (r.Torn || r.Corrupt != nil) && !same && tries+1 < AttemptsMax {
					e.mark(MarkReadDamaged)
					l.readSegment(name, tries+1, buf, done)
					return
				}
				done(buf, size, nil)
			})
		})
	})
}

// scanSegment decodes one segment image into ps and the scan, under the
// log's rules (wal.PartitionScan).
func (l *diskLog) scanSegment(ps *partScan, seg *wal.Segment, b []byte) {
	e, p := l.e, ps.p
	torn := ps.scan.Add(seg.Num, seg.Path, b, wal.PartitionHooks{
		Unit: func(_ uint64, rec *wal.UnitRecord) { ps.units[rec.Seq] = &unitScan{rec: *rec, seg: seg} },
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
	s := l.scan.seals[id]
	if s == nil {
		s = &sealScan{id: id, created: r.CreatedUnixMs, dir: r.Dir, mask: r.Partitions, ranges: map[uint32][]wal.SeqRange{}}
		l.scan.seals[id] = s
	}
	s.ranges[part] = r.Ranges
	s.segs = append(s.segs, seg)
}

// logIDs are the generations the log sealed and did not see flushed
// everywhere, in id order: recovery seals their epochs at least that far.
func (l *diskLog) logIDs() []SnapshotID {
	if l.scan == nil {
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
func (l *diskLog) holds(id SnapshotID) bool {
	return l.scan != nil && l.scan.seals[id] != nil
}
