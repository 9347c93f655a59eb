package wal

import (
	"errors"
	"testing"
)

// syncFirstFile is an open file that answers an fsync at once and never
// the write before it: calls on one file completing out of order.
type syncFirstFile struct{ File }

func (syncFirstFile) WriteAt([]byte, int64, func(error)) {}
func (syncFirstFile) Sync(done func(error))              { done(nil) }

// negativeFile is an open file whose size reads negative.
type negativeFile struct{ File }

func (negativeFile) Size(done func(int64, error)) { done(-1, nil) }
func (negativeFile) Close(done func(error))       { done(nil) }

// noFileDisk opens every path without an error, and without a file.
type noFileDisk struct{ Disk }

func (noFileDisk) Open(_ string, _ OpenMode, done func(File, error)) { done(nil, nil) }

// TestInvariantLogPorts breaks on purpose the log core's checks of its
// ports added for the assertion density — a file's calls answered out of
// order, a retry's timer that fires twice, a Disk or File answer no port
// gives — each reported through Hooks.Broken.
func TestInvariantLogPorts(t *testing.T) {
	timed := func(l *Log[int]) *heldTimers {
		h := &heldTimers{}
		l.timer = h
		return h
	}
	cases := map[string]logBreak{
		"batch-synced-before-written": {"a batch's write completes before its fsync: partition 0, batch from sequence 1 on wal/p/s1 synced before written", func(t *testing.T, l *Log[int], p *Partition[int]) {
			b := &batch[int]{seg: &Segment{Num: 1, Path: "wal/p/s1", f: syncFirstFile{}, size: 1 << 20}, first: 1, buf: make([]byte, DirectAlign)}
			p.write(b)
			if p.batch != b || p.nextSeq != 1 {
				t.Errorf("batch in flight %t, next sequence %d: the batch was taken as durable", p.batch == b, p.nextSeq)
			}
		}},
		"open-retry-fires-twice": {"a failed segment creation's retry fires once, while it waits: partition 0 segment 1, not opening", func(t *testing.T, l *Log[int], p *Partition[int]) {
			timers := timed(l)
			p.opening, p.nextNum = true, 2
			p.rolled(&Segment{Num: 1, Path: SegmentPath(0, 1)}, errors.New("EIO"), false)
			timers.fns[0]() // nothing queued: no roll starts
			timers.fns[0]()
		}},
		"removal-retry-fires-twice": {"a failed removal's retry fires once, while it waits: partition 0, none deleting", func(t *testing.T, l *Log[int], p *Partition[int]) {
			timers := timed(l)
			p.deleting = true
			p.retryCollect()
			timers.fns[0]() // no segment to collect: no removal starts
			timers.fns[0]()
		}},
		"segment-opened-without-a-file": {"a file opened without an error is open (Disk.Open): wal/partition-0/segment-000000000001.wal, try 1", func(t *testing.T, l *Log[int], p *Partition[int]) {
			l.disk = noFileDisk{}
			var got error
			r := &reading[int]{l: l}
			r.readSegment(SegmentPath(0, 1), 0, nil, func(_ []byte, _ int64, err error) { got = err })
			if !errors.Is(got, ErrPartitionDamaged) {
				t.Errorf("done got %v; want the read refused", got)
			}
		}},
		"segment-size-negative": {"a file's size is not negative (File.Size): wal/partition-0/segment-000000000001.wal, -1 bytes", func(t *testing.T, l *Log[int], p *Partition[int]) {
			var got error
			r := &reading[int]{l: l}
			r.readOpen(SegmentPath(0, 1), negativeFile{}, 0, nil, func(_ []byte, _ int64, err error) { got = err })
			if !errors.Is(got, ErrPartitionDamaged) {
				t.Errorf("done got %v; want the read refused", got)
			}
		}},
	}
	runLogBreaks(t, cases)
}
