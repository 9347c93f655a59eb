package wal

import (
	"errors"
	"fmt"
	"path"
)

// roll opens a new target segment: created, sized (preallocated), its
// header written and fsynced, its directory entry durable. need > 0: an
// entry that does not fit an empty segment gets a segment of its size.
// Units of a failed batch are answered only once a roll completed
// (afterRoll): from then on the new header's first_seq tells recovery to
// ignore whatever of that batch reached disk.
func (p *Partition[U]) roll(need int64) {
	if p.opening {
		return
	}
	if p.halted != nil {
		// A halted partition is frozen as recovery found it: it takes no
		// writes (kick, Start and the engine's admission keep them away).
		p.l.hooks.Broken("a halted partition never rolls to a new segment: partition %d, halted on %v", p.id, p.halted)
		return
	}
	p.opening = true
	seg := &Segment{Num: p.nextNum, Path: SegmentPath(p.id, p.nextNum), size: p.l.cfg.SegmentBytes, dirty: map[uint64]uint64{}}
	p.nextNum++
	hdr := int64(EntryBytes(HeaderBytes))
	if need+hdr+DirectAlign > seg.size {
		seg.size = alignUp(need + hdr + DirectAlign)
	}
	if need < 0 || seg.size < need+hdr || seg.size%DirectAlign != 0 {
		p.l.hooks.Broken("a new log segment holds its header and the entry it is rolled for, in whole blocks: %s, %d bytes, entry %d, header %d", seg.Path, seg.size, need, hdr)
		return
	}
	p.create(seg, func(err error, exists bool) { p.rolled(seg, err, exists) })
}

// rolled: the new segment's creation ended. A failure is retried after a
// backoff; a success makes seg the append target.
func (p *Partition[U]) rolled(seg *Segment, err error, exists bool) {
	l, h := p.l, p.l.hooks
	if !p.opening || seg.Num >= p.nextNum {
		h.Broken("a roll completes once, for the segment it numbered: partition %d, segment %d, opening %t, next number %d",
			p.id, seg.Num, p.opening, p.nextNum)
		return
	}
	if err != nil && exists {
		// Created, then a step failed: nothing in it counts, remove it
		// (a removal that fails leaves it to the next recovery, which
		// reads and deletes it like any other).
		l.disk.Remove(seg.Path, func(error) {})
	}
	if err != nil {
		p.openFails++
		h.OpenFailed(p.id, err)
		l.timer.AfterFunc(h.Backoff(p.openFails), func() {
			if !p.opening {
				// The partition stays opening until this timer lets the next
				// roll start: fired again, it would clear a later roll's.
				h.Broken("a failed segment creation's retry fires once, while it waits: partition %d segment %d, not opening", p.id, seg.Num)
				return
			}
			p.opening = false
			p.kick()
		})
		return
	}
	if seg.f == nil || seg.end <= 0 || seg.end > seg.size {
		// A creation reports success only once its header is durable
		// (dirSynced): the segment is open, its end past the header.
		h.Broken("a segment created is open past its header: %s, open %t, end %d of %d bytes", seg.Path, seg.f != nil, seg.end, seg.size)
		return
	}
	p.openFails, p.opening = 0, false
	h.Opened(p.id)
	p.segs = append(p.segs, seg)
	p.bytes += seg.size
	l.stats.SegmentsCreated++
	if !p.checkBytes() {
		return
	}
	p.answerAfterRoll()
	p.collect()
	p.kick()
}

// openStage is the step a log segment's creation is in (open).
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

