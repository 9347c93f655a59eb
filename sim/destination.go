package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Destination is a sink's durable side: the table, bucket or directory
// the rows end up in. It outlives engine incarnations. The world asks it
// for an engine.Sink bound to each incarnation, and for what it holds when
// the oracle checks exactly-once delivery. Implementations live with the
// sinks (cmd/simulate wires them), so sim stays free of sink formats.
type Destination interface {
	// Sink returns the destination's sink for one incarnation's ports.
	Sink(ports engine.Ports) engine.Sink
	// Contents returns every job the destination holds, read from its
	// durable state.
	Contents() ([]DestJob, error)
	// Name is printed in the run summary.
	Name() string
}

// DestJob is one applied job as the destination holds it.
type DestJob struct {
	ID        string
	Namespace string
	Segment   engine.SnapshotID
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

// faultySink injects sink faults in front of a destination's sink.
type faultySink struct {
	w      *World
	inner  engine.Sink
	timers engine.Timers
}

func (s *faultySink) Apply(job *engine.Job, done func(error)) {
	outcome := s.w.faults.DecideSink(s.w.sched.Now())
	ambiguous := outcome == SinkAmbiguous
	if outcome != SinkOK {
		s.w.trouble()
	}
	if outcome == SinkRefuse {
		s.w.expectAlert(job.ID)
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
		done(err)
	})
}
