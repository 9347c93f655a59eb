package wal

import (
	"fmt"
	"time"
)

// Log is the local-disk log: Partitions independent logs of fixed-size
// segment files under wal/partition-{p}/, each with its own group
// committer. It owns the files, the batches and their fsyncs; the engine
// owns what an entry means — when a unit is acked, which memtable
// generation it joins, when a generation is sealed and flushed — and
// hears of the log's events through Hooks.
//
// Contracts (each method's comment has its own):
//
//   - Append queues an entry on a partition. A unit entry is durable —
//     Hooks.Durable runs with its sequence number — once a write and an
//     fsync covering it have completed without error; a record's done
//     runs then. Entries of one partition become durable in the order
//     they were appended; sequence numbers are dense and only grow.
//   - A failed write or fsync poisons its segment: it is never written
//     or synced again, the partition rolls to a new segment whose header
//     tells recovery to ignore whatever of the batch reached disk, and
//     only then does each unit of the batch get Hooks.Unknown (no
//     sequence number was spent). Records are queued again, first.
//   - A segment is pinned by the generations with entries in it (Pin).
//     It is deleted only when no generation pins it, it is not the append
//     target, and every older segment of its partition is deleted — so a
//     crash leaves a suffix of the log, never a gap.
//   - Everything runs on the engine's loop: Disk and Timers callbacks
//     arrive there, and the log calls Hooks from them.
type Log[U any] struct {
	cfg   Config
	disk  Disk
	timer Timers
	hooks Hooks[U]
	parts []*Partition[U]
	stats Stats
}

// Config is the log's shape. The engine validates it (engine.DiskWAL).
type Config struct {
	Partitions   int
	SegmentBytes int64 // a segment file's size, a multiple of DirectAlign
	BatchBytes   int64 // the entry bytes one group commit takes at most
	// BatchSyncInterval > 0 (BATCH_SYNC): a batch waits for this timer;
	// 0 (SYNC): a batch starts as soon as the previous one is durable.
	BatchSyncInterval time.Duration
	// AttemptsMax: a segment removal that fails is retried after
	// Hooks.Backoff(AttemptsMax), the longest backoff.
	AttemptsMax int
}

// Hooks is how the log tells the engine what happened. Every call is made
// on the loop.
type Hooks[U any] interface {
	// Durable: unit entry w is covered by a completed fsync; seq is its
	// sequence number, seg the segment holding it. Not called once
	// Stopped.
	Durable(w *Write[U], seq uint64, seg *Segment)
	// Unknown: w's batch failed and its partition has rolled past it;
	// err wraps the failure.
	Unknown(w *Write[U], err error)
	// Poisoned: a write or fsync on seg failed.
	Poisoned(seg *Segment, err error)
	// OpenFailed: creating partition part's next segment failed; it is
	// retried after Backoff(attempt). Opened: it succeeded.
	OpenFailed(part uint32, err error)
	Opened(part uint32)
	// Backoff is the delay before retry number attempt.
	Backoff(attempt int) time.Duration
	// Broken: an invariant of the log broke; the message names it and
	// carries the values. The engine fails closed.
	Broken(format string, args ...any)
	// Stopped: the engine failed closed; the log starts no more batches.
	Stopped() bool
	// Now is the loop's monotonic time (a segment's pin age).
	Now() time.Duration
}

// Stats counts the log's work since it was made.
type Stats struct {
	Syncs           uint64 // group commits (fsyncs) that succeeded
	SyncFailures    uint64 // writes or fsyncs that failed (each poisons a segment)
	SegmentsCreated uint64
	SegmentsDeleted uint64
}

// Write is one entry waiting for, or in, a batch: a unit (Record nil)
// or a seal or flushed record.
type Write[U any] struct {
	Unit    U      // the engine's handle of a unit entry
	Payload []byte // a unit's record; its sequence number is patched in by the batch
	Record  any    // a SealRecord or FlushedRecord; nil for a unit
	gen     uint64 // a seal record pins its generation
	done    func()
	size    int // entry bytes
}

// IsUnit says w is a unit entry.
func (w *Write[U]) IsUnit() bool { return w.Record == nil }

// New makes a log of cfg.Partitions empty partitions, numbering from
// segment 1 and sequence 1 (Read finds where a log on disk goes on).
func New[U any](cfg Config, disk Disk, timers Timers, hooks Hooks[U]) *Log[U] {
	if cfg.Partitions < 1 || cfg.Partitions > PartitionsMax || cfg.SegmentBytes%DirectAlign != 0 || cfg.BatchBytes < 1 {
		panic(fmt.Sprintf("wal.New: 1 ≤ partitions ≤ %d, segment bytes a multiple of %d, batch bytes ≥ 1: got %d, %d, %d",
			PartitionsMax, DirectAlign, cfg.Partitions, cfg.SegmentBytes, cfg.BatchBytes))
	}
	l := &Log[U]{cfg: cfg, disk: disk, timer: timers, hooks: hooks}
	for i := range cfg.Partitions {
		l.parts = append(l.parts, &Partition[U]{l: l, id: uint32(i), nextNum: 1, nextSeq: 1})
	}
	return l
}

// Partitions returns the log's partitions, by id.
func (l *Log[U]) Partitions() []*Partition[U] { return l.parts }

// Partition returns partition id; id must be one of the log's.
func (l *Log[U]) Partition(id uint32) *Partition[U] {
	if int(id) >= len(l.parts) {
		panic(fmt.Sprintf("wal: partition %d of a log of %d", id, len(l.parts)))
	}
	return l.parts[id]
}

