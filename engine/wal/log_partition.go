package wal

import (
	"fmt"
	"time"
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
// still reads back the same (the engine's wal_disk_test.go proves it
// over the simulated disk's torn writes).
//
// A failed write or fsync poisons the segment: it is never written or
// synced again, the batch's units get Hooks.Unknown once the partition
// has rolled (their sequence numbers were never spent), its records are
// queued again, and the partition rolls to a new segment whose header's
// first_seq tells recovery to ignore any entry of the poisoned batch that
// reached disk.
type Partition[U any] struct {
	l         *Log[U]
	id        uint32
	segs      []*Segment // oldest first; the last is the append target unless opening
	nextNum   uint64     // number of the next segment file
	nextSeq   uint64     // sequence number of the next durable unit
	queue     []*Write[U]
	afterRoll []unknown[U] // units of a failed batch, answered once a roll completed
	// scratch is the write buffer of the last batch, reused by the next:
	// one batch at a time per partition, and take runs only once the
	// previous write and fsync have answered (the port no longer borrows it).
	scratch   []byte
	batch     *batch[U] // written and being synced; at most one
	opening   bool      // a new target segment is being created
	dirReady  bool      // the partition's directory is durable
	openFails int
	deleting  bool  // a segment removal is in flight (oldest first, one at a time)
	halted    error // corruption found: no writes
	bytes     int64 // INVARIANT: Σ segs' sizes (checkBytes: rolled, removed)
	syncTimer bool  // BATCH_SYNC: the timer is armed
	syncDue   bool  // BATCH_SYNC: the timer fired
}

// Segment is one segment file of a partition.
type Segment struct {
	Num      uint64
	Path     string
	f        File  // nil: not open (a segment found by recovery is read-only)
	size     int64 // allocated bytes
	end      int64 // where the next entry goes
	tail     []byte
	poisoned bool // a write or fsync failed: never written or synced again
	retired  bool // rolled away from to free space (RetireTarget): never written again
	// dirty maps each memtable generation with entries here (units or
	// its seal record) to the highest unit sequence among them.
	// INVARIANT: a segment is deleted only when dirty is empty, it is not
	// the append target, and every older segment is deleted
	// (checkDeleted).
	dirty       map[uint64]uint64
	pinnedSince time.Duration
}

// unknown is a unit of a failed batch and what failed.
type unknown[U any] struct {
	w   *Write[U]
	err error
}

// batch is the batch in flight on a segment.
type batch[U any] struct {
	seg    *Segment
	writes []*Write[U]
	first  uint64 // sequence number of its first unit
	end    int64
	tail   []byte
	buf    []byte // what is written at alignDown(seg.end), padded to DirectAlign
}

// Pin records that generation gen has entries in s, up to unit sequence
// seq (0: a record only).
//
// REQUIRES: gen ≥ 1 (0 is "none": Unpin refuses it, so a pin of 0 would
// hold the segment for good).
func (s *Segment) Pin(gen, seq uint64, now time.Duration) {
	if gen == 0 {
		panic(fmt.Sprintf("wal: a pin is of a generation (≥ 1): segment %d, generation 0, sequence %d", s.Num, seq))
	}
	if len(s.dirty) == 0 {
		s.pinnedSince = now
	}
	s.dirty[gen] = max(s.dirty[gen], seq)
}

// Unpin forgets generation gen in s.
func (s *Segment) Unpin(gen uint64) { delete(s.dirty, gen) }

func (s *Segment) regen(from, to uint64) {
	if seq, ok := s.dirty[from]; ok && from != to {
		delete(s.dirty, from)
		s.dirty[to] = max(s.dirty[to], seq)
	}
}

// ID is the partition's number.
func (p *Partition[U]) ID() uint32 { return p.id }

// Bytes is the size of the partition's segment files.
func (p *Partition[U]) Bytes() int64 { return p.bytes }

// Halted is the corruption recovery found in the partition, or nil: a
// halted partition takes no writes and deletes nothing.
func (p *Partition[U]) Halted() error { return p.halted }

// Append queues a unit entry (w.Record nil, w.Payload its encoded
// UnitRecord) or a record; a record's done runs once it is durable. A
// record that does not encode is a broken invariant.
func (p *Partition[U]) Append(w *Write[U]) {
	n := len(w.Payload)
	if !w.IsUnit() {
		b, err := appendRecord(w.Record)
		if err != nil {
			p.l.hooks.Broken("a seal or flushed record encodes: %v", err)
			return
		}
		n = len(b)
	}
	if n < 1 || n > EntryPayloadMax || !w.IsUnit() && w.done == nil {
		// An entry past the limit could be written but never read back
		// (AppendEntry's REQUIRES); a record's done is how its writer
		// learns it is durable. Queued all the same: the engine failed
		// closed, starts no batch, and answers what is queued.
		p.l.hooks.Broken("an entry's payload is 1..EntryPayloadMax bytes, a record's with its done: partition %d, %d bytes, limit %d, unit %t, done %t",
			p.id, n, EntryPayloadMax, w.IsUnit(), w.done != nil)
	}
	if w.size != 0 {
		// A write is appended once (a failed batch queues its records
		// again itself): a second would write, and answer, it twice.
		p.l.hooks.Broken("an entry is appended once: partition %d, an entry of %d bytes appended again", p.id, w.size)
		return
	}
	w.size = EntryBytes(n)
	p.queue = append(p.queue, w)
	p.kick()
}

// AppendRecord queues a seal or flushed record, pinning generation gen
// (0: none) in the segment it lands in; done runs once it is durable (a
// failed batch queues it again, in the next segment).
func (p *Partition[U]) AppendRecord(body any, gen uint64, done func()) {
	p.Append(&Write[U]{Record: body, gen: gen, done: done})
}

func (p *Partition[U]) target() *Segment {
	if p.opening || len(p.segs) == 0 {
		return nil
	}
	return p.segs[len(p.segs)-1]
}

// RetireTarget rolls away from the append target if it pins nothing and
// no batch is on it, so that it can be deleted (a full partition making
// room).
func (p *Partition[U]) RetireTarget() {
	if t := p.target(); t != nil && len(t.dirty) == 0 && p.batch == nil && len(p.segs) > 0 {
		t.retired = true
		p.roll(0)
	}
}

// kick starts the next batch if one can start.
func (p *Partition[U]) kick() {
	h := p.l.hooks
	if p.halted != nil || p.batch != nil || p.opening || len(p.queue)+len(p.afterRoll) == 0 || h.Stopped() {
		return
	}
	if p.l.cfg.BatchSyncInterval > 0 && !p.syncDue && len(p.afterRoll) == 0 {
		p.armSync()
		return
	}
	seg := p.target()
	if seg == nil || seg.poisoned || seg.retired || seg.f == nil { // none, poisoned, retired, or read by recovery
		p.roll(0)
		return
	}
	if len(p.afterRoll) > 0 {
		// A failed batch's units are answered as soon as a roll
		// completes (rolled): a writable target with some still
		// unanswered means a roll did not answer them.
		h.Broken("a failed batch's units wait only for a roll: partition %d, %d unanswered, target %s writable", p.id, len(p.afterRoll), seg.Path)
		return
	}
	if len(p.queue) == 0 {
		return
	}
	b := p.take(seg)
	if b == nil {
		if !h.Stopped() { // else take found an invariant broken
			p.roll(int64(p.queue[0].size))
		}
		return
	}
	if b.seg != seg || b.end > seg.size || b.first != p.nextSeq {
		h.Broken("a batch fits its segment and continues the sequence: %s batch ends at %d, segment %d bytes, first %d, next %d", seg.Path, b.end, seg.size, b.first, p.nextSeq)
		return
	}
	p.syncDue = false
	p.write(b)
}

// armSync arms the BATCH_SYNC timer, once.
func (p *Partition[U]) armSync() {
	if p.syncTimer {
		return
	}
	p.syncTimer = true
	p.l.timer.AfterFunc(p.l.cfg.BatchSyncInterval, func() {
		if !p.syncTimer {
			p.l.hooks.Broken("the sync timer fires once, while armed: partition %d fired with none armed", p.id)
			return
		}
		p.syncTimer, p.syncDue = false, true
		p.kick()
	})
}

// take forms a batch from the head of the queue that fits seg, or nil
// if not even the first entry fits.
func (p *Partition[U]) take(seg *Segment) *batch[U] {
	batchMax := p.l.cfg.BatchBytes
	start := alignDown(seg.end)
	if int64(len(seg.tail)) != seg.end-start || seg.end > seg.size {
		// The batch rewrites the partly filled last block from its tail:
		// a tail of another length would shift, and tear, acked entries.
		p.l.hooks.Broken("a segment's tail is its partly written last block: %s ends at %d of %d bytes, tail %d bytes, want %d",
			seg.Path, seg.end, seg.size, len(seg.tail), seg.end-start)
		return nil
	}
	if int64(cap(p.scratch)) < batchMax+2*DirectAlign {
		p.scratch = make([]byte, 0, batchMax+2*DirectAlign)
	}
	buf := append(p.scratch[:0], seg.tail...)
	b := &batch[U]{seg: seg, first: p.nextSeq}
	seq := p.nextSeq
	for len(p.queue) > 0 {
		w := p.queue[0]
		if len(b.writes) > 0 && int64(len(buf)-len(seg.tail)+w.size) > batchMax {
			break
		}
		if start+int64(len(buf)+w.size) > seg.size {
			break
		}
		var payload []byte
		var err error
		if w.IsUnit() {
			payload = w.Payload
			PutUnitSeq(payload, seq)
			seq++
		} else {
			payload, err = appendRecord(w.Record)
		}
		if err != nil {
			p.l.hooks.Broken("a log entry encodes: %v", err)
			return nil
		}
		buf = AppendEntry(buf, payload)
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
func (p *Partition[U]) write(b *batch[U]) {
	if p.batch != nil || b.seg.f == nil || b.seg.poisoned || int64(len(b.buf))%DirectAlign != 0 {
		p.l.hooks.Broken("one batch at a time per partition, in whole blocks to a writable segment: partition %d, batch in flight %t, %s open %t, poisoned %t, %d bytes",
			p.id, p.batch != nil, b.seg.Path, b.seg.f != nil, b.seg.poisoned, len(b.buf))
		return
	}
	p.batch = b
	seg := b.seg
	var written struct { // the write's answer, read at its fsync's
		err  error
		done bool
	}
	seg.f.WriteAt(b.buf, alignDown(seg.end), func(err error) { written.err, written.done = err, true })
	seg.f.Sync(func(err error) {
		if !written.done {
			// Calls on one file complete in order (Disk): an fsync answered
			// before its write would make a batch durable whose write may
			// yet fail.
			p.l.hooks.Broken("a batch's write completes before its fsync: partition %d, batch from sequence %d on %s synced before written", p.id, b.first, seg.Path)
			return
		}
		if err == nil {
			err = written.err
		}
		if err != nil {
			p.failed(b, err)
			return
		}
		p.durable(b)
	})
}

// durable: the batch is covered by a completed fsync. The partition's
// state is brought up to date before any hook runs: a hook may queue
// entries and start the next batch.
func (p *Partition[U]) durable(b *batch[U]) {
	h := p.l.hooks
	if p.batch != b || b.seg.poisoned {
		h.Broken("a durable batch is the one in flight, on a segment not poisoned: partition %d, batch from sequence %d on %s, in flight %t, poisoned %t",
			p.id, b.first, b.seg.Path, p.batch == b, b.seg.poisoned)
		return
	}
	p.batch, p.scratch = nil, b.buf
	b.seg.end, b.seg.tail = b.end, b.tail
	if b.first != p.nextSeq {
		h.Broken("one batch at a time per partition: batch from sequence %d made durable, next sequence %d", b.first, p.nextSeq)
		return
	}
	if len(b.writes) == 0 {
		// take forms a batch of one entry at least: an empty one would
		// spend an fsync and move no sequence.
		h.Broken("a durable batch holds entries: partition %d, batch from sequence %d on %s holds none", p.id, b.first, b.seg.Path)
		return
	}
	seq := b.first
	p.nextSeq += uint64(b.units())
	for _, w := range b.writes {
		if !w.IsUnit() {
			if w.gen != 0 {
				b.seg.Pin(w.gen, 0, h.Now())
			}
			w.done()
			continue
		}
		if !h.Stopped() { // else the engine answered it when it stopped
			h.Durable(w, seq, b.seg)
		}
		seq++
	}
	p.l.stats.Syncs++
	p.kick()
}

// failed: the write or the fsync failed. The segment is poisoned; the
// units' outcome is unknown; records go back to the head of the queue.
func (p *Partition[U]) failed(b *batch[U], err error) {
	h := p.l.hooks
	if p.batch != b {
		h.Broken("a failed batch is the one in flight: partition %d, failed batch from sequence %d on %s", p.id, b.first, b.seg.Path)
		return
	}
	if len(b.writes) == 0 {
		// take forms a batch of one entry at least (as durable checks
		// at the other end of a batch).
		h.Broken("a failed batch holds entries: partition %d, batch from sequence %d on %s holds none", p.id, b.first, b.seg.Path)
		return
	}
	if b.seg.f == nil {
		// A segment's file closes only once nothing is written to it
		// (collect skips the batch's segment; failed closes it below).
		h.Broken("a failed batch's segment is still open: partition %d, batch from sequence %d on %s", p.id, b.first, b.seg.Path)
		return
	}
	p.batch = nil
	b.seg.poisoned = true
	p.l.stats.SyncFailures++
	h.Poisoned(b.seg, err)
	f := b.seg.f
	b.seg.f = nil
	f.Close(func(error) {}) // never synced again
	var again []*Write[U]
	for _, w := range b.writes {
		if !w.IsUnit() {
			again = append(again, w)
			continue
		}
		p.afterRoll = append(p.afterRoll, unknown[U]{w, fmt.Errorf("WAL segment %s: %v", b.seg.Path, err)})
	}
	p.queue = append(again, p.queue...)
	p.roll(0)
}

// answerAfterRoll gives each unit of a failed batch its Hooks.Unknown.
func (p *Partition[U]) answerAfterRoll() {
	if p.opening && !p.l.hooks.Stopped() {
		// Until the new segment's header is durable, recovery could take
		// the failed batch's entries that reached disk as written: its
		// units' outcome is not yet the source's to decide.
		p.l.hooks.Broken("a failed batch's units are answered once a roll completed, or the engine stopped: partition %d still opening, %d unanswered", p.id, len(p.afterRoll))
		return
	}
	us := p.afterRoll
	p.afterRoll = nil
	for _, u := range us {
		p.l.hooks.Unknown(u.w, u.err)
	}
}

// Stop answers the units of failed batches not yet answered
// (Hooks.Unknown) and returns the entries still queued or in the batch in
// flight: the engine stopped, and answers those itself.
func (p *Partition[U]) Stop() []*Write[U] {
	if !p.l.hooks.Stopped() {
		// The entries returned are the caller's to answer: the log must
		// start no batch of them (kick checks Stopped).
		p.l.hooks.Broken("a partition is stopped only once the engine has: partition %d, %d queued, batch in flight %t", p.id, len(p.queue), p.batch != nil)
		return nil
	}
	p.answerAfterRoll()
	out := append([]*Write[U](nil), p.queue...)
	if p.batch != nil {
		out = append(out, p.batch.writes...)
	}
	return out
}

func (b *batch[U]) units() (n int) {
	for _, w := range b.writes {
		if w.IsUnit() {
			n++
		}
	}
	return n
}
