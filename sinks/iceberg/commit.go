package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
)

// The exactly-once protocol, against a Catalog (catalog.go). It runs
// inside Blocking work: two calls per Apply, prepare before the data
// files are written and commit after.
//
//	prepare: Load ─ none ─▶ Create (ErrTableExists: Load again)
//	         look for the job (lookup.go) ─ found ─▶ applied, nothing to do
//	         Reconcile the job's columns ─ change ─▶ Evolve, Load again
//	commit:  Append, pinned to the state prepare (or the last Load) read
//	           ok        ─▶ committed
//	           any error ─▶ Load, look for the job:
//	                          found            ─▶ applied (an earlier
//	                                              attempt, a zombie, or
//	                                              this one, answered
//	                                              wrongly)
//	                          not found, conflict ─▶ rebase: Append on
//	                                              the new state
//	                          not found, other ─▶ fail; the engine retries
//	                                              the Apply after backoff
//
// Why no job lands twice: every Append is pinned to a state in which the
// job was looked for and not found, and the catalog takes a pinned commit
// only if the table is still in that state. Two Appends of one job —
// a retry and an earlier attempt whose answer was lost, or a zombie and
// its successor — are each pinned to a state without the other; whichever
// lands first moves the table, so the other's pin fails. An Append still
// in flight that lands after a Load looked and found nothing is the same
// race: the next Append's pin, taken from that Load, fails, and the Load
// after it finds the job.

// conflictsMax bounds the rebases of one commit (and the re-reads of one
// prepare): past it the Apply fails, and the engine retries it after its
// backoff — a table that busy is contended by that many writers at once.
const conflictsMax = 16

// prepared is what prepare learned: the table as last read, and whether
// the job is already in it.
type prepared struct {
	table *Table
	found found
}

// prepare readies table id for job, whose file columns are file: made
// if missing, the job looked for, columns added or widened until the
// table holds file's. props are set on a table it creates.
func (s *Sink) prepare(ctx context.Context, id Ident, file *arrow.Schema, job *engine.Job) (prepared, error) {
	for range conflictsMax {
		t, err := s.loadOrCreate(ctx, id, file)
		if err != nil {
			return prepared{}, err
		}
		f, err := lookup(t, job, s.cfg.SinkRef)
		if err != nil || f != notFound {
			return prepared{table: t, found: f}, err
		}
		ch, err := Reconcile(t.Schema, file, id.String())
		if err != nil {
			return prepared{}, err
		}
		if ch.Empty() {
			return prepared{table: t}, nil
		}
		if err := s.cfg.Catalog.Evolve(ctx, t, ch); err != nil && !errors.Is(err, ErrConflict) {
			return prepared{}, fmt.Errorf("iceberg: evolve table %s (%v): %w", id, describe(ch), err)
		}
		s.stats.evolutions.Add(1)
	}
	return prepared{}, fmt.Errorf("iceberg: prepare table %s: it moved %d times while its schema was evolved: %w", id, conflictsMax, ErrConflict)
}

// loadOrCreate loads table id, making it from file's columns if missing.
func (s *Sink) loadOrCreate(ctx context.Context, id Ident, file *arrow.Schema) (*Table, error) {
	t, err := s.cfg.Catalog.Load(ctx, id)
	if !errors.Is(err, ErrNoTable) {
		return t, wrapLoad(id, err)
	}
	schema, err := TableSchema(file, s.cfg.Spec)
	if err != nil {
		return nil, err
	}
	t, err = s.cfg.Catalog.Create(ctx, id, schema, s.cfg.Spec, s.cfg.TableProps)
	if errors.Is(err, ErrTableExists) {
		t, err = s.cfg.Catalog.Load(ctx, id)
		return t, wrapLoad(id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: create table %s: %w", id, err)
	}
	s.stats.created.Add(1)
	return t, nil
}

func wrapLoad(id Ident, err error) error {
	if err != nil {
		return fmt.Errorf("iceberg: load table %s: %w", id, err)
	}
	return nil
}

// commit appends job's files to t — the table prepare read — exactly
// once (the protocol above). It answers nil when the job is in the table,
// by this commit or an earlier one.
func (s *Sink) commit(ctx context.Context, t *Table, job *engine.Job, files []DataFile) error {
	for range conflictsMax {
		err := s.cfg.Catalog.Append(ctx, t, appendFor(t, job, s.cfg.SinkRef, files))
		if err == nil {
			s.stats.committed.Add(1)
			return nil
		}
		now, lerr := s.cfg.Catalog.Load(ctx, t.Ident)
		if lerr != nil {
			s.stats.lookupFailed.Add(1)
			return fmt.Errorf("iceberg: commit job %s to table %s: %w; then looking for it: %w", job.ID, t.Ident, err, lerr)
		}
		f, ferr := lookup(now, job, s.cfg.SinkRef)
		if ferr != nil {
			return ferr
		}
		if f != notFound {
			s.noteLanded(err)
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			s.stats.ambiguousLost.Add(1)
			return fmt.Errorf("iceberg: commit job %s to table %s: %w (looked: not in the table)", job.ID, t.Ident, err)
		}
		if err := sameTable(t, now); err != nil {
			return err
		}
		s.stats.conflicts.Add(1)
		t = now
	}
	return fmt.Errorf("iceberg: commit job %s to table %s: it moved %d times in a row: %w", job.ID, t.Ident, conflictsMax, ErrConflict)
}

// noteLanded counts a failed Append after which the job was found: a
// conflict with an attempt that landed first (a zombie's, or a lost
// answer's), or an unknown outcome that landed.
func (s *Sink) noteLanded(err error) {
	if errors.Is(err, ErrConflict) {
		s.stats.conflictLanded.Add(1)
		return
	}
	s.stats.ambiguousLanded.Add(1)
}

// sameTable checks that a rebase keeps what the job's files were written
// for: the location they sit under, the partition spec they were split
// by, and the field ids they carry (columns are only added, never
// renumbered, by this sink). Anything else is someone else's change to
// the table; the Apply fails and starts over from prepare.
func sameTable(was, now *Table) error {
	if was.Location != now.Location || was.Spec != now.Spec {
		return fmt.Errorf("iceberg: table %s moved from %s (partitioned by %s) to %s (by %s) during a commit",
			was.Ident, was.Location, was.Spec.FieldName(), now.Location, now.Spec.FieldName())
	}
	for _, f := range was.Schema.Fields() {
		g, ok := now.Schema.FindFieldByName(f.Name)
		if !ok || g.ID != f.ID {
			return fmt.Errorf("iceberg: table %s: column %s (field id %d) was dropped or renumbered during a commit", was.Ident, f.Name, f.ID)
		}
	}
	return nil
}

// describe names a schema change in messages.
func describe(ch Change) string {
	return fmt.Sprintf("add %v, widen %v", ch.Add, ch.Widen)
}
