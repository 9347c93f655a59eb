package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
		b, err := r.build(topic, recs)
		if err != nil {
			return err
		}
		err = r.s.submit(ctx, ingest, b)
		messages.ReleaseAll(b.unit.Batches)
		if err != nil {
			return err
		}
		for p, next := range b.next {
			r.s.noteAcked(p, next)
		}
		if err := r.buf.done(b.parts, b.bytes); err != nil {
			return err
		}
	}
}

// build makes the unit of recs, halving them (and giving the rest back
// to the buffer) while together they decode to more than the limits.
func (r *run) build(topic string, recs []*kgo.Record) (built, error) {
	for {
		b, err := r.s.build(topic, recs)
		if !errors.Is(err, messages.ErrSplit) {
			return b, err
		}
		half := len(recs) / 2
		var keep []tp
		for _, rec := range recs[:half] {
			keep = append(keep, tp{rec.Topic, rec.Partition})
		}
		r.buf.giveBack(recs[half:], keep)
		recs = recs[:half]
	}
}

// submit ingests b until it is acked (sources.Submit: the very same
// unit again while the answer may change; a unit the host had committed
// is recognised by its offsets and acked without being stored again).
func (s *Source) submit(ctx context.Context, ingest IngestFunc, b built) error {
	s.recordsIngested.Add(uint64(b.records))
	a, err := sources.Submit(ctx, ingest, b.unit, s.cfg.Sleep, func(a sources.Answer, backoff time.Duration, err error) {
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
	default:
		err = errStopped
	}
	s.recordsIngested.Add(-uint64(b.records)) // given up: no longer ingested
	return err
}
