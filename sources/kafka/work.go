package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
	"github.com/skipprd/skipprd/sources/messages"
)

// work takes units of records from the buffer and ingests each until it
// is acked, until ctx ends or a unit fails.
func (r *run) work(ctx context.Context, ingest IngestFunc) error {
	for {
		topic, recs, ch := r.buf.take(r.s.cfg.UnitBytes)
		if recs == nil {
			if wait(ctx, ch) != nil {
				return nil
			}
			continue
		}
		b, recs, err := r.build(topic, recs)
		if err != nil {
			return err
		}
		err = r.s.submit(ctx, ingest, b, func() bool { return r.buf.lostAny(b.parts) })
		messages.ReleaseAll(b.unit.Batches)
		if errors.Is(err, errAbandoned) {
			err = r.buf.abandon(recs, b.parts)
		} else if err == nil {
			r.acked(b)
			err = r.buf.done(b.parts, b.bytes)
		}
		if err != nil {
			return err
		}
		if r.once.over() {
			return errOnceReached
		}
	}
}

// acked records b's offsets as acked: the lag, the run's view, and the
// group's commit.
func (r *run) acked(b built) {
	for p, next := range b.next {
		r.s.noteAcked(p, next)
		if r.once != nil {
			r.once.ackedTo(p, next)
		}
	}
	r.ownMu.Lock()
	r.view = segment.MaxMerge(r.view, b.unit.Offsets)
	r.ownMu.Unlock()
	if r.commits != nil {
		r.commits.acked(b.next)
	}
}

// build makes the unit of recs' first records (Source.cut) and gives
// the rest back to the buffer. It returns the records the unit holds.
func (r *run) build(topic string, recs []*kgo.Record) (built, []*kgo.Record, error) {
	b, n, err := r.s.cut(topic, recs)
	if err != nil || n == len(recs) {
		return b, recs, err
	}
	var keep []tp
	for _, rec := range recs[:n] {
		keep = append(keep, tp{rec.Topic, rec.Partition})
	}
	r.buf.giveBack(recs[n:], keep)
	return b, recs[:n], nil
}

// errAbandoned: a unit holding a partition the run no longer owns was
// answered that nothing of it is held; it is not sent again.
var errAbandoned = errors.New("kafka source: unit abandoned: a partition of it was revoked")

// submit ingests b until it is acked (sources.Submit: the very same
// unit again while the answer may change; a unit the host had committed
// is recognised by its offsets and acked without being stored again) —
// or, once lost says a partition of it is no longer the run's and every
// answer said nothing of it is held (sources.Later), abandons it
// (errAbandoned). A unit one answer of which may have been a commit
// (sources.Unknown) is resent whole whatever lost says: only its very
// same offsets can find out.
func (s *Source) submit(ctx context.Context, ingest IngestFunc, b built, lost func() bool) error {
	s.recordsIngested.Add(uint64(b.records))
	maybeHeld, abandoned := false, false
	sleep := func(ctx context.Context, d time.Duration) error {
		if !maybeHeld && lost() {
			abandoned = true
			return errAbandoned
		}
		return s.cfg.Sleep(ctx, d)
	}
	a, err := sources.Submit(ctx, ingest, b.unit, sleep, func(a sources.Answer, backoff time.Duration, err error) {
		maybeHeld = maybeHeld || a != sources.Later
		s.retries.Add(1)
		if a == sources.Unknown {
			s.cfg.Logger.Warn("kafka source: ingest failed; retrying the same unit", "source", s.cfg.Name,
				"offsets", fmt.Sprint(b.unit.Offsets), "retry_in", backoff, "error", err)
		}
	})
	switch a {
	case sources.Acked:
		s.recordsAcked.Add(uint64(b.records))
		s.unitsAcked.Add(1)
		return nil
	case sources.Invalid:
		err = fmt.Errorf("kafka source %q: the host refuses a unit of %d records (offsets %v): %w", s.cfg.Name, b.records, b.unit.Offsets, err)
	case sources.Refuses:
		err = fmt.Errorf("kafka source %q: the host refuses units: %w", s.cfg.Name, err)
	case sources.Stopped:
		err = errStopped
		if abandoned {
			err = errAbandoned
		}
	default:
		err = invariantf("sources.Submit answered %d", a)
	}
	s.recordsIngested.Add(-uint64(b.records)) // given up: no longer ingested
	return err
}
