package engine

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/skipprd/skipprd/engine/wal"
)

// The group committer of one log partition.
//
// Entries queue on the partition; as soon as some are queued and no
// batch is in flight (SYNC), or when the BATCH_SYNC timer fires, the
// committer takes up to BatchBytes of them (at least one), assigns the
// units tentative sequence numbers, writes them after the segment's last
// entry and fsyncs. Concurrent writers therefore pile into the next sync;
// single units and seal or flushed records share the commit window.
//
// Every write starts at the block boundary below the segment's end and
// is padded with zeros to the next one, so offsets and lengths are
// multiples of DirectAlign (O_DIRECT). It rewrites the partly filled
// last block: its first bytes are the very bytes already there (tail),
// so however the write tears, every byte of an earlier, acked entry
// still reads back the same (wal_disk_test.go proves it over the
// simulated disk's torn writes).
//
// A failed write or fsync poisons the segment: it is never written or
// synced again, the batch's units are answered ErrUnknownOutcome (their
// sequence numbers were never spent), its records are queued again, and
// the partition rolls to a new segment whose header's first_seq tells
// recovery to ignore any entry of the poisoned batch that reached disk.
type logPart struct {
	l           *diskLog
	id          uint32
	segs        []*logSeg // oldest first; the last is the append target unless opening
	nextNum     uint64    // number of the next segment file
	nextSeq     uint64    // sequence number of the next durable unit
	queue       []*logWrite
	queuedBytes int64    // held bytes of the units in queue, batch and afterRoll
	afterRoll   []func() // answers of a failed batch, due when a roll completed
	// scratch is the write buffer of the last batch, reused by the next:
	// one batch at a time per partition, and take runs only once the
	// previous write and fsync have answered (the port no longer borrows it).
	scratch   []byte
	batch     *logBatch // written and being synced; at most one
	opening   bool      // a new target segment is being created
	dirReady  bool      // the partition's directory is durable
	openFails int
	deleting  bool  // a segment removal is in flight (oldest first, one at a time)
	halted    error // corruption found: no writes
	bytes     int64 // Σ segs' sizes
	syncTimer bool  // BATCH_SYNC: the timer is armed
	syncDue   bool  // BATCH_SYNC: the timer fired
}

// logSeg is one segment file of a partition.
type logSeg struct {
	num      uint64
	path     string
	f        File  // nil: not open (a segment found by recovery is read-only)
	size     int64 // allocated bytes
	end      int64 // where the next entry goes
	tail     []byte
	poisoned bool // a write or fsync failed: never written or synced again
	retired  bool // rolled away from to free space (makeRoom): never written again
	// dirty maps each memtable generation with entries here (units or
	// its seal record) to the highest unit sequence among them.
	// INVARIANT: a segment is deleted only when dirty is empty, it is not
	// the append target, and every older segment is deleted
	// (checkSegDeleted).
	dirty       map[uint64]uint64
	pinnedSince time.Duration
}

// logWrite is one entry waiting for, or in, a batch.
type logWrite struct {
	u       *unit // a unit entry, or nil for a record
	in      Unit
	payload []byte // a unit's record, its sequence number patched in by take
	body    any    // wal.SealRecord or wal.FlushedRecord
	gen     uint64 // a seal record pins its generation
	done    func()
	size    int // entry bytes
}

// logBatch is the batch in flight on a segment.
type logBatch struct {
	seg    *logSeg
	writes []*logWrite
	first  uint64 // sequence number of its first unit
	end    int64
	tail   []byte
	buf    []byte // what is written at alignDown(seg.end), padded to DirectAlign
}

func (s *logSeg) pin(gen, seq uint64, now time.Duration) {
	if len(s.dirty) == 0 {
		s.pinnedSince = now
	}
	s.dirty[gen] = max(s.dirty[gen], seq)
}

func (s *logSeg) unpin(gen uint64) { delete(s.dirty, gen) }

func (s *logSeg) regen(from, to uint64) {
	if seq, ok := s.dirty[from]; ok && from != to {
		delete(s.dirty, from)
		s.dirty[to] = max(s.dirty[to], seq)
	}
}

