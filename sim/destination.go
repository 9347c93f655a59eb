package sim

import (
	"errors"
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
	// UIDs is the uid column of the job's rows, in row order.
	UIDs []int64
}

// DestinationFactory builds a destination inside a world (it may use the
// world's object store).
type DestinationFactory func(w *World) Destination

// Store returns the world's object store (for destinations that write
// into it, such as Parquet on object storage).
func (w *World) Store() *Store { return w.store }

// ErrSinkDown is what a sink answers during a simulated outage.
var ErrSinkDown = errors.New("sim: sink unavailable")

// SinkFaults decides what goes wrong with one Apply.
type SinkFaults interface {
	// DecideSink returns: fail before applying (no effect), apply but
	// report failure (ambiguous), or neither.
	DecideSink(r *Rand) (failBefore, ambiguous bool)
	// SinkDown reports whether the destination is in an outage at now.
	SinkDown(now time.Duration) bool
}

// faultySink injects sink faults in front of a destination's sink.
type faultySink struct {
	w      *World
	inner  engine.Sink
	timers engine.Timers
	rand   *Rand
}

func (s *faultySink) Apply(job *engine.Job, done func(error)) {
	failBefore, ambiguous := s.w.faults.DecideSink(s.rand)
	down := s.w.faults.SinkDown(s.w.sched.Now())
	if down || failBefore || ambiguous {
		s.w.trouble()
	}
	if down || failBefore {
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
