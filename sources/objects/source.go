package objects

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
)

// IngestFunc submits a unit and blocks until it is answered: nil means
// committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// Source ingests the objects of a Store. It holds no durable state: where
// each object resumes is the host's offsets view, given to Run.
type Source struct {
	cfg   Config
	store Store

	// Run's state; one Run at a time (running). prog is shared by the
	// tasks (under its lock); line is the dispatcher's alone.
	running atomic.Bool
	prog    *progress
	line    floorLine

	objectsDone    atomic.Uint64
	objectsSkipped atomic.Uint64
	rowsIngested   atomic.Uint64
	rowsAcked      atomic.Uint64
	unitsAcked     atomic.Uint64
	retries        atomic.Uint64
	viewFullWarned atomic.Bool
	// onceStarted: with Once, the objects the pass handed to tasks
	// (the dispatcher's alone), each checked finished at the end.
	onceStarted []Object

	// sleep waits for a backoff, poll between listings; tests replace them.
	sleep func(ctx context.Context, d time.Duration) error
	poll  func(ctx context.Context) error
}

// New returns a source for cfg over store, or an error naming what is
// wrong with cfg.
func New(cfg Config, store Store) (*Source, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	sleep := cfg.Sleep
	if sleep == nil {
		sleep = sources.Sleep
	}
	s := &Source{cfg: cfg, store: store, sleep: sleep}
	s.poll = func(ctx context.Context) error { return s.sleep(ctx, s.cfg.Poll) }
	return s, nil
}

// Stats are a source's counters since New.
type Stats struct {
	// ObjectsDone: objects whose last unit this source had acked, or that
	// it read and found to hold no rows. Objects already done when Run
	// started are not counted.
	ObjectsDone    uint64
	ObjectsSkipped uint64 // objects that failed with OnError "skip"
	// RowsIngested: rows of units handed to ingest that are acked or
	// still awaiting their answer (each unit once, however often retried).
	RowsIngested uint64
	RowsAcked    uint64
	UnitsAcked   uint64
	Retries      uint64 // resubmissions of a unit
}

// Stats returns the counters. Safe from any goroutine.
func (s *Source) Stats() Stats {
	return Stats{
		ObjectsDone:    s.objectsDone.Load(),
		ObjectsSkipped: s.objectsSkipped.Load(),
		RowsIngested:   s.rowsIngested.Load(),
		RowsAcked:      s.rowsAcked.Load(),
		UnitsAcked:     s.unitsAcked.Load(),
		Retries:        s.retries.Load(),
	}
}

// OffsetKey is the offset key of the object key.
func (s *Source) OffsetKey(key string) string { return offsetKey(s.cfg.Name, key) }

// Run lists the store every Poll and ingests, in key order and up to
// InFlight at once, each object that offsets (the host's recovered
// view) does not mark done, until ctx ends (nil), the first listing is
// finished with Once (nil; once.go), or an object fails with
// OnError "stop" (its *ObjectError), the host refuses every unit
// (engine.ErrClosed before ctx ended) or an invariant breaks. A listing
// or read error of the store is logged and retried at the next poll;
// with Once it ends Run (*OnceStoreError).
func (s *Source) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	if !s.running.CompareAndSwap(false, true) {
		return invariantf("source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	s.prog = newProgress(offsets, s.cfg.Name)
	s.viewFullWarned.Store(false)
	s.line = floorLine{seen: map[string]time.Time{}}
	s.onceStarted = nil
	s.cfg.Logger.Info("objects source: starting", "source", s.cfg.Name, "order", s.cfg.Order,
		"objects_with_offsets", len(s.prog.pos), "floor", s.prog.floor)
	for {
		again, err := s.pass(ctx, ingest)
		if errors.Is(err, errStopped) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if s.cfg.Once {
			return s.onceOver(again)
		}
		if !again && s.poll(ctx) != nil {
			return nil
		}
	}
}

// pass lists the store once, a page at a time from the floor, and
// ingests what is not done; it returns once every task it started ended.
// again: the pass was cut at lineMax having started objects, so the next
// one starts at once rather than after Poll.
func (s *Source) pass(ctx context.Context, ingest IngestFunc) (again bool, err error) {
	d := dispatcher{s: s, ctx: ctx, ingest: ingest, tasks: s.cfg.Tasks}
	if d.tasks == nil {
		d.tasks = newGoTasks(s.cfg.InFlight)
	}
	s.line.items = s.line.items[:0]
	err = d.list(s.prog.floorMark())
	if derr := d.drain(); err == nil {
		err = derr
	}
	s.advanceFloor()
	return d.cut && d.started > 0, err
}

// unit is the unit of batches (one schema) advancing key to value.
func (s *Source) unit(key string, schema *arrow.Schema, batches []arrow.RecordBatch, value uint64) engine.Unit {
	return engine.Unit{
		Key: segment.PartitionKey{
			SinkRef:   s.cfg.SinkRef,
			Namespace: s.cfg.Namespace,
			Partition: "0",
			Schema:    segment.FingerprintOf(schema),
		},
		Schema:  schema,
		Batches: batches,
		Offsets: segment.Offsets{{Key: key, Value: value}},
	}
}

// withFloor is u carrying the floor, if there is one.
func (s *Source) withFloor(u engine.Unit, floor string) engine.Unit {
	if floor != "" {
		u.Offsets = u.Offsets.Advance(segment.FloorKey(family(s.cfg.Name), floor), 1)
	}
	return u
}
