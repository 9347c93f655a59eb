package sim

import (
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// brokerTestWorld is the small world with its first source ("events",
// 4 partitions) read a fetch at a time from a broker that does what b
// says.
func brokerTestWorld(t *testing.T, b BrokerSpec) (*World, *source) {
	t.Helper()
	spec := SmallSpec("")
	spec.Sources[0].FetchMax, spec.Sources[0].Broker = 4, &b
	w := NewWorld(Config{Seed: 1, Iters: 1, World: &spec})
	s := w.sources[0]
	if s.brk == nil {
		t.Fatal("no broker behind the source")
	}
	return w, s
}

func recs(p int, seqs ...uint64) []UID {
	var out []UID
	for _, q := range seqs {
		out = append(out, makeUID(0, p, q))
	}
	return out
}

// Records up to the last committed one that are neither committed nor
// in a reported gap are a hole; a reported gap of records retention
// removed covers them.
func TestBrokerOracleHole(t *testing.T) {
	w, s := brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	commitSegment(t, w, 1, recs(0, 1, 2, 5)...)
	s.highest[0] = 5
	w.oracle.checkBrokerHoles()
	wantViolation(t, w, "partition 0: records 3..4 were never committed, and no reported gap holds them")

	w, s = brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	commitSegment(t, w, 1, recs(0, 1, 2, 5)...)
	s.highest[0], s.brk.start[0] = 5, 5
	w.brokerGapReported(s, brokerGap{p: 0, from: 3, to: 5, skipped: true})
	w.oracle.checkBrokerHoles()
	wantClean(t, w)
}

// A gap must hold records retention removed, and only those.
func TestBrokerOracleGapNotRemoved(t *testing.T) {
	w, s := brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	s.brk.start[1] = 4
	w.brokerGapReported(s, brokerGap{p: 1, from: 2, to: 4})
	wantClean(t, w)
	w.brokerGapReported(s, brokerGap{p: 1, from: 2, to: 6})
	wantViolation(t, w, "retention removed no record from 4")
	w, s = brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	w.brokerGapReported(s, brokerGap{p: 2, from: 1, to: 2}) // nothing removed at all
	wantViolation(t, w, "retention removed no record from 1")
}

// At the end, a record read but never committed fails the world unless
// a reported gap holds it, or it is past the last committed record of
// a source that stopped on a gap.
func TestBrokerOracleUncommittedRead(t *testing.T) {
	final := func(w *World, segs ...engine.Segment) {
		w.oracle.checkFinal(fakeView{segs: segs})
	}
	w, s := brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	seg := commitSegment(t, w, 1, recs(0, 1, 2)...)
	unitOf(w, makeUID(0, 0, 3)) // read, never committed
	s.highest[0] = 3
	final(w, seg)
	wantViolation(t, w, "unit 0/0/3 produced but never committed")

	w, s = brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	seg = commitSegment(t, w, 1, recs(0, 1, 2, 5)...)
	unitOf(w, makeUID(0, 0, 3))
	s.highest[0], s.brk.start[0] = 5, 5
	w.brokerGapReported(s, brokerGap{p: 0, from: 3, to: 5, skipped: true})
	final(w, seg)
	wantClean(t, w)

	w, s = brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	seg = commitSegment(t, w, 1, recs(0, 1, 2)...)
	unitOf(w, makeUID(0, 0, 3))
	s.highest[0], s.brk.stopped = 3, true
	final(w, seg)
	wantClean(t, w)
}

// A partition begun at its log's start without an offset excuses what
// lies below — unless some of it was committed, which says an offset
// existed.
func TestBrokerOracleBegunWithoutOffset(t *testing.T) {
	w, s := brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	commitSegment(t, w, 1, recs(0, 4, 5)...)
	s.highest[0] = 5
	s.brk.starts = append(s.brk.starts, brokerStart{p: 0, at: 4})
	w.oracle.checkBrokerHoles()
	wantClean(t, w)

	w, s = brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	commitSegment(t, w, 1, recs(0, 2, 4, 5)...)
	s.highest[0] = 5
	s.brk.starts = append(s.brk.starts, brokerStart{p: 0, at: 4})
	w.oracle.checkBrokerHoles()
	wantViolation(t, w, "but record 2 of it was committed")
}

// The acknowledged-change ledger leaves out what a recovery's offsets
// cover but a reported gap lost.
func TestBrokerAcknowledgedSkipsGaps(t *testing.T) {
	w, s := brokerTestWorld(t, BrokerSpec{RetentionAge: time.Second, RetentionCheck: time.Second})
	commitSegment(t, w, 1, recs(0, 1, 2, 5)...)
	s.highest[0], s.brk.start[0], s.recovered[0] = 5, 5, 5
	w.brokerGapReported(s, brokerGap{p: 0, from: 3, to: 5, skipped: true})
	got := w.oracle.acknowledged(s)
	if want := recs(0, 1, 2, 5); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("acknowledged %v, want %v", got, want)
	}
}

