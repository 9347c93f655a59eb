package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Destination is a sink's durable side: the table, bucket or directory
// the rows end up in. It outlives engine incarnations. The world asks it
// for an engine.Sink bound to each incarnation, and for what it holds when
// the oracle checks exactly-once delivery. Implementations live with the
// sinks (cmd/simulate wires them), so sim stays free of sink formats.
//
// A destination may also implement OwnFaults (it meets the world's sink
// faults inside its own model), TableChecker (its tables are checked row
// by row after convergence, tablecheck.go) and Marked (it counts its rare
// paths for coverage).
type Destination interface {
	// Sink returns the destination's sink for one incarnation's ports.
	Sink(ports SinkPorts) engine.Sink
	// Contents returns every job the destination holds, read from its
	// durable state.
	Contents() ([]DestJob, error)
	// Name is printed in the run summary.
	Name() string
}

// SinkPorts are what a destination's sink for one incarnation may use:
// the incarnation's engine ports, and its Blocking port (blocking.go),
// which the engine itself never takes — only a sink that runs blocking
// calls, such as a database transaction, needs one.
type SinkPorts struct {
	engine.Ports
	Blocking engine.Blocking
}

// OwnFaults is a destination whose model injects the world's sink faults
// itself, drawing each from World.SinkFault where its own sink code meets
// it — a transaction that fails, or commits and answers that it failed —
// rather than having the world decide them in front of its sink. The
// world still crashes at points after its sink answers.
type OwnFaults interface {
	OwnFaults()
}

// Marked is a destination that counts the rare paths its own code took
// (coverage marks by name, such as a commit found landed after an
// ambiguous answer). The world sums them into Result.DestMarks.
type Marked interface {
	Marks() map[string]uint64
}

// DestJob is one applied job as the destination holds it.
type DestJob struct {
	ID        string
	Namespace string
	// Origin is the log that committed the job's segment (engine.Job's):
	// two pipelines' logs number their snapshots alike.
	Origin  segment.Origin
	Segment engine.SnapshotID
	// Order is the position at which the destination first applied the
	// job, or -1 when the destination cannot tell (objects in a bucket).
	Order int
	// Digest covers the job's rows in order, every column (RowDigest).
	Digest RowDigest
}

// DestinationFactory builds the destination for sink_ref ref inside a
// world (it may use the world's object store or disk).
type DestinationFactory func(w *World, ref string) Destination

// Store returns the world's object store (for destinations that write
// into it, such as Parquet on object storage).
func (w *World) Store() *Store { return w.store }

// Disk returns the world's disk (for destinations that write files).
func (w *World) Disk() *Disk { return w.disk }

// ErrSinkDown is what a sink answers during a simulated outage.
var ErrSinkDown = errors.New("sim: sink unavailable")

// SinkFaults decides what goes wrong with one Apply.
type SinkFaults interface {
	// DecideSink returns the fate of an apply at now.
	DecideSink(now time.Duration) SinkOutcome
}

// SinkOutcome is what happens to one sink apply.
type SinkOutcome uint8

const (
	SinkOK        SinkOutcome = iota
	SinkFail                  // fails before applying (an error or an outage): no effect
	SinkAmbiguous             // applies, but reports failure
	SinkRefuse                // refuses the job for good (engine.ErrCannotApply): no effect
)

// World accessors for destinations (cmd/simulate builds them around the
// world: a destination model that draws faults, counts time, or draws
// from its own seeded stream).

// Now returns the world's simulated time.
func (w *World) Now() time.Duration { return w.sched.Now() }

// WallUnixMs returns the world's wall clock (the one every incarnation's
// engine.Clock reads), for destinations that stamp what they keep.
func (w *World) WallUnixMs() int64 { return w.sched.WallUnixMs() }

// DestRand returns a stream of the world's seed for a destination's own
// draws, by label; the same label gives the same stream, so call it once.
func (w *World) DestRand(label string) *Rand { return w.root.Split("dest/" + label) }

// SinkFault decides the fate of one sink apply (or one transaction of a
// destination that injects its own faults) from the world's fault plan.
// Any fault is trouble for the progress oracle; a refusal is the alert
// that will name jobID, which ends the run as it should.
func (w *World) SinkFault(jobID string) SinkOutcome {
	outcome := w.faults.DecideSink(w.sched.Now())
	if outcome != SinkOK {
		for _, p := range w.all() {
			p.trouble() // a shared destination's fault is every pipeline's trouble
		}
	}
	if outcome == SinkRefuse {
		w.expectAlert(jobID)
	}
	return outcome
}

// faultySink injects sink faults in front of a destination's sink, or —
// for a destination that injects its own (OwnFaults) — only watches its
// answers for crash points.
type faultySink struct {
	w      *World
	inner  engine.Sink
	timers engine.Timers
	own    bool // the destination decides its faults itself
	ref    string
}

func (s *faultySink) Apply(job *engine.Job, done func(error)) {
	outcome := SinkOK
	if !s.own {
		outcome = s.w.SinkFault(job.ID)
	}
	ambiguous := outcome == SinkAmbiguous
	if outcome == SinkRefuse {
		s.timers.AfterFunc(time.Millisecond, func() {
			done(fmt.Errorf("%w: sim: the sink refuses job %s", engine.ErrCannotApply, job.ID))
		})
		return
	}
	if outcome == SinkFail {
		s.timers.AfterFunc(time.Millisecond, func() { done(ErrSinkDown) })
		return
	}
	s.inner.Apply(job, func(err error) {
		s.w.onSinkApplied()
		if err == nil && ambiguous {
			err = errors.New("sim: sink applied the job but the answer was lost")
		}
		if err == nil {
			s.w.note(NoteApply, 0, s.ref, job.ID)
		}
		done(err)
	})
}

// destMarks sums the marks of the world's destinations that count them.
func (w *World) destMarks() map[string]uint64 {
	var out map[string]uint64
	for _, k := range w.spec.Sinks {
		d, ok := w.dests[k.Ref].(Marked)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]uint64{}
		}
		//engine:orderless — sums commute.
		for name, n := range d.Marks() {
			out[name] += n
		}
	}
	return out
}
