package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

type gauges struct {
	held, admission, cached, cache int64
	live                           int
}

func (g gauges) Memory() (int64, int64, int64, int64)    { return g.held, g.admission, g.cached, g.cache }
func (g gauges) Progress() (int, uint64, uint64, uint64) { return g.live, 0, 0, 0 }
func (g gauges) LastAlert() error                        { return nil }
func (g gauges) Segments() []engine.Segment              { return nil }
func (g gauges) OpenJobs() []engine.OpenJob              { return nil }

// valveGauges has owned segments 1..n of epoch 1 and one open job from
// segment first.
type valveGauges struct {
	gauges
	n, first uint64
}

func (g valveGauges) Segments() []engine.Segment {
	out := make([]engine.Segment, g.n)
	for i := range out {
		out[i].ID = engine.SnapshotID{Epoch: 1, Seq: uint64(i) + 1}
	}
	return out
}

func (g valveGauges) OpenJobs() []engine.OpenJob {
	return []engine.OpenJob{{SinkRef: "lake", Namespace: "ns0", First: engine.SnapshotID{Epoch: 1, Seq: g.first}}}
}

// An open job may pin up to the valve's threshold of owned segments,
// never more.
func TestOracleValveBound(t *testing.T) {
	w := testWorld(t)
	w.dests = map[string]Destination{"lake": &fakeDest{}}
	w.engCfg.ValveSegments = 4
	w.oracle.checkWAL(valveGauges{gauges{live: 10}, 10, 7}) // pins 4
	wantClean(t, w)
	w.oracle.checkWAL(valveGauges{gauges{live: 10}, 10, 6}) // pins 5
	wantViolation(t, w, "above the valve's 4")
}

// Memory may sit above a budget that shrank, but never grow above it
// within one engine's life; a new engine's first reading (recovery's
// replay) is its baseline.
func TestOracleMemory(t *testing.T) {
	w := testWorld(t)
	g := &gauges{held: 100, admission: 200, cached: 10, cache: 50}
	read := func(held, admission, cached, cache int64) {
		g.held, g.admission, g.cached, g.cache = held, admission, cached, cache
		w.oracle.checkMemory(g)
	}
	read(100, 200, 10, 50)
	read(100, 50, 10, 5) // budgets shrank
	read(90, 50, 8, 5)   // draining
	wantClean(t, w)
	read(95, 50, 8, 5)
	wantViolation(t, w, "admission grew")
	w2 := testWorld(t)
	g = &gauges{cached: 10, cache: 5, admission: 100}
	w2.oracle.checkMemory(g)
	g.cached = 11
	w2.oracle.checkMemory(g)
	wantViolation(t, w2, "body cache grew")
	w3 := testWorld(t)
	w3.oracle.checkMemory(&gauges{held: 10, admission: 50})
	w3.oracle.checkMemory(&gauges{held: 80, admission: 50}) // another engine: its replay restored 80
	wantClean(t, w3)
}

type progressGauges struct {
	gauges
	applied uint64
}

func (g progressGauges) Stats() engine.Stats {
	return engine.Stats{LiveSegments: g.live, JobsApplied: g.applied}
}

// The WAL never holds more than LiveSegmentsMax segments, at any step.
func TestOracleBoundedWAL(t *testing.T) {
	w := testWorld(t)
	w.dests = map[string]Destination{"lake": &fakeDest{}}
	w.oracle.checkWAL(gauges{live: w.engCfg.LiveSegmentsMax})
	wantClean(t, w)
	w.oracle.checkWAL(gauges{live: w.engCfg.LiveSegmentsMax + 1})
	wantViolation(t, w, "above LiveSegmentsMax")
}

// Compaction must apply something within progressWindow while segments
// are owned and the sink is healthy; sink trouble restarts the window.
func TestOracleProgress(t *testing.T) {
	w := testWorld(t)
	w.dests = map[string]Destination{"lake": &fakeDest{}}
	w.oracle.checkWAL(progressGauges{gauges{live: 5}, 1})
	w.sched.RunUntil(progressWindow - time.Second)
	w.trouble()
	w.sched.RunUntil(w.sched.Now() + progressWindow - time.Second)
	w.oracle.checkWAL(progressGauges{gauges{live: 5}, 1}) // trouble a while ago: not a stall yet
	wantClean(t, w)
	w.oracle.checkWAL(progressGauges{gauges{live: 5}, 2}) // progress
	w.sched.RunUntil(w.sched.Now() + progressWindow + time.Second)
	w.oracle.checkWAL(progressGauges{gauges{live: 5}, 2})
	wantViolation(t, w, "applied nothing")
}

// fakeDest is a destination whose contents a test sets.
type fakeDest struct{ jobs []DestJob }

func (d *fakeDest) Sink(SinkPorts) engine.Sink   { return nil }
func (d *fakeDest) Contents() ([]DestJob, error) { return d.jobs, nil }
func (d *fakeDest) Name() string                 { return "fake" }

