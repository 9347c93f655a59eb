package wal

import (
	"errors"
	"testing"
)

// TestInvariantLogCore breaks on purpose the log core's pre- and
// postconditions (log.go, log_partition.go, log_open.go, log_read.go)
// that a test reaches without a disk: each reports exactly its invariant
// through Hooks.Broken.
func TestInvariantLogCore(t *testing.T) {
	halted := errors.New("corrupt entry")
	cases := map[string]logBreak{
		"unpin-generation-zero": {"a generation unpinned is one that pins (≥ 1): generation 0", func(t *testing.T, l *Log[int], p *Partition[int]) {
			l.Unpin(0)
		}},
		"regen-to-generation-zero": {"pins move between generations that pin (≥ 1): from 3 to 0", func(t *testing.T, l *Log[int], p *Partition[int]) {
			s := &Segment{Num: 1, dirty: map[uint64]uint64{3: 9}}
			p.segs = []*Segment{s}
			l.Regen(3, 0)
			if s.dirty[3] != 9 {
				t.Errorf("dirty %v: the refused move moved the pins", s.dirty)
			}
		}},
		"reset-while-writing": {"the log is read only while idle: partition 0, batch in flight true", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.batch = &batch[int]{seg: &Segment{}}
			p.nextSeq = 40
			l.Reset()
			if p.nextSeq != 40 {
				t.Errorf("next sequence %d: the refused reset forgot the partition", p.nextSeq)
			}
		}},
		"found-negative-size": {"a found segment's size is not negative: partition 0 segment 2, -1 bytes", func(t *testing.T, l *Log[int], p *Partition[int]) {
			if p.Found(2, SegmentPath(0, 2), -1) != nil {
				t.Error("the segment was found")
			}
		}},
		"append-empty-unit": {"an entry's payload is 1..EntryPayloadMax bytes, a record's with its done: partition 0, 0 bytes", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.halted = halted // no batch starts
			p.Append(&Write[int]{})
		}},
		"append-record-without-done": {"a record's with its done: partition 0, 17 bytes, limit 67108864, unit false, done false", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.halted = halted
			p.AppendRecord(FlushedRecord{Snapshot: SnapshotRef{Epoch: 1, Seq: 2}}, 0, nil)
		}},
		"record-not-a-record": {"a seal or flushed record encodes: log record of type int", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.Append(&Write[int]{Record: 5, done: func() {}})
			if len(p.queue) != 0 {
				t.Error("the record was queued")
			}
		}},
		"take-record-not-a-record": {"a log entry encodes: log record of type string", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.queue = []*Write[int]{{Record: "seal", size: 64}}
			seg := &Segment{Path: "wal/p/s1", size: 1 << 20}
			if p.take(seg) != nil {
				t.Error("a batch was formed")
			}
		}},
		"durable-out-of-sequence": {"one batch at a time per partition: batch from sequence 3 made durable, next sequence 7", func(t *testing.T, l *Log[int], p *Partition[int]) {
			b := &batch[int]{seg: &Segment{Path: "wal/p/s1"}, first: 3}
			p.batch, p.nextSeq = b, 7
			p.durable(b)
		}},
		"segment-too-small-for-its-header": {"a segment holds its header: header 4096 bytes, segment 100", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.create(&Segment{Num: 1, Path: SegmentPath(0, 1), size: 100}, func(error, bool) { t.Error("created") })
		}},
		"segment-header-does-not-encode": {"a segment header encodes: wal: header: segment_bytes 0", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.create(&Segment{Num: 1, Path: SegmentPath(0, 1)}, func(error, bool) { t.Error("created") })
		}},
		"take-tail-not-the-last-block": {"a segment's tail is its partly written last block: wal/p/s1 ends at 10 of 1048576 bytes, tail 0 bytes, want 10", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.queue = []*Write[int]{{Payload: make([]byte, 8), size: EntryBytes(8)}}
			if p.take(&Segment{Path: "wal/p/s1", end: 10, size: 1 << 20}) != nil {
				t.Error("a batch was formed")
			}
		}},
		"write-second-batch": {"one batch at a time per partition, in whole blocks to a writable segment: partition 0, batch in flight true", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.batch = &batch[int]{seg: &Segment{}}
			p.write(&batch[int]{seg: &Segment{Path: "wal/p/s2"}})
		}},
		"durable-not-in-flight": {"a durable batch is the one in flight, on a segment not poisoned: partition 0, batch from sequence 5 on wal/p/s1, in flight false", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.nextSeq = 5
			p.durable(&batch[int]{seg: &Segment{Path: "wal/p/s1"}, first: 5})
			if p.nextSeq != 5 {
				t.Errorf("next sequence %d: the refused batch spent sequence numbers", p.nextSeq)
			}
		}},
		"durable-on-poisoned": {"poisoned true", func(t *testing.T, l *Log[int], p *Partition[int]) {
			b := &batch[int]{seg: &Segment{Path: "wal/p/s1", poisoned: true}, first: 1}
			p.batch = b
			p.durable(b)
		}},
		"roll-halted": {"a halted partition never rolls to a new segment: partition 0, halted on corrupt entry", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.halted = halted
			p.roll(0)
			if p.opening {
				t.Error("a segment is being created")
			}
		}},
		"rolled-twice": {"a roll completes once, for the segment it numbered: partition 0, segment 1, opening false, next number 2", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.nextNum = 2
			p.rolled(&Segment{Num: 1, size: 1 << 20}, nil, true)
			if len(p.segs) != 0 {
				t.Error("the segment joined twice")
			}
		}},
		"bytes-not-the-segments": {"a partition's bytes = Σ its segments' sizes: partition 0 counts 4096, 2 segments hold 8192", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.segs = []*Segment{{Num: 1, size: 4096}, {Num: 2, size: 4096}, {Num: 3, size: 4096}}
			p.bytes = 8192 // one segment counted out twice
			p.removed(p.segs[0])
		}},
		"segment-size-negative": {"a log segment's size is not negative: partition 0 segment 4, -4096 bytes", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.segs = []*Segment{{Num: 4, size: -4096}}
			p.bytes = -4096
			p.checkBytes()
		}},
		"read-past-attempts": {"a segment is read at most AttemptsMax times: wal/partition-0/segment-000000000001.wal, try 6, limit 5", func(t *testing.T, l *Log[int], p *Partition[int]) {
			var got error
			r := &reading[int]{l: l}
			r.readSegment(SegmentPath(0, 1), 5, nil, func(_ []byte, _ int64, err error) { got = err })
			if !errors.Is(got, ErrPartitionDamaged) {
				t.Errorf("done got %v; want the read refused", got)
			}
		}},
	}
	runLogBreaks(t, cases)
}

