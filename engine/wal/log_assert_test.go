package wal

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// idleFile is an open file that never answers: enough for a segment
// that is the append target of a test that starts no I/O.
type idleFile struct{ File }

// heldTimers keeps the functions armed, for the test to fire.
type heldTimers struct{ fns []func() }

func (h *heldTimers) AfterFunc(_ time.Duration, fn func()) func() {
	h.fns = append(h.fns, fn)
	return func() {}
}

// TestInvariantLogStages breaks on purpose the log core's pre- and
// postconditions added for the assertion density: a step in the wrong
// state of its partition, a timer that fires with none armed, a port that
// breaks its contract. Each reports exactly its invariant through
// Hooks.Broken.
func TestInvariantLogStages(t *testing.T) {
	cases := map[string]logBreak{
		"pinned-from-the-future": {"a segment is pinned since no later than now: partition 0 segment 1 pinned since 10s, now 0s", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.segs = []*Segment{{Num: 1, dirty: map[uint64]uint64{3: 1}, pinnedSince: 10 * time.Second}}
			if l.PinnedLonger(time.Second) {
				t.Error("a pin from the future counts as old")
			}
		}},
		"append-twice": {"an entry is appended once: partition 0, an entry of", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.halted = errors.New("corrupt entry") // no batch starts
			w := &Write[int]{Payload: make([]byte, 8)}
			p.Append(w)
			p.Append(w)
			if len(p.queue) != 1 {
				t.Errorf("%d queued: the entry was queued twice", len(p.queue))
			}
		}},
		"unanswered-with-a-writable-target": {"a failed batch's units wait only for a roll: partition 0, 1 unanswered, target wal/p/s1 writable", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.segs, p.nextNum = []*Segment{{Num: 1, Path: "wal/p/s1", f: idleFile{}, size: 1 << 20}}, 2
			p.afterRoll = []unknown[int]{{w: &Write[int]{}, err: errors.New("fsync")}}
			p.kick()
		}},
		"durable-empty-batch": {"a durable batch holds entries: partition 0, batch from sequence 1 on wal/p/s1 holds none", func(t *testing.T, l *Log[int], p *Partition[int]) {
			b := &batch[int]{seg: &Segment{Path: "wal/p/s1"}, first: 1}
			p.batch = b
			p.durable(b)
		}},
		"failed-empty-batch": {"a failed batch holds entries: partition 0, batch from sequence 2 on wal/p/s1 holds none", func(t *testing.T, l *Log[int], p *Partition[int]) {
			b := &batch[int]{seg: &Segment{Path: "wal/p/s1", f: idleFile{}}, first: 2}
			p.batch = b
			p.failed(b, errors.New("EIO"))
		}},
		"failed-on-a-closed-segment": {"a failed batch's segment is still open: partition 0, batch from sequence 4 on wal/p/s1", func(t *testing.T, l *Log[int], p *Partition[int]) {
			b := &batch[int]{seg: &Segment{Path: "wal/p/s1"}, first: 4, writes: []*Write[int]{{}}}
			p.batch = b
			p.failed(b, errors.New("EIO"))
			if b.seg.poisoned {
				t.Error("the refused failure poisoned the segment")
			}
		}},
		"answered-before-the-roll": {"a failed batch's units are answered once a roll completed, or the engine stopped: partition 0 still opening, 1 unanswered", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.opening = true
			p.afterRoll = []unknown[int]{{w: &Write[int]{}, err: errors.New("fsync")}}
			p.answerAfterRoll()
			if len(p.afterRoll) != 1 {
				t.Error("the units were answered")
			}
		}},
		"stopped-while-running": {"a partition is stopped only once the engine has: partition 0, 1 queued, batch in flight false", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.queue = []*Write[int]{{Payload: make([]byte, 8)}}
			if out := p.Stop(); out != nil {
				t.Errorf("%d entries handed back", len(out))
			}
		}},
		"created-without-its-header": {"a segment created is open past its header: wal/partition-0/segment-000000000001.wal, open false, end 0 of 1048576 bytes", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.opening, p.nextNum = true, 2
			p.rolled(&Segment{Num: 1, Path: SegmentPath(0, 1), size: 1 << 20}, nil, true)
			if len(p.segs) != 0 {
				t.Error("the segment became the append target")
			}
		}},
		"created-no-file": {"a file created without an error is open (Disk.Open): wal/p/s1", func(t *testing.T, l *Log[int], p *Partition[int]) {
			o := &open[int]{p: p, seg: &Segment{Path: "wal/p/s1"}, stage: openCreating}
			o.opened(nil, nil)
		}},
		"creation-fails-before-its-file": {"a segment's creation fails here only once its file is open: wal/p/s1 in stage allocating, failing to preallocate: ENOSPC", func(t *testing.T, l *Log[int], p *Partition[int]) {
			o := &open[int]{p: p, seg: &Segment{Path: "wal/p/s1"}, stage: openAllocating, done: func(error, bool) { t.Error("done") }}
			o.fail("preallocate", errors.New("ENOSPC"))
		}},
		"directory-without-a-roll": {"a partition's directory is made for a segment being created: partition 0, not opening", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.makeDir(func(error) { t.Error("made") })
		}},
		"remove-not-the-oldest": {"a log segment removed is its partition's oldest, by collect: partition 0 segment 2, deleting true, 2 segments", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.segs, p.deleting = []*Segment{{Num: 1}, {Num: 2}}, true
			p.remove(p.segs[1])
		}},
		"removal-retried-unasked": {"a removal retried is the one in flight: partition 0, none deleting", func(t *testing.T, l *Log[int], p *Partition[int]) {
			p.retryCollect()
		}},
		"reread-without-the-read": {"a reread of a segment carries the best read so far: wal/p/s1, try 2, best read held false", func(t *testing.T, l *Log[int], p *Partition[int]) {
			var got error
			(&reading[int]{l: l}).readDone("wal/p/s1", make([]byte, 4096), nil, 1, nil, 4096, func(_ []byte, _ int64, err error) { got = err })
			if !errors.Is(got, ErrPartitionDamaged) {
				t.Errorf("done got %v; want the read refused", got)
			}
		}},
	}
	runLogBreaks(t, cases)
}

