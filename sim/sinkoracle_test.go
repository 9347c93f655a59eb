package sim

import (
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

type gauges struct {
	held, admission, cached, cache int64
	live                           int
}

func (g gauges) Memory() (int64, int64, int64, int64) { return g.held, g.admission, g.cached, g.cache }
func (g gauges) Stats() engine.Stats                  { return engine.Stats{LiveSegments: g.live} }
func (g gauges) LastAlert() error                     { return nil }

// Memory may sit above a budget that shrank, but never grow above it.
func TestOracleMemory(t *testing.T) {
	w := testWorld(t)
	w.oracle.checkMemory(gauges{held: 100, admission: 200, cached: 10, cache: 50})
	w.oracle.checkMemory(gauges{held: 100, admission: 50, cached: 10, cache: 5}) // budgets shrank
	w.oracle.checkMemory(gauges{held: 90, admission: 50, cached: 8, cache: 5})   // draining
	wantClean(t, w)
	w.oracle.checkMemory(gauges{held: 95, admission: 50, cached: 8, cache: 5})
	wantViolation(t, w, "admission grew")
	w2 := testWorld(t)
	w2.oracle.checkMemory(gauges{cached: 10, cache: 5, admission: 100})
	w2.oracle.checkMemory(gauges{cached: 11, cache: 5, admission: 100})
	wantViolation(t, w2, "body cache grew")
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
	w.dest = &fakeDest{}
	w.oracle.checkWAL(gauges{live: w.engCfg.LiveSegmentsMax})
	wantClean(t, w)
	w.oracle.checkWAL(gauges{live: w.engCfg.LiveSegmentsMax + 1})
	wantViolation(t, w, "above LiveSegmentsMax")
}

// Compaction must apply something within progressWindow while segments
// are owned and the sink is healthy; sink trouble restarts the window.
func TestOracleProgress(t *testing.T) {
	w := testWorld(t)
	w.dest = &fakeDest{}
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

func (d *fakeDest) Sink(engine.Ports) engine.Sink { return nil }
func (d *fakeDest) Contents() ([]DestJob, error)  { return d.jobs, nil }
func (d *fakeDest) Name() string                  { return "fake" }

// Exactly once, nothing else, in commit order; a destination that knows
// its apply order applied each namespace in segment order.
func TestOracleDestination(t *testing.T) {
	u1, u2, u3 := makeUID(0, 0, 1), makeUID(0, 0, 2), makeUID(0, 0, 3)
	seg := func(seq uint64) engine.SnapshotID { return engine.SnapshotID{Epoch: 1, Seq: seq} }
	job := func(seq uint64, order int, uids ...UID) DestJob {
		j := DestJob{Namespace: "events", Segment: seg(seq), Order: order}
		for _, u := range uids {
			j.UIDs = append(j.UIDs, int64(u), int64(u)) // two rows each
		}
		return j
	}
	for _, c := range []struct {
		name string
		jobs []DestJob
		want string
	}{
		{"control", []DestJob{job(1, 0, u1, u2), job(2, 1, u3)}, ""},
		{"control, order unknown", []DestJob{job(2, -1, u3), job(1, -1, u1, u2)}, ""},
		{"missing", []DestJob{job(1, 0, u1, u2)}, "namespace events"},
		{"duplicate", []DestJob{job(1, 0, u1, u2), job(2, 1, u3), job(3, 2, u3)}, "namespace events"},
		{"stranger", []DestJob{job(1, 0, u1, u2), job(2, 1, u3, makeUID(0, 0, 9))}, "namespace events"},
		{"applied out of order", []DestJob{job(2, 0, u3), job(1, 1, u1, u2)}, "applied after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := testWorld(t)
			commitSegment(t, w, 1, u1, u2)
			commitSegment(t, w, 2, u3)
			w.dest = &fakeDest{jobs: c.jobs}
			w.oracle.checkDestination()
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
