package objects

import (
	"context"
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
)

// submit ingests u, which holds rows rows, until it is acked, retrying
// the very same unit (same rows, same offset) while the answer may
// change: a unit the host had committed before is recognised by its
// offset and acked without being stored again.
//
// Answers:
//   - nil: acked; the source's own offsets advance to the unit's.
//   - engine.ErrResourceExhausted, engine.ErrNotReady: backpressure or
//     recovery; retried after a backoff (25 ms doubling to 1 s).
//   - engine.ErrInvalidUnit: never accepted as it is; returned, for the
//     caller to name the object and place.
//   - engine.ErrClosed: the host is closing or failed closed; a
//     *hostError (errStopped once ctx has ended).
//   - anything else — engine.ErrUnknownOutcome, a host that stopped
//     answering: the unit may or may not be committed; retried after the
//     backoff, which the offset makes safe.
//
// ingest runs without ctx's cancellation, as the generator's does: a
// host closing gracefully still answers the unit in flight.
func (s *Source) submit(ctx context.Context, ingest IngestFunc, object string, u engine.Unit, rows int64) error {
	if len(u.Offsets) != 1 {
		return invariantf("a unit with %d offsets; want 1", len(u.Offsets))
	}
	o := u.Offsets[0]
	if s.prog.stops(object) || ctx.Err() != nil {
		return errStopped // the Run stops: no new unit (the one in flight is answered)
	}
	floor, err := s.prog.claim(o.Key, o.Value)
	if err != nil {
		return err
	}
	acked := false
	defer func() { s.prog.answered(o.Key, o.Value, acked) }()
	if floor != "" && segment.Floored(o.Key, family(s.cfg.Name), floor) {
		return invariantf("a unit for %q at offset %d, at or below the floor %q: that object is done", o.Key, o.Value, floor)
	}
	u = s.withFloor(u, floor) // retried as it is: the same offsets
	s.rowsIngested.Add(uint64(rows))
	defer func() {
		if !acked {
			s.rowsIngested.Add(-uint64(rows)) // given up: no longer ingested
		}
	}()
	ingestCtx := context.WithoutCancel(ctx)
	backoff := retryBase
	for {
		err := ingest(ingestCtx, u)
		switch sources.Judge(ctx, err) {
		case sources.Acked:
			acked = true
			s.rowsAcked.Add(uint64(rows))
			s.unitsAcked.Add(1)
			return nil
		case sources.Stopped:
			return errStopped
		case sources.Invalid:
			return err
		case sources.Refuses:
			return &hostError{fmt.Errorf("objects source %q: the host refuses units: %w", s.cfg.Name, err)}
		case sources.Later:
			s.warnViewFull(err)
		case sources.Unknown:
			s.cfg.Logger.Warn("objects source: ingest failed; retrying the same unit", "source", s.cfg.Name,
				"offset_key", o.Key, "offset", o.Value, "retry_in", backoff, "error", err)
		}
		s.retries.Add(1)
		if s.sleep(ctx, backoff) != nil {
			return errStopped
		}
		backoff = min(2*backoff, retryMax)
	}
}

// warnViewFull says once per Run why units wait when the host's offsets
// view is full: with order "any" every object keeps a key for good.
func (s *Source) warnViewFull(err error) {
	if !errors.Is(err, engine.ErrOffsetsViewFull) || !s.viewFullWarned.CompareAndSwap(false, true) {
		return
	}
	s.cfg.Logger.Warn("objects source: the host's offsets view is full, so new objects wait; with order: any every "+
		"object keeps an offset key for good (about 260,000 for a pipeline's life). For more, name objects so that "+
		"they sort by arrival and set order: keys", "source", s.cfg.Name, "order", s.cfg.Order, "error", err)
}