// TestInvariantLogSyncTimer: the BATCH_SYNC timer that fires with none
// armed breaks the log's invariant.
func TestInvariantLogSyncTimer(t *testing.T) {
	r := &recorder{}
	h := &heldTimers{}
	l := New[int](Config{Partitions: 1, SegmentBytes: 1 << 20, BatchBytes: 1 << 16, BatchSyncInterval: time.Millisecond, AttemptsMax: 5}, nil, h, r)
	p := l.Partition(0)
	p.armSync()
	p.syncTimer = false // cleared as if it had fired
	h.fns[0]()
	r.wantBroken(t, "the sync timer fires once, while armed: partition 0 fired with none armed")
	if p.syncDue {
		t.Error("the stray fire made a batch due")
	}
}

// TestInvariantLogRequires: a helper's REQUIRES broken by its direct
// caller panics, naming it with its values.
func TestInvariantLogRequires(t *testing.T) {
	for name, c := range map[string]struct {
		want string
		f    func()
	}{
		"pin-generation-zero": {"a pin is of a generation (≥ 1): segment 7, generation 0, sequence 3", func() {
			(&Segment{Num: 7, dirty: map[uint64]uint64{}}).Pin(0, 3, 0)
		}},
		"align-a-negative-offset": {"a block boundary below a negative offset -1", func() { alignDown(-1) }},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, c.want) {
					t.Fatalf("recovered %q; want a panic naming %q", msg, c.want)
				}
			}()
			c.f()
		})
	}
}