// Stats returns what the log has done so far.
func (l *Log[U]) Stats() Stats { return l.stats }

// Bytes is the size of every segment file of every partition.
func (l *Log[U]) Bytes() (n int64) {
	for _, p := range l.parts {
		n += p.bytes
	}
	return n
}

// Files counts the segment files of every partition.
func (l *Log[U]) Files() (n int) {
	for _, p := range l.parts {
		n += len(p.segs)
	}
	return n
}

// Unpin forgets generation gen in every segment, then deletes the
// segments that no longer hold anything pinned, oldest first.
func (l *Log[U]) Unpin(gen uint64) {
	if gen == 0 {
		// Generation 0 is "none" (AppendRecord): it is never pinned, so
		// a caller unpinning it meant another one.
		l.hooks.Broken("a generation unpinned is one that pins (≥ 1): generation 0")
		return
	}
	for _, p := range l.parts {
		for _, s := range p.segs {
			s.Unpin(gen)
		}
		p.collect()
	}
}

// Regen moves generation from's pins to generation to, in every segment.
func (l *Log[U]) Regen(from, to uint64) {
	if from == 0 || to == 0 {
		l.hooks.Broken("pins move between generations that pin (≥ 1): from %d to %d", from, to)
		return
	}
	for _, p := range l.parts {
		for _, s := range p.segs {
			s.regen(from, to)
		}
	}
}

// PinnedLonger reports whether some segment has been pinned longer than
// d.
func (l *Log[U]) PinnedLonger(d time.Duration) bool {
	now := l.hooks.Now()
	for _, p := range l.parts {
		for _, s := range p.segs {
			if len(s.dirty) > 0 && s.pinnedSince > now {
				// Pin dates a segment on the loop's monotonic clock: a pin
				// from the future would never count as old, and the valve
				// that seals a long-pinned segment's generation never open.
				l.hooks.Broken("a segment is pinned since no later than now: partition %d segment %d pinned since %v, now %v", p.id, s.Num, s.pinnedSince, now)
				return false
			}
			if len(s.dirty) > 0 && now-s.pinnedSince > d {
				return true
			}
		}
	}
	return false
}

// appendRecord encodes a seal or flushed record's payload.
func appendRecord(body any) ([]byte, error) {
	switch r := body.(type) {
	case SealRecord:
		return AppendSeal(nil, r)
	case FlushedRecord:
		return AppendFlushed(nil, r)
	}
	return nil, fmt.Errorf("log record of type %T", body)
}

// alignDown rounds n down to a block boundary. REQUIRES: n ≥ 0 (an
// offset or a length; Go's % of a negative n would round it up).
func alignDown(n int64) int64 {
	if n < 0 {
		panic(fmt.Sprintf("wal: a block boundary below a negative offset %d", n))
	}
	return n - n%DirectAlign
}

func alignUp(n int64) int64 { return alignDown(n + DirectAlign - 1) }

// Recovery. The engine reads the log's files (Disk reads, retried, under
// its recovery's rules) and tells the log what it found, partition by
// partition, segment by segment in number order: the log then goes on
// where the files end. Recovery never appends to a segment it read; the
// first batch of each partition rolls to a new one.

// Reset forgets every partition's segments, numbers and halt: a recovery
// that is retried starts over.
func (l *Log[U]) Reset() {
	for _, p := range l.parts {
		if p.batch != nil || p.opening || p.deleting || len(p.queue)+len(p.afterRoll) > 0 {
			// Recovery reads the log before it writes: a partition at work
			// would lose its entries' answers here.
			l.hooks.Broken("the log is read only while idle: partition %d, batch in flight %t, opening %t, deleting %t, %d queued, %d unanswered",
				p.id, p.batch != nil, p.opening, p.deleting, len(p.queue), len(p.afterRoll))
			return
		}
	}
	for _, p := range l.parts {
		p.segs, p.bytes, p.nextNum, p.nextSeq, p.halted = nil, 0, 1, 1, nil
	}
}

// Found adds segment num, read from path with size bytes, after the
// partition's others (num above each of theirs); the next segment the
// partition creates is numbered after it.
func (p *Partition[U]) Found(num uint64, path string, size int64) *Segment {
	if n := len(p.segs); n > 0 && p.segs[n-1].Num >= num {
		p.l.hooks.Broken("recovery finds a partition's segments in number order: partition %d segment %d after %d", p.id, num, p.segs[n-1].Num)
		return nil
	}
	if size < 0 {
		p.l.hooks.Broken("a found segment's size is not negative: partition %d segment %d, %d bytes", p.id, num, size)
		return nil
	}
	seg := &Segment{Num: num, Path: path, size: size, dirty: map[uint64]uint64{}}
	p.nextNum = max(p.nextNum, num+1)
	p.segs = append(p.segs, seg)
	p.bytes += size
	return seg
}

// Resume takes the partition's scan so far: its next unit gets
// scan.NextSeq, and a scan that found damage halts it.
func (p *Partition[U]) Resume(scan *PartitionScan) {
	if scan.Partition != p.id {
		p.l.hooks.Broken("a partition resumes from its own scan: partition %d, scan of %d", p.id, scan.Partition)
		return
	}
	p.nextSeq = scan.NextSeq
	p.halted = scan.Halted
}

// Start rolls every partition that is not halted to a new segment: the
// log takes writes from here on, never into a segment recovery read.
func (l *Log[U]) Start() {
	for _, p := range l.parts {
		if p.halted == nil {
			p.roll(0)
		}
	}
}
