package wal

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a Hooks that keeps what broke.
type recorder struct{ broke []string }

func (r *recorder) Durable(*Write[int], uint64, *Segment) {}
func (r *recorder) Unknown(*Write[int], error)            {}
func (r *recorder) Poisoned(*Segment, error)              {}
func (r *recorder) OpenFailed(uint32, error)              {}
func (r *recorder) Opened(uint32)                         {}
func (r *recorder) Backoff(int) time.Duration             { return time.Millisecond }
func (r *recorder) Stopped() bool                         { return false }
func (r *recorder) Now() time.Duration                    { return 0 }
func (r *recorder) Broken(format string, args ...any) {
	r.broke = append(r.broke, fmt.Sprintf(format, args...))
}

// wantBroken: exactly one invariant broke, and its message holds want.
func (r *recorder) wantBroken(t *testing.T, want string) {
	t.Helper()
	if len(r.broke) != 1 || !strings.Contains(r.broke[0], want) {
		t.Fatalf("broke %q; want one containing %q", r.broke, want)
	}
}

func testLog(parts int) (*Log[int], *recorder) {
	r := &recorder{}
	return New[int](Config{Partitions: parts, SegmentBytes: 1 << 20, BatchBytes: 1 << 16, AttemptsMax: 5}, nil, nil, r), r
}

// A log segment deleted out of order, with generations in it, or as the
// append target breaks the log's invariant.
func TestInvariantSegmentDeleted(t *testing.T) {
	for name, c := range map[string]struct {
		segs []*Segment
		del  int
		want string
	}{
		"not the oldest": {[]*Segment{{Num: 1}, {Num: 2}, {Num: 3}}, 1, "log segments are deleted oldest first: partition 0 deleted segment 2, its oldest is 1"},
		"dirty":          {[]*Segment{{Num: 1, dirty: map[uint64]uint64{7: 40}}, {Num: 2}}, 0, "nothing unflushed is in it: partition 0 segment 1 holds generations map[7:40]"},
		"target":         {[]*Segment{{Num: 5}}, 0, "the append target is never deleted: partition 0 segment 5"},
		"none left":      {nil, -1, "log segments are deleted oldest first: partition 0 deleted segment 9, it holds none"},
	} {
		l, r := testLog(1)
		p := l.Partition(0)
		p.segs = c.segs
		del := &Segment{Num: 9}
		if c.del >= 0 {
			del = c.segs[c.del]
		}
		if p.checkDeleted(del) {
			t.Fatalf("%s: passed", name)
		}
		r.wantBroken(t, c.want)
	}
	l, r := testLog(1)
	p := l.Partition(0)
	p.segs = []*Segment{{Num: 1}, {Num: 2}}
	if !p.checkDeleted(p.segs[0]) || len(r.broke) != 0 {
		t.Fatalf("the oldest clean segment: %q", r.broke)
	}
}

// TestInvariantLogSteps: a segment's creation step that completes in
// another stage, a failed batch that is not the one in flight, a roll for
// an entry of negative size, and a found segment out of number order each
// break the log's invariant.
func TestInvariantLogSteps(t *testing.T) {
	cases := map[string]struct {
		want   string
		break_ func(p *Partition[int])
	}{
		"header-written-late": {"a header write completes before its fsync", func(p *Partition[int]) {
			o := &open[int]{p: p, seg: &Segment{Path: "wal/p000/s1"}, stage: openAllocating}
			o.headerWritten(nil)
		}},
		"dir-synced-twice": {"in stage finished, a callback of syncing-dir", func(p *Partition[int]) {
			o := &open[int]{p: p, seg: &Segment{Path: "wal/p000/s1"}, stage: openFinished}
			o.dirSynced(nil)
		}},
		"failed-batch-not-in-flight": {"a failed batch is the one in flight", func(p *Partition[int]) {
			p.failed(&batch[int]{seg: &Segment{Path: "wal/p/s1"}}, errors.New("io"))
		}},
		"roll-negative-entry": {"a new log segment holds its header and the entry", func(p *Partition[int]) {
			p.roll(-1 << 30)
		}},
		"found-out-of-order": {"in number order: partition 0 segment 3 after 4", func(p *Partition[int]) {
			p.Found(4, SegmentPath(0, 4), 1<<20)
			p.Found(3, SegmentPath(0, 3), 1<<20)
		}},
		"resume-another-scan": {"a partition resumes from its own scan: partition 0, scan of 1", func(p *Partition[int]) {
			p.Resume(NewPartitionScan(1))
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, r := testLog(2)
			c.break_(l.Partition(0))
			r.wantBroken(t, c.want)
		})
	}
}