// open is the creation of one segment file: its directory, the file, its
// preallocation, its header written and fsynced, its directory entry
// durable. Each step's callback asserts the stage it completes.
type open[U any] struct {
	p     *Partition[U]
	seg   *Segment
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
func (p *Partition[U]) create(seg *Segment, done func(err error, exists bool)) {
	h := Header{Partition: p.id, Segment: seg.Num, FirstSeq: p.nextSeq, SegmentBytes: uint64(seg.size)}
	payload, err := AppendHeader(nil, h)
	if err != nil {
		p.l.hooks.Broken("a segment header encodes: %v", err)
		return
	}
	o := &open[U]{p: p, seg: seg, done: done}
	o.head = AppendEntry(nil, payload)
	o.buf = append(append([]byte(nil), o.head...), make([]byte, alignUp(int64(len(o.head)))-int64(len(o.head)))...)
	if int64(len(o.buf)) > seg.size {
		p.l.hooks.Broken("a segment holds its header: header %d bytes, segment %d", len(o.buf), seg.size)
		return
	}
	p.makeDir(o.dirMade)
}

// checkStage asserts the stage a callback completes and moves to the next.
func (o *open[U]) checkStage(want, next openStage) bool {
	if o.stage != want {
		o.p.l.hooks.Broken("a log segment's creation completes the step it started: %s in stage %s, a callback of %s arrived", o.seg.Path, o.stage, want)
		return false
	}
	o.stage = next
	return true
}

func (o *open[U]) dirMade(err error) {
	if !o.checkStage(openMakingDir, openCreating) {
		return
	}
	if err != nil {
		o.stage = openFinished
		o.done(fmt.Errorf("make directory for %s: %w", o.seg.Path, err), false)
		return
	}
	o.p.l.disk.Open(o.seg.Path, OpenMode{Create: true, Write: true, Direct: true}, o.opened)
}

func (o *open[U]) opened(f File, err error) {
	if !o.checkStage(openCreating, openAllocating) {
		return
	}
	if err != nil {
		// A failed create may have left the entry: retire it too.
		o.stage = openFinished
		o.done(fmt.Errorf("create %s: %w", o.seg.Path, err), !errors.Is(err, ErrExists) && !errors.Is(err, ErrNotFound))
		return
	}
	if f == nil {
		o.p.l.hooks.Broken("a file created without an error is open (Disk.Open): %s", o.seg.Path)
		return
	}
	o.f = f
	f.Allocate(o.seg.size, o.allocated)
}

func (o *open[U]) allocated(err error) {
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
func (o *open[U]) headerWritten(err error) {
	if o.stage != openWritingHeader {
		o.p.l.hooks.Broken("a header write completes before its fsync: %s in stage %s", o.seg.Path, o.stage)
		return
	}
	o.werr = err
}

func (o *open[U]) headerSynced(err error) {
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
	o.p.l.disk.SyncDir(PartitionDir(o.p.id), o.dirSynced)
}

func (o *open[U]) dirSynced(err error) {
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
func (o *open[U]) fail(step string, err error) {
	if o.f == nil {
		// Only a step after the file opened fails here (opened answers
		// its own failure): there is a file to close.
		o.p.l.hooks.Broken("a segment's creation fails here only once its file is open: %s in stage %s, failing to %s: %v", o.seg.Path, o.stage, step, err)
		return
	}
	o.stage = openFinished
	o.f.Close(func(error) { o.done(fmt.Errorf("%s %s: %w", step, o.seg.Path, err), true) })
}

// makeDir creates the partition's directory and makes it durable (its
// entry in wal/, and wal/ in the root), once.
func (p *Partition[U]) makeDir(done func(error)) {
	if !p.opening {
		p.l.hooks.Broken("a partition's directory is made for a segment being created: partition %d, not opening", p.id)
		return
	}
	if p.dirReady {
		done(nil)
		return
	}
	d := p.l.disk
	d.MkdirAll(PartitionDir(p.id), func(err error) {
		if err != nil {
			done(err)
			return
		}
		d.SyncDir("", func(err error) {
			if err != nil {
				done(err)
				return
			}
			d.SyncDir(Root, func(err error) {
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
func (p *Partition[U]) collect() {
	if p.deleting || p.halted != nil || len(p.segs) < 2 {
		return
	}
	s := p.segs[0]
	if len(s.dirty) > 0 || (p.batch != nil && p.batch.seg == s) {
		return
	}
	p.deleting = true
	if s.f == nil {
		p.remove(s)
		return
	}
	f := s.f
	s.f = nil
	f.Close(func(error) { p.remove(s) })
}

// remove deletes the oldest segment s and makes that durable.
func (p *Partition[U]) remove(s *Segment) {
	if !p.deleting || len(p.segs) == 0 || p.segs[0] != s {
		// Checked before the file goes (checkDeleted checks again once
		// it is gone): a removal is collect's, of the oldest segment.
		p.l.hooks.Broken("a log segment removed is its partition's oldest, by collect: partition %d segment %d, deleting %t, %d segments", p.id, s.Num, p.deleting, len(p.segs))
		return
	}
	d := p.l.disk
	d.Remove(s.Path, func(err error) {
		if err != nil && !errors.Is(err, ErrNotFound) {
			p.retryCollect()
			return
		}
		d.SyncDir(path.Dir(s.Path), func(err error) {
			if err != nil {
				p.retryCollect()
				return
			}
			p.removed(s)
		})
	})
}

func (p *Partition[U]) retryCollect() {
	if !p.deleting {
		p.l.hooks.Broken("a removal retried is the one in flight: partition %d, none deleting", p.id)
		return
	}
	p.l.timer.AfterFunc(p.l.hooks.Backoff(p.l.cfg.AttemptsMax), func() {
		if !p.deleting {
			// The partition stays deleting until this timer lets the next
			// removal start: fired again, it would clear a later removal's.
			p.l.hooks.Broken("a failed removal's retry fires once, while it waits: partition %d, none deleting", p.id)
			return
		}
		p.deleting = false
		p.collect()
	})
}

// removed: s's removal is durable; it leaves the partition.
func (p *Partition[U]) removed(s *Segment) {
	p.deleting = false
	if !p.checkDeleted(s) {
		return
	}
	p.segs = p.segs[1:]
	p.bytes -= s.size
	p.l.stats.SegmentsDeleted++
	if !p.checkBytes() {
		return
	}
	p.collect()
}

// checkDeleted: a log segment is deleted only when no generation holds
// entries in it, it is not the append target, and it is its partition's
// oldest (Segment.dirty's INVARIANT). It can break in collect, whose
// removal is asynchronous: it runs when the removal is durable, before the
// segment leaves the partition.
func (p *Partition[U]) checkDeleted(s *Segment) bool {
	h := p.l.hooks
	switch {
	case len(p.segs) == 0:
		h.Broken("log segments are deleted oldest first: partition %d deleted segment %d, it holds none", p.id, s.Num)
	case p.segs[0] != s:
		h.Broken("log segments are deleted oldest first: partition %d deleted segment %d, its oldest is %d", p.id, s.Num, p.segs[0].Num)
	case len(s.dirty) > 0:
		h.Broken("a log segment is deleted only when nothing unflushed is in it: partition %d segment %d holds generations %v", p.id, s.Num, s.dirty)
	case s == p.target():
		h.Broken("the append target is never deleted: partition %d segment %d", p.id, s.Num)
	default:
		return true
	}
	return false
}

// checkBytes: a partition's bytes are the sum of its segments' sizes,
// none negative (a file recovery found may be empty: created, then the
// crash came before its preallocation), after a segment joins (rolled) or leaves (removed) —
// the size valve and the partition limit read them. O(segments), once
// per segment created or deleted.
func (p *Partition[U]) checkBytes() bool {
	var sum int64
	for _, s := range p.segs {
		if s.size < 0 {
			p.l.hooks.Broken("a log segment's size is not negative: partition %d segment %d, %d bytes", p.id, s.Num, s.size)
			return false
		}
		sum += s.size
	}
	if sum != p.bytes {
		p.l.hooks.Broken("a partition's bytes = Σ its segments' sizes: partition %d counts %d, %d segments hold %d", p.id, p.bytes, len(p.segs), sum)
		return false
	}
	return true
}