// TestCheckBytesHolds: a partition whose bytes are its segments' passes,
// and so does an empty one.
func TestCheckBytesHolds(t *testing.T) {
	l, r := testLog(1)
	p := l.Partition(0)
	if !p.checkBytes() {
		t.Fatalf("empty: %q", r.broke)
	}
	p.segs, p.bytes = []*Segment{{Num: 1, size: 4096}, {Num: 2, size: 8192}}, 12288
	if !p.checkBytes() || len(r.broke) != 0 {
		t.Fatalf("two segments: %q", r.broke)
	}
	// A file recovery found empty (the crash came between its creation
	// and its preallocation) is a segment of 0 bytes.
	p.segs, p.bytes = []*Segment{{Num: 1}, {Num: 2, size: 4096}}, 4096
	if !p.checkBytes() || len(r.broke) != 0 {
		t.Fatalf("an empty segment found by recovery: %q", r.broke)
	}
}

// logBreak is an invariant of the log core broken on purpose: want is
// the part of the message Hooks.Broken gets that names it.
type logBreak struct {
	want   string
	break_ func(t *testing.T, l *Log[int], p *Partition[int])
}

// runLogBreaks runs each case on its own two-partition log and wants
// exactly its invariant reported.
func runLogBreaks(t *testing.T, cases map[string]logBreak) {
	t.Helper()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, r := testLog(2)
			c.break_(t, l, l.Partition(0))
			r.wantBroken(t, c.want)
		})
	}
}
