package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/skipprd/skipprd/engine"
)

// DB is a transactional destination the sink drives: the real server
// (PGX) or the simulator's model (Model). Both keep the same contract, so
// the simulator runs this package's sink unchanged.
type DB interface {
	// Apply runs tx as one transaction: insert tx.JobID with its table,
	// row count, content and origin into the applied-jobs table, create
	// tx.Table when missing and add the columns it lacks (Reconcile),
	// then write the rows — all appended for a plain job, applied by
	// identity and order token for a CDC job (ApplyChange is the rule) —
	// and commit: Committed. If tx.JobID is already in the applied-jobs
	// table the transaction writes nothing, and the row found is compared
	// with tx (judge): tx's content ⇒ FoundApplied; no content (a row of
	// an older build) and tx's table and row count ⇒ FoundLegacy; else an
	// error wrapping engine.ErrCannotApply and engine.ErrIDCollision.
	//
	// Errors: one wrapping engine.ErrCannotApply means no retry can work
	// (a column conflict, an id collision); one wrapping ErrAmbiguous
	// means the commit may have landed (the connection was lost during
	// COMMIT, or ctx ended); any other error means the transaction did
	// not commit.
	Apply(ctx context.Context, tx *Tx) (Found, error)
	// Applied looks tx.JobID up in the applied-jobs table, waiting for a
	// transaction in flight that holds it: NotFound, or the row found
	// compared with tx as Apply does (FoundApplied, FoundLegacy, or an
	// id collision).
	Applied(ctx context.Context, tx *Tx) (Found, error)
}

// ErrAmbiguous marks a transaction whose commit may or may not have
// landed.
var ErrAmbiguous = errors.New("postgres: commit outcome unknown")

// Sink is the engine.Sink for one Postgres database. Each Apply runs one
// transaction through the Blocking port; a job whose commit was
// ambiguous is settled by looking its id up in the applied-jobs table,
// never by guessing.
type Sink struct {
	db       DB
	blocking engine.Blocking
	stats    stats
}

// Stats counts the sink's rare outcomes (the simulator reports which
// its worlds reached).
type Stats struct {
	Applied         int64 // jobs committed (or found committed)
	Refused         int64 // jobs refused: engine.ErrCannotApply
	Failed          int64 // applies that failed and will be retried
	AmbiguousLanded int64 // ambiguous commits the lookup found landed
	AmbiguousLost   int64 // ambiguous commits the lookup found absent
	// Replayed: jobs found applied under their id with their content.
	Replayed int64
	// LegacyTrusted: jobs found applied under their id in a row without
	// a content (an older build's), trusted on its table and row count.
	LegacyTrusted int64
	// Collisions: jobs refused because another job's content is recorded
	// under their id (engine.ErrIDCollision; counted in Refused too).
	Collisions int64
}

type stats struct {
	mu sync.Mutex
	s  Stats
}

// Stats returns the counts so far.
func (s *Sink) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.s
}

func (s *Sink) count(f func(*Stats)) {
	s.stats.mu.Lock()
	f(&s.stats.s)
	s.stats.mu.Unlock()
}

// NewSink returns the sink applying jobs to db through blocking.
func NewSink(db DB, blocking engine.Blocking) *Sink {
	if db == nil || blocking == nil {
		panic("postgres: NewSink with a nil DB or Blocking port")
	}
	return &Sink{db: db, blocking: blocking}
}

var _ engine.Sink = (*Sink)(nil)

// Apply implements engine.Sink.
func (s *Sink) Apply(job *engine.Job, done func(error)) {
	tx, err := Plan(job)
	if err != nil {
		s.blocking.Do(func(context.Context) error { // done never runs inside Apply
			s.count(func(st *Stats) { st.Refused++ })
			return err
		}, done)
		return
	}
	s.blocking.Do(func(ctx context.Context) error {
		err := s.apply(ctx, tx)
		s.count(func(st *Stats) {
			switch {
			case err == nil:
				st.Applied++
			case errors.Is(err, engine.ErrCannotApply):
				st.Refused++
				if errors.Is(err, engine.ErrIDCollision) {
					st.Collisions++
				}
			default:
				st.Failed++
			}
		})
		return err
	}, done)
}

// apply runs tx and settles an ambiguous outcome: nil only when the job
// is known to be committed.
func (s *Sink) apply(ctx context.Context, tx *Tx) error {
	found, err := s.db.Apply(ctx, tx)
	if err == nil {
		s.countFound(found)
		return nil
	}
	if !errors.Is(err, ErrAmbiguous) {
		return err
	}
	if ctx.Err() != nil { // no time left to look: the engine retries the job, whose replay is a no-op if it landed
		return err
	}
	found, lerr := s.db.Applied(ctx, tx)
	switch {
	case errors.Is(lerr, engine.ErrIDCollision):
		// Another job's under the id: settled, and refused (%v: the
		// ambiguity is over).
		return fmt.Errorf("%w (settling the outcome of: %v)", lerr, err)
	case lerr != nil:
		return fmt.Errorf("%w; looking job %s up: %w", err, tx.JobID, lerr)
	case found != NotFound:
		s.count(func(st *Stats) { st.AmbiguousLanded++ })
		if found == FoundLegacy {
			s.countFound(found)
		}
		return nil
	}
	s.count(func(st *Stats) { st.AmbiguousLost++ })
	// Settled: the error no longer wraps ErrAmbiguous (%v, not %w).
	return fmt.Errorf("postgres: job %s did not commit (settled by lookup after: %v)", tx.JobID, err)
}

// countFound counts a job found applied.
func (s *Sink) countFound(found Found) {
	switch found {
	case FoundApplied:
		s.count(func(st *Stats) { st.Replayed++ })
	case FoundLegacy:
		s.count(func(st *Stats) { st.LegacyTrusted++ })
	}
}