// record queues a seal or flushed record; done runs once it is durable
// (a failed batch queues it again, in the next segment).
func (p *logPart) record(body any, gen uint64, done func()) {
	n, err := recordBytes(body)
	if err != nil {
		p.l.e.broken("a seal or flushed record encodes: %v", err)
		return
	}
	p.queue = append(p.queue, &logWrite{body: body, gen: gen, done: done, size: wal.EntryBytes(n)})
	p.kick()
}

func (p *logPart) target() *logSeg {
	if p.opening || len(p.segs) == 0 {
		return nil
	}
	return p.segs[len(p.segs)-1]
}

// kick starts the next batch if one can start.
func (p *logPart) kick() {
	e := p.l.e
	if p.halted != nil || p.batch != nil || p.opening || len(p.queue)+len(p.afterRoll) == 0 || e.state == stateFailed {
		return
	}
	if p.l.cfg.Sync == BatchSync && !p.syncDue && len(p.afterRoll) == 0 {
		if !p.syncTimer {
			p.syncTimer = true
			e.p.Timers.AfterFunc(p.l.cfg.BatchSyncInterval, func() {
				p.syncTimer, p.syncDue = false, true
				p.kick()
			})
		}
		return
	}
	seg := p.target()
	if seg == nil || seg.poisoned || seg.retired || seg.f == nil { // none, poisoned, retired, or read by recovery
		p.roll(0)
		return
	}
	if len(p.queue) == 0 {
		return
	}
	b := p.take(seg)
	if b == nil {
		p.roll(int64(p.queue[0].size))
		return
	}
	if b.seg != seg || b.end > seg.size || b.first != p.nextSeq {
		e.broken("a batch fits its segment and continues the sequence: %s batch ends at %d, segment %d bytes, first %d, next %d", seg.path, b.end, seg.size, b.first, p.nextSeq)
		return
	}
	p.syncDue = false
	p.write(b)
}

// take forms a batch from the head of the queue that fits seg, or nil
// if not even the first entry fits.
func (p *logPart) take(seg *logSeg) *logBatch {
	start := alignDown(seg.end)
	if int64(cap(p.scratch)) < p.l.cfg.BatchBytes+2*DirectAlign {
		p.scratch = make([]byte, 0, p.l.cfg.BatchBytes+2*DirectAlign)
	}
	buf := append(p.scratch[:0], seg.tail...)
	b := &logBatch{seg: seg, first: p.nextSeq}
	seq := p.nextSeq
	for len(p.queue) > 0 {
		w := p.queue[0]
		if len(b.writes) > 0 && int64(len(buf)-len(seg.tail)+w.size) > p.l.cfg.BatchBytes {
			break
		}
		if start+int64(len(buf)+w.size) > seg.size {
			break
		}
		var payload []byte
		var err error
		if w.u != nil {
			payload = w.payload
			wal.PutUnitSeq(payload, seq)
			seq++
		} else {
			payload, err = appendRecord(w.body)
		}
		if err != nil {
			p.l.e.broken("a log entry encodes: %v", err)
			return nil
		}
		buf = wal.AppendEntry(buf, payload)
		b.writes = append(b.writes, w)
		p.queue = p.queue[1:]
	}
	if len(b.writes) == 0 {
		return nil
	}
	b.end = start + int64(len(buf))
	b.tail = append([]byte(nil), buf[alignDown(int64(len(buf))):]...)
	padded := alignUp(int64(len(buf)))
	buf = append(buf, make([]byte, padded-int64(len(buf)))...)
	b.buf = buf
	return b
}

// write writes the batch and fsyncs it; both are issued at once (calls
// on one file complete in order).
func (p *logPart) write(b *logBatch) {
	p.batch = b
	seg := b.seg
	var werr error
	seg.f.WriteAt(b.buf, alignDown(seg.end), func(err error) { werr = err })
	seg.f.Sync(func(err error) {
		if err == nil {
			err = werr
		}
		if err != nil {
			p.failed(b, err)
			return
		}
		p.durable(b)
	})
}

