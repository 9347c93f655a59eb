package sinks

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Memory is an in-memory destination for tests and the simulator. Its
// contents outlive engine incarnations; each incarnation gets its own
// engine.Sink view (Sink) bound to that incarnation's timers.
//
// A view applies a job at once, inside Apply — the effect is the world's,
// not the process's — and answers through the incarnation's timers, later
// on its loop. So when the process is killed between the two, the answer
// is dropped while the apply stands: exactly a crash after the sink
// applied, which the engine must survive by replaying the job.
//
// Applying a job ID again is a no-op: the job is kept once, in
// first-apply order. A job whose ID is held with another Content is
// another log's job under the same id: Apply answers ErrCannotApply
// wrapping ErrIDCollision, and holds nothing of it. A replay with the same
// Content whose shape differs from the first apply's (segment, the
// segments it spans, sink, namespace, slice ordinals or row counts)
// means the engine broke its promise that a job ID names one content:
// the view panics with both.
//
// Memory is safe for concurrent use (a production test may read Applied
// from its own goroutine while a loop applies), but it starts no
// goroutine and reads no clock.
type Memory struct {
	mu sync.Mutex
	// INVARIANT: byID[jobs[i].ID] == jobs[i] for every i; IDs are distinct.
	jobs []*AppliedJob
	byID map[string]*AppliedJob
}

// AppliedJob is one job as Memory holds it.
type AppliedJob struct {
	ID, Content, SinkRef, Namespace string
	Origin                          segment.Origin
	// Segment is the segment whose cut ends the job; Segments, those
	// holding its rows, ascending (engine.Job).
	Segment  engine.SnapshotID
	Segments []engine.SnapshotID
	// Batches are every slice's batches in order, retained (a reference
	// each, the data is immutable); Memory.Release releases them.
	Batches []arrow.RecordBatch
	// Sidecars has one entry per slice: a deep copy of its CDC rows, nil
	// if the slice is not CDC.
	Sidecars []*segment.Sidecar

	// shape is what a replay must match: slice ordinals and row counts
	// (ordinals repeat in a job that spans segments; the order tells).
	shape []sliceShape
}

type sliceShape struct {
	ordinal segment.SliceOrdinal
	rows    int64
}

// NewMemory returns an empty in-memory destination.
func NewMemory() *Memory {
	return &Memory{byID: make(map[string]*AppliedJob)}
}

// Sink returns the engine.Sink view of one incarnation; timers are that
// incarnation's (its answers die with it).
func (m *Memory) Sink(timers engine.Timers) engine.Sink {
	if timers == nil {
		panic("sinks: Memory.Sink(nil timers)")
	}
	return &memorySink{m: m, timers: timers}
}

// Applied returns every distinct job applied, in first-apply order. The
// slice is a copy; its entries share Batches (retained by Memory) and
// Sidecars with Memory: read them, do not modify or release them.
func (m *Memory) Applied() []AppliedJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]AppliedJob, len(m.jobs))
	for i, j := range m.jobs {
		out[i] = *j
		out[i].shape = nil
	}
	return out
}

// Release releases every retained batch. The applied IDs stay known, so a
// later replay is still a no-op; Applied reports no batches for them.
func (m *Memory) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.jobs {
		for _, b := range j.Batches {
			b.Release()
		}
		j.Batches = nil
	}
}

// ReleaseJob releases the batches of one applied job (a caller that has
// read what it needs, and keeps memory bounded over a long run). The ID
// stays known: a replay is still a no-op.
func (m *Memory) ReleaseJob(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.byID[id]; ok {
		for _, b := range j.Batches {
			b.Release()
		}
		j.Batches = nil
	}
}

// apply records job unless its ID is known, and checks a replay against
// the first apply: another Content is a collision (an error), another
// shape under the same Content a bug (a panic).
func (m *Memory) apply(job *engine.Job) error {
	shape := shapeOf(job)
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.byID[job.ID]; ok {
		if prev.Content != job.Content {
			return fmt.Errorf("%w: %w: sinks: memory holds job %s with content %s (%s, segment %s, segments %v), this job's is %s (%s, segment %s, segments %v)",
				engine.ErrCannotApply, engine.ErrIDCollision, job.ID, prev.Content, prev.Origin, prev.Segment, prev.Segments,
				job.Content, job.Origin, job.Segment, job.Segments)
		}
		if prev.Segment != job.Segment || !slices.Equal(prev.Segments, job.Segments) || prev.SinkRef != job.SinkRef ||
			prev.Namespace != job.Namespace || !slices.Equal(prev.shape, shape) {
			panic(fmt.Sprintf("sinks: job %s replayed with other content: first %s %v %s/%s %v, now %s %v %s/%s %v",
				job.ID, prev.Segment, prev.Segments, prev.SinkRef, prev.Namespace, prev.shape,
				job.Segment, job.Segments, job.SinkRef, job.Namespace, shape))
		}
		return nil
	}
	a := &AppliedJob{ID: job.ID, Content: job.Content, SinkRef: job.SinkRef, Namespace: job.Namespace, Origin: job.Origin,
		Segment: job.Segment, Segments: slices.Clone(job.Segments), shape: shape}
	for _, s := range job.Slices {
		for _, b := range s.Batches {
			b.Retain()
			a.Batches = append(a.Batches, b)
		}
		a.Sidecars = append(a.Sidecars, copySidecar(s.Sidecar))
	}
	m.jobs = append(m.jobs, a)
	m.byID[job.ID] = a
	return nil
}

func shapeOf(job *engine.Job) []sliceShape {
	out := make([]sliceShape, len(job.Slices))
	for i, s := range job.Slices {
		out[i] = sliceShape{ordinal: s.Entry.Ordinal, rows: s.Entry.Rows}
	}
	return out
}

// copySidecar deep-copies sc: decoded identities alias the segment body,
// which the engine may drop or reuse once the job is done.
func copySidecar(sc *segment.Sidecar) *segment.Sidecar {
	if sc == nil {
		return nil
	}
	out := &segment.Sidecar{Rows: make([]segment.CDCRow, len(sc.Rows))}
	for i, r := range sc.Rows {
		out.Rows[i] = segment.CDCRow{Kind: r.Kind, Identity: bytes.Clone(r.Identity), Order: r.Order}
	}
	return out
}

// memorySink is one incarnation's view of a Memory.
type memorySink struct {
	m      *Memory
	timers engine.Timers
}

// Apply implements engine.Sink: the job is applied now, the answer (nil,
// or a collision) comes through the incarnation's timers.
func (s *memorySink) Apply(job *engine.Job, done func(err error)) {
	if job == nil || done == nil {
		panic("sinks: Memory Apply with a nil job or callback")
	}
	err := s.m.apply(job)
	s.timers.AfterFunc(0, func() { done(err) })
}
