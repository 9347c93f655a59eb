package wal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Read errors.
var (
	// ErrConfig: the log on disk has a partition the log's configuration
	// lacks. Retrying does not help; the operator must raise the count.
	ErrConfig = errors.New("engine: configuration does not match the log")
	// ErrSegmentSize: a segment file is larger than any this log writes.
	ErrSegmentSize = errors.New("wal: segment larger than this log writes")
)

// reading is one Read: the partitions left, the reader, and done.
type reading[U any] struct {
	l    *Log[U]
	seg  func(p *Partition[U], seg *Segment, image []byte)
	redo func()
	done func(error)
}

// Read reads the log on disk into the partitions (Reset first; a retry
// starts over): every partition directory, every segment file in number
// order, each joining its partition (Found) and, unless the partition
// has halted, handed to visit whole. A read that is not clean is read
// again (reread runs) up to AttemptsMax times (readSegment). done gets
// nil, an error wrapping ErrConfig (a partition past the configured
// count: retrying does not help), or a read's error (a retry may).
func (l *Log[U]) Read(visit func(p *Partition[U], seg *Segment, image []byte), reread func(), done func(error)) {
	l.Reset()
	r := &reading[U]{l: l, seg: visit, redo: reread, done: done}
	l.disk.ReadDir(Root, r.rootListed)
}

func (r *reading[U]) rootListed(names []string, err error) {
	if errors.Is(err, ErrNotFound) {
		r.done(nil)
		return
	}
	if err != nil {
		r.done(fmt.Errorf("read %s: %w", Root, err))
		return
	}
	var ids []uint32
	for _, n := range names {
		id, ok := ParsePartitionDir(n)
		if !ok {
			continue // not ours
		}
		if int(id) >= len(r.l.parts) {
			r.done(fmt.Errorf("%w: the log has partition %d, WAL_PARTITIONS is %d: set it to at least %d", ErrConfig, id, len(r.l.parts), id+1))
			return
		}
		ids = append(ids, id)
	}
	r.parts(ids)
}

// parts reads the partitions of ids, in order.
func (r *reading[U]) parts(ids []uint32) {
	if len(ids) == 0 {
		r.done(nil)
		return
	}
	p := r.l.parts[ids[0]]
	dir := PartitionDir(p.id)
	r.l.disk.ReadDir(dir, func(names []string, err error) {
		if err != nil {
			r.done(fmt.Errorf("read %s: %w", dir, err))
			return
		}
		var nums []uint64
		for _, n := range names {
			if num, ok := ParseSegmentName(n); ok {
				nums = append(nums, num)
			}
		}
		slices.Sort(nums)
		r.segs(p, nums, func() { r.parts(ids[1:]) })
	})
}

// segs reads a partition's segments in order. Every segment file joins
// the partition (it is deleted whole later); after a halt the rest are
// not read.
func (r *reading[U]) segs(p *Partition[U], nums []uint64, next func()) {
	if len(nums) == 0 {
		next()
		return
	}
	num := nums[0]
	name := SegmentPath(p.id, num)
	r.readSegment(name, 0, nil, func(b []byte, size int64, err error) {
		if err != nil {
			r.done(err)
			return
		}
		seg := p.Found(num, name, size)
		if seg == nil { // out of order: broken
			r.done(fmt.Errorf("%w: segment %d of partition %d out of order", ErrPartitionDamaged, num, p.id))
			return
		}
		if p.halted == nil {
			r.seg(p, seg, b)
		}
		r.segs(p, nums[1:], next)
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
func (r *reading[U]) readSegment(name string, tries int, best []byte, done func([]byte, int64, error)) {
	if tries < 0 || tries >= max(r.l.cfg.AttemptsMax, 1) {
		r.l.hooks.Broken("a segment is read at most AttemptsMax times: %s, try %d, limit %d", name, tries+1, r.l.cfg.AttemptsMax)
		done(nil, 0, fmt.Errorf("%w: %s read %d times", ErrPartitionDamaged, name, tries+1))
		return
	}
	r.l.disk.Open(name, OpenMode{Write: true}, func(f File, err error) {
		if err != nil {
			done(nil, 0, fmt.Errorf("open %s: %w", name, err))
			return
		}
		if f == nil {
			r.l.hooks.Broken("a file opened without an error is open (Disk.Open): %s, try %d", name, tries+1)
			done(nil, 0, fmt.Errorf("%w: %s opened as no file", ErrPartitionDamaged, name))
			return
		}
		f.Sync(func(err error) {
			if err != nil {
				f.Close(func(error) { done(nil, 0, fmt.Errorf("sync %s: %w", name, err)) })
				return
			}
			r.readOpen(name, f, tries, best, done)
		})
	})
}

func (r *reading[U]) readOpen(name string, f File, tries int, best []byte, done func([]byte, int64, error)) {
	f.Size(func(size int64, err error) {
		if err == nil && size < 0 {
			// File.Size reports a file's length: a negative one would size
			// no buffer.
			r.l.hooks.Broken("a file's size is not negative (File.Size): %s, %d bytes", name, size)
			f.Close(func(error) { done(nil, 0, fmt.Errorf("%w: %s: size %d", ErrPartitionDamaged, name, size)) })
			return
		}
		if err == nil && size > r.l.cfg.SegmentBytes+EntryPayloadMax+4*DirectAlign {
			err = fmt.Errorf("%w: log segment %s has %d bytes, more than any segment this log writes", ErrSegmentSize, name, size)
		}
		if err != nil {
			f.Close(func(error) { done(nil, 0, err) })
			return
		}
		buf := make([]byte, size)
		f.ReadAt(buf, 0, func(n int, err error) {
			if n < 0 || n > len(buf) {
				r.l.hooks.Broken("a read returns at most the bytes asked: %s read %d of %d", name, n, len(buf))
				f.Close(func(error) {
					done(nil, 0, fmt.Errorf("%w: %s: a read of %d bytes returned %d", ErrPartitionDamaged, name, len(buf), n))
				})
				return
			}
			f.Close(func(error) { r.readDone(name, buf[:n], err, tries, best, size, done) })
		})
	})
}

// readDone judges one read of name: clean, or agreeing with the last, or
// out of attempts, it is done; else it is read again.
func (r *reading[U]) readDone(name string, buf []byte, err error, tries int, best []byte, size int64, done func([]byte, int64, error)) {
	if (tries == 0) != (best == nil) {
		// The first read has nothing to compare with; every reread
		// carries the best read so far (readSegment's rereads).
		r.l.hooks.Broken("a reread of a segment carries the best read so far: %s, try %d, best read held %t", name, tries+1, best != nil)
		done(nil, 0, fmt.Errorf("%w: %s: reread without its earlier read", ErrPartitionDamaged, name))
		return
	}
	if err != nil {
		done(nil, 0, fmt.Errorf("read %s: %w", name, err))
		return
	}
	sc := Scan(name, buf)
	same := best != nil && bytes.Equal(best, buf) // two reads agree: the disk holds this
	if best != nil && len(Scan(name, best).Entries) > len(sc.Entries) {
		buf = best
	}
	if (sc.Torn || sc.Corrupt != nil) && !same && tries+1 < r.l.cfg.AttemptsMax {
		r.redo()
		r.readSegment(name, tries+1, buf, done)
		return
	}
	done(buf, size, nil)
}