// crashEvery kills the engine every n steps of the fault phase.
type crashEvery struct {
	noFaults
	n, i uint64
}

func (f *crashEvery) CrashNow() bool { f.i++; return f.i%f.n == 0 }

// A world whose broker removes records a quarter second after they are
// first read, adds partitions and goes away now and then, with the
// engine killed every few thousand steps (and a WAL that never fills,
// for want of a sink): the source reports the records lost to retention
// and stops (on_gap stop) or skips them, finds the added partitions,
// retries through the outages, and every oracle passes.
func TestBrokerWorld(t *testing.T) {
	for _, skip := range []bool{false, true} {
		spec := SmallSpec("")
		spec.Engine.LiveSegmentsMax = 1 << 20
		spec.Sources[0].FetchMax, spec.Sources[0].Partitions = 4, 6
		spec.Sources[0].Broker = &BrokerSpec{RetentionAge: 250 * time.Millisecond, RetentionCheck: 50 * time.Millisecond, OnGapSkip: skip,
			AddedPermille: []int{100, 500}, Metadata: 300 * time.Millisecond,
			Outages: []BrokerOutage{{StartPermille: 200, Length: 2 * time.Second}, {StartPermille: 600, Length: 500 * time.Millisecond}}}
		w := NewWorld(Config{Seed: 7, Iters: 60_000, Faults: &crashEvery{n: 4000}, World: &spec})
		res := w.Run(nil)
		if len(res.Violations) > 0 {
			t.Fatalf("skip=%v: %q", skip, res.Violations)
		}
		want := []string{MarkBrokerGapStopped}
		if skip {
			want = []string{MarkBrokerGapSkipped, MarkBrokerPartitionAdd, MarkBrokerOutageRetried}
		}
		for _, m := range want {
			if res.WorldMarks[m] == 0 {
				t.Errorf("skip=%v: mark %s not reached: %v", skip, m, res.WorldMarks)
			}
		}
		if b := w.sources[0].brk; b.stopped == skip || len(b.gaps) == 0 || skip && b.watched == 0 {
			t.Errorf("skip=%v: stopped %v, %d gaps, %d partitions found by the metadata watch", skip, b.stopped, len(b.gaps), b.watched)
		}
	}
}

// A fetch that finds its partition's next records removed reports the
// range and stops the source (on_gap stop) or goes on from the log's
// start (skip), never from anywhere else.
func TestBrokerFetchGap(t *testing.T) {
	for _, skip := range []bool{false, true} {
		w, s := brokerTestWorld(t, BrokerSpec{RetentionAge: time.Hour, RetentionCheck: time.Hour, OnGapSkip: skip})
		w.startIncarnation()
		stepUntil(t, w, func() bool { return w.eng != nil && w.eng.Ready() && s.next[0] > 3 && !s.inFlight[0] }, "three records acked")
		next := s.next[0]
		s.brk.appended(0, next+4) // read before, never acked
		s.brk.start[0] = next + 2 // and removed since
		s.tickPartition(0)
		wantClean(t, w)
		if len(s.brk.gaps) != 1 || s.brk.gaps[0] != (brokerGap{p: 0, from: next, to: next + 2, skipped: skip, at: w.sched.Now()}) {
			t.Fatalf("skip=%v: gaps %+v, want %d..%d", skip, s.brk.gaps, next, next+1)
		}
		if w.wmarks[MarkBrokerGapAtFetch] != 1 {
			t.Fatalf("skip=%v: marks %v", skip, w.wmarks)
		}
		switch {
		case skip && (s.brk.stopped || !s.inFlight[0] || s.next[0] != next+2):
			t.Fatalf("skip: stopped %v, in flight %v, next %d; want a fetch from %d", s.brk.stopped, s.inFlight[0], s.next[0], next+2)
		case !skip && (!s.brk.stopped || s.inFlight[0]):
			t.Fatalf("stop: stopped %v, in flight %v", s.brk.stopped, s.inFlight[0])
		}
	}
}
