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

	// Run's state; one Run at a time (running).
	running atomic.Bool
	// pos: this source's entries of the offsets view Run was given,
	// advanced as each unit is acked, never otherwise.
	pos segment.Offsets
	// settled: objects Run has finished with that no offset marks done —
	// ones holding no rows, ones skipped — so a poll passes them over.
	// Memory only: a restart reads them again.
	settled  map[string]bool
	inFlight string // offset key of the unit being submitted; "" if none

	objectsDone    atomic.Uint64
	objectsSkipped atomic.Uint64
	rowsIngested   atomic.Uint64
	rowsAcked      atomic.Uint64
	unitsAcked     atomic.Uint64
	retries        atomic.Uint64

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

// Run lists the store every Poll and ingests, in key order and one at a
// time, each object that offsets (the host's recovered view) does not
// mark done, until ctx ends (nil) or an object fails with OnError
// "stop" (its *ObjectError), the host refuses every unit (engine.ErrClosed
// before ctx ended) or an invariant breaks. A listing or read error of
// the store is logged and retried at the next poll.
func (s *Source) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	if !s.running.CompareAndSwap(false, true) {
		return invariantf("source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	s.pos = ownOffsets(offsets, s.cfg.Name)
	s.settled = map[string]bool{}
	s.cfg.Logger.Info("objects source: starting", "source", s.cfg.Name, "objects_with_offsets", len(s.pos))
	for {
		err := s.pass(ctx, ingest)
		if errors.Is(err, errStopped) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if s.poll(ctx) != nil {
			return nil
		}
	}
}

// pass lists the store once and ingests what is not done.
func (s *Source) pass(ctx context.Context, ingest IngestFunc) error {
	objs, err := s.store.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("objects source: listing failed; retrying at the next poll", "source", s.cfg.Name,
				"retry_in", s.cfg.Poll, "error", err)
		}
		return nil
	}
	for i, o := range objs {
		if i > 0 && objs[i-1].Key >= o.Key {
			return invariantf("the store listed %q after %q: keys must be sorted and distinct", o.Key, objs[i-1].Key)
		}
		if ctx.Err() != nil {
			return errStopped
		}
		if ignored(o.Key) || s.settled[o.Key] {
			continue
		}
		if err := s.object(ctx, ingest, o); err != nil {
			return err
		}
	}
	return nil
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