// Every committed job exactly once, row for row, nothing else; a
// destination that knows its apply order applied each namespace in
// segment order.
func TestOracleDestination(t *testing.T) {
	u1, u2, u3 := makeUID(0, 0, 1), makeUID(0, 0, 2), makeUID(0, 0, 3)
	seg := func(seq uint64) engine.SnapshotID { return engine.SnapshotID{Epoch: 1, Seq: seq} }
	for _, c := range []struct {
		name string
		jobs func(d1, d2 RowDigest) []DestJob
		want string
	}{
		{"control", func(d1, d2 RowDigest) []DestJob {
			return []DestJob{{ID: "a", Namespace: "events", Segment: seg(1), Order: 0, Digest: d1}, {ID: "b", Namespace: "events", Segment: seg(2), Order: 1, Digest: d2}}
		}, ""},
		{"control, order unknown", func(d1, d2 RowDigest) []DestJob {
			return []DestJob{{ID: "b", Namespace: "events", Segment: seg(2), Order: -1, Digest: d2}, {ID: "a", Namespace: "events", Segment: seg(1), Order: -1, Digest: d1}}
		}, ""},
		{"missing", func(d1, d2 RowDigest) []DestJob {
			return []DestJob{{ID: "a", Namespace: "events", Segment: seg(1), Order: 0, Digest: d1}}
		}, "lacks namespace events of segment 000000000001-000000000002"},
		{"duplicate", func(d1, d2 RowDigest) []DestJob {
			return []DestJob{{ID: "a", Namespace: "events", Segment: seg(1), Order: 0, Digest: d1}, {ID: "b", Namespace: "events", Segment: seg(2), Order: 1, Digest: d2},
				{ID: "c", Namespace: "events", Segment: seg(2), Order: 2, Digest: d2}}
		}, "twice"},
		{"stranger", func(d1, d2 RowDigest) []DestJob {
			return []DestJob{{ID: "a", Namespace: "events", Segment: seg(1), Order: 0, Digest: d1}, {ID: "b", Namespace: "events", Segment: seg(2), Order: 1, Digest: d2},
				{ID: "x", Namespace: "events", Segment: seg(9), Order: 2, Digest: d2}}
		}, "no counting marker committed"},
		{"different rows", func(d1, d2 RowDigest) []DestJob {
			bad := d2
			bad.Sum++
			return []DestJob{{ID: "a", Namespace: "events", Segment: seg(1), Order: 0, Digest: d1}, {ID: "b", Namespace: "events", Segment: seg(2), Order: 1, Digest: bad}}
		}, "committed 2 rows (digest"},
		{"applied out of order", func(d1, d2 RowDigest) []DestJob {
			return []DestJob{{ID: "b", Namespace: "events", Segment: seg(2), Order: 0, Digest: d2}, {ID: "a", Namespace: "events", Segment: seg(1), Order: 1, Digest: d1}}
		}, "applied after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			commitSegment(t, w, 1, u1, u2)
			commitSegment(t, w, 2, u3)
			d1, d2 := w.oracle.order[0].jobs[jobKey{"lake", "events", unitFingerprint, false}], w.oracle.order[1].jobs[jobKey{"lake", "events", unitFingerprint, false}]
			w.spec.Sinks = []SinkSpec{{Ref: "lake", Kind: "fake"}}
			w.dests = map[string]Destination{"lake": &fakeDest{jobs: c.jobs(d1, d2)}}
			w.oracle.checkDestinations(false)
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}

func TestOracleReclaimed(t *testing.T) {
	w := testWorld(t)
	w.oracle.checkReclaimed()
	wantClean(t, w)
	commitSegment(t, w, 1, makeUID(0, 0, 1))
	w.oracle.checkReclaimed()
	wantViolation(t, w, "still holds")
}

// A run that stopped early may end after a new writer claimed the log and
// before its recovery sealed the markers of the writer before it: those
// markers are undecided, and the partial check accepts their jobs if the
// rows are the committed ones — but a job of a marker decided invalid, or
// with other rows, is still a violation.
func TestOracleDestinationHalted(t *testing.T) {
	seg := func(seq uint64) engine.SnapshotID { return engine.SnapshotID{Epoch: 1, Seq: seq} }
	for _, c := range []struct {
		name    string
		invalid bool // the marker of segment 1 was decided invalid
		bad     bool // the job's rows differ
		want    string
	}{
		{"undecided", false, false, ""},
		{"undecided, other rows", false, true, "committed 2 rows (digest"},
		{"invalid", true, false, "no counting marker committed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			commitSegment(t, w, 1, makeUID(0, 0, 1))
			m := w.oracle.order[0]
			w.oracle.writerEpoch = 2 // claimed by epoch 2, not yet sealed
			if m.validity != validityPending || w.oracle.counts(m) {
				t.Fatalf("validity %v, counts %v: want pending and not counting", m.validity, w.oracle.counts(m))
			}
			if c.invalid {
				m.validity = validityInvalid
			}
			d := m.jobs[jobKey{"lake", "events", unitFingerprint, false}]
			if c.bad {
				d.Sum++
			}
			w.spec.Sinks = []SinkSpec{{Ref: "lake", Kind: "fake"}}
			w.dests = map[string]Destination{"lake": &fakeDest{jobs: []DestJob{{ID: "a", Namespace: "events", Segment: seg(1), Order: 0, Digest: d}}}}
			w.oracle.checkDestinations(true)
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}

// A namespace of a segment with two schemas is two jobs: the destination
// must hold both, each once.
func TestOracleJobsPerSchema(t *testing.T) {
	k := destKey{namespace: "events", segment: engine.SnapshotID{Epoch: 1, Seq: 1}}
	a, b := RowDigest{Rows: 1, Sum: 1}, RowDigest{Rows: 2, Sum: 2}
	for _, c := range []struct {
		name string
		got  []RowDigest
		want string
	}{
		{"both", []RowDigest{b, a}, ""},
		{"one missing", []RowDigest{a}, "lacks 1 of the 2 jobs"},
		{"one twice", []RowDigest{a, b, a}, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			var jobs []DestJob
			for i, d := range c.got {
				jobs = append(jobs, DestJob{ID: fmt.Sprint(i), Namespace: "events", Segment: k.segment, Digest: d})
			}
			w.oracle.compareJobs("lake", k, jobs, []RowDigest{a, b}, false)
			if c.want == "" {
				wantClean(t, w)
				return
			}
			wantViolation(t, w, c.want)
		})
	}
}