// durable: the batch is covered by a completed fsync. The partition's
// state is brought up to date before any callback runs: a callback may
// queue entries and start the next batch.
func (p *logPart) durable(b *logBatch) {
	e := p.l.e
	p.batch, p.scratch = nil, b.buf
	b.seg.end, b.seg.tail = b.end, b.tail
	if b.first != p.nextSeq {
		e.broken("one batch at a time per partition: batch from sequence %d made durable, next sequence %d", b.first, p.nextSeq)
		return
	}
	seq := b.first
	p.nextSeq += uint64(b.units())
	for _, w := range b.writes {
		if w.u == nil {
			if w.gen != 0 {
				b.seg.pin(w.gen, 0, e.now())
			}
			w.done()
			continue
		}
		if e.state != stateFailed { // else failAll answered it
			p.l.unitDurable(w, seq, b.seg)
		}
		seq++
	}
	e.stats.WALSyncs++
	p.kick()
}

// failed: the write or the fsync failed. The segment is poisoned; the
// units' outcome is unknown; records go back to the head of the queue.
func (p *logPart) failed(b *logBatch, err error) {
	e := p.l.e
	if p.batch != b {
		e.broken("a failed batch is the one in flight: partition %d, failed batch from sequence %d on %s", p.id, b.first, b.seg.path)
		return
	}
	p.batch = nil
	b.seg.poisoned = true
	e.stats.WALSyncFailures++
	e.mark(MarkWALPoisoned)
	e.walError = fmt.Errorf("WAL segment %s poisoned: %w", b.seg.path, err)
	f := b.seg.f
	b.seg.f = nil
	f.Close(func(error) {}) // never synced again
	var again []*logWrite
	for _, w := range b.writes {
		if w.u == nil {
			again = append(again, w)
			continue
		}
		p.afterRoll = append(p.afterRoll, func() { p.unknown(w, fmt.Errorf("%w: WAL segment %s: %v", ErrUnknownOutcome, b.seg.path, err)) })
	}
	p.queue = append(again, p.queue...)
	p.roll(0)
}

// unknown answers a unit of a failed batch: it is no longer held, and its
// source may retry it under the same idempotency key or offsets.
func (p *logPart) unknown(w *logWrite, err error) {
	e, u := p.l.e, w.u
	p.queuedBytes -= u.bytes
	p.l.inFlight--
	e.answerUnheld(u, err)
	releaseUnit(w.in)
	e.checkHeld()
}

// roll opens a new target segment: created, sized (preallocated), its
// header written and fsynced, its directory entry durable. need > 0: an
// entry that does not fit an empty segment gets a segment of its size.
// Writes answered ErrUnknownOutcome by a failed batch are answered only
// once a roll completed (afterRoll): from then on the new header's
// first_seq tells recovery to ignore whatever of that batch reached disk.
func (p *logPart) roll(need int64) {
	e := p.l.e
	if p.opening {
		return
	}
	p.opening = true
	seg := &logSeg{num: p.nextNum, path: wal.SegmentPath(p.id, p.nextNum), size: p.l.cfg.SegmentBytes, dirty: map[uint64]uint64{}}
	p.nextNum++
	hdr := int64(wal.EntryBytes(wal.HeaderBytes))
	if need+hdr+DirectAlign > seg.size {
		seg.size = alignUp(need + hdr + DirectAlign)
	}
	if need < 0 || seg.size < need+hdr || seg.size%DirectAlign != 0 {
		e.broken("a new log segment holds its header and the entry it is rolled for, in whole blocks: %s, %d bytes, entry %d, header %d", seg.path, seg.size, need, hdr)
		return
	}
	p.create(seg, func(err error, exists bool) {
		if err != nil && exists {
			// Created, then a step failed: nothing in it counts, remove
			// it (a removal that fails leaves it to the next recovery,
			// which reads and deletes it like any other).
			e.p.Disk.Remove(seg.path, func(error) {})
		}
		if err != nil {
			p.openFails++
			e.mark(MarkWALOpenRetry)
			e.walError = fmt.Errorf("WAL partition %d: %w", p.id, err)
			e.failing(troubleWAL(p.id), fmt.Errorf("open a new log segment: %w", err))
			e.p.Timers.AfterFunc(e.backoff(p.openFails), func() {
				p.opening = false
				p.kick()
			})
			return
		}
		p.openFails, p.opening = 0, false
		e.succeeded(troubleWAL(p.id))
		p.segs = append(p.segs, seg)
		p.bytes += seg.size
		e.stats.WALSegmentsCreated++
		answers := p.afterRoll
		p.afterRoll = nil
		for _, a := range answers {
			a()
		}
		p.collect()
		p.kick()
	})
}

// openStage is the step a log segment's creation is in (logOpen).
type openStage uint8

const (
	openMakingDir openStage = iota
	openCreating
	openAllocating
	openWritingHeader // the header's write and its fsync are issued together
	openSyncingDir
	openFinished
)

var openStageNames = [...]string{"making-dir", "creating", "allocating", "writing-header", "syncing-dir", "finished"}

func (s openStage) String() string { return openStageNames[s] }

// logOpen is the creation of one segment file: its directory, the file,
// its preallocation, its header written and fsynced, its directory entry
// durable. Each step's callback asserts the stage it completes.
type logOpen struct {
	p     *logPart
	seg   *logSeg
	stage openStage
	f     File   // open from openAllocating on
	head  []byte // the header entry: seg's first bytes and tail
	buf   []byte // head padded to DirectAlign
	werr  error  // the header write's error, read at its fsync
	done  func(err error, exists bool)
}

// create makes seg's file and its durable header (the partition, the
// number and the first sequence number it continues from). exists: the
// file was created though a later step failed.
func (p *logPart) create(seg *logSeg, done func(err error, exists bool)) {
	h := wal.Header{Partition: p.id, Segment: seg.num, FirstSeq: p.nextSeq, SegmentBytes: uint64(seg.size)}
	payload, err := wal.AppendHeader(nil, h)
	if err != nil {
		p.l.e.broken("a segment header encodes: %v", err)
		return
	}
	o := &logOpen{p: p, seg: seg, done: done}
	o.head = wal.AppendEntry(nil, payload)
	o.buf = append(append([]byte(nil), o.head...), make([]byte, alignUp(int64(len(o.head)))-int64(len(o.head)))...)
	if int64(len(o.buf)) > seg.size {
		p.l.e.broken("a segment holds its header: header %d bytes, segment %d", len(o.buf), seg.size)
		return
	}
	p.makeDir(o.dirMade)
}

// checkStage asserts the stage a callback completes and moves to the next.
func (o *logOpen) checkStage(want, next openStage) bool {
	if o.stage != want {
		o.p.l.e.broken("a log segment's creation completes the step it started: %s in stage %s, a callback of %s arrived", o.seg.path, o.stage, want)
		return false
	}
	o.stage = next
	return true
}

func (o *logOpen) dirMade(err error) {
	if !o.checkStage(openMakingDir, openCreating) {
		return
	}
	if err != nil {
		o.stage = openFinished
		o.done(fmt.Errorf("make directory for %s: %w", o.seg.path, err), false)
		return
	}
	o.p.l.e.p.Disk.Open(o.seg.path, OpenMode{Create: true, Write: true, Direct: true}, o.opened)
}

func (o *logOpen) opened(f File, err error) {
	if !o.checkStage(openCreating, openAllocating) {
		return
	}
	if err != nil {
		// A failed create may have left the entry: retire it too.
		o.stage = openFinished
		o.done(fmt.Errorf("create %s: %w", o.seg.path, err), !errors.Is(err, ErrExists) && !errors.Is(err, ErrNotFound))
		return
	}
	o.f = f
	f.Allocate(o.seg.size, o.allocated)
}

func (o *logOpen) allocated(err error) {
	if !o.checkStage(openAllocating, openWritingHeader) {
		return
	}
	if err != nil {
		o.fail("preallocate", err)
		return
	}
	o.f.WriteAt(o.buf, 0, o.headerWritten)
	o.f.Sync(o.headerSynced)
}

// headerWritten keeps the write's error for its fsync's callback (calls
// on one file complete in order).
func (o *logOpen) headerWritten(err error) {
	if o.stage != openWritingHeader {
		o.p.l.e.broken("a header write completes before its fsync: %s in stage %s", o.seg.path, o.stage)
		return
	}
	o.werr = err
}

func (o *logOpen) headerSynced(err error) {
	if !o.checkStage(openWritingHeader, openSyncingDir) {
		return
	}
	if err == nil {
		err = o.werr
	}
	if err != nil {
		o.fail("write the header of", err)
		return
	}
	o.p.l.e.p.Disk.SyncDir(wal.PartitionDir(o.p.id), o.dirSynced)
}

func (o *logOpen) dirSynced(err error) {
	if !o.checkStage(openSyncingDir, openFinished) {
		return
	}
	if err != nil {
		o.fail("sync the directory of", err)
		return
	}
	o.seg.f, o.seg.end, o.seg.tail = o.f, int64(len(o.head)), o.head
	o.done(nil, true)
}

// fail closes the file a later step failed on; done reports it created.
func (o *logOpen) fail(step string, err error) {
	o.stage = openFinished
	o.f.Close(func(error) { o.done(fmt.Errorf("%s %s: %w", step, o.seg.path, err), true) })
}

// makeDir creates the partition's directory and makes it durable (its
// entry in wal/, and wal/ in the root), once.
func (p *logPart) makeDir(done func(error)) {
	if p.dirReady {
		done(nil)
		return
	}
	d := p.l.e.p.Disk
	d.MkdirAll(wal.PartitionDir(p.id), func(err error) {
		if err != nil {
			done(err)
			return
		}
		d.SyncDir("", func(err error) {
			if err != nil {
				done(err)
				return
			}
			d.SyncDir(wal.Root, func(err error) {
				p.dirReady = err == nil
				done(err)
			})
		})
	})
}

// collect deletes the oldest segments that hold nothing unflushed, one at
// a time, each removal durable before the next: a crash then leaves a
// suffix of the log, never a later segment (holding a generation's seal
// or flushed record) without the earlier ones (holding its units).
func (p *logPart) collect() {
	if p.deleting || p.halted != nil || len(p.segs) < 2 {
		return
	}
	s := p.segs[0]
	if len(s.dirty) > 0 || (p.batch != nil && p.batch.seg == s) {
		return
	}
	e := p.l.e
	p.deleting = true
	retry := func() {
		e.p.Timers.AfterFunc(e.backoff(AttemptsMax), func() {
			p.deleting = false
			p.collect()
		})
	}
	remove := func() {
		e.p.Disk.Remove(s.path, func(err error) {
			if err != nil && !isNotFound(err) {
				retry()
				return
			}
			e.p.Disk.SyncDir(path.Dir(s.path), func(err error) {
				if err != nil {
					retry()
					return
				}
				p.deleting = false
				if !p.checkSegDeleted(s) {
					return
				}
				p.segs = p.segs[1:]
				p.bytes -= s.size
				e.stats.WALSegmentsDeleted++
				p.collect()
			})
		})
	}
	if s.f == nil {
		remove()
		return
	}
	f := s.f
	s.f = nil
	f.Close(func(error) { remove() })
}

// checkSegDeleted: a log segment is deleted only when no generation holds
// entries in it, it is not the append target, and it is its partition's
// oldest (logSeg.dirty's INVARIANT). It can break in collect, whose
// removal is asynchronous: it runs when the removal is durable, before the
// segment leaves the partition.
func (p *logPart) checkSegDeleted(s *logSeg) bool {
	e := p.l.e
	switch {
	case len(p.segs) == 0:
		e.broken("log segments are deleted oldest first: partition %d deleted segment %d, it holds none", p.id, s.num)
	case p.segs[0] != s:
		e.broken("log segments are deleted oldest first: partition %d deleted segment %d, its oldest is %d", p.id, s.num, p.segs[0].num)
	case len(s.dirty) > 0:
		e.broken("a log segment is deleted only when nothing unflushed is in it: partition %d segment %d holds generations %v", p.id, s.num, s.dirty)
	case s == p.target():
		e.broken("the append target is never deleted: partition %d segment %d", p.id, s.num)
	default:
		return true
	}
	return false
}

// pendingWrites returns the writes queued or in the batch in flight.
func (p *logPart) pendingWrites() []*logWrite {
	out := append([]*logWrite(nil), p.queue...)
	if p.batch != nil {
		out = append(out, p.batch.writes...)
	}
	return out
}

func (b *logBatch) units() (n int) {
	for _, w := range b.writes {
		if w.u != nil {
			n++
		}
	}
	return n
}

func alignDown(n int64) int64 { return n - n%DirectAlign }
func alignUp(n int64) int64   { return alignDown(n + DirectAlign - 1) }
