package objects

import (
	"context"
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
func (s *Source) submit(ctx context.Context, ingest IngestFunc, u engine.Unit, rows int64) error {
	o, err := s.checkUnit(u)
	if err != nil {
		return err
	}
	s.inFlight = o.Key
	defer func() { s.inFlight = "" }()
	s.rowsIngested.Add(uint64(rows))
	acked := false
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
			s.pos = s.pos.Advance(o.Key, o.Value)
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

// checkUnit checks what submit relies on: one offset, above the acked
// one (offsets only advance, and only on an ack), and no other unit in
// flight (the engine takes one unit per offset key at a time, and the
// source processes one object at a time).
func (s *Source) checkUnit(u engine.Unit) (segment.Offset, error) {
	if len(u.Offsets) != 1 {
		return segment.Offset{}, invariantf("a unit with %d offsets; want 1", len(u.Offsets))
	}
	o := u.Offsets[0]
	if s.inFlight != "" {
		return segment.Offset{}, invariantf("unit for %q submitted while one for %q is in flight", o.Key, s.inFlight)
	}
	if cur, _ := s.pos.Get(o.Key); o.Value <= cur {
		return segment.Offset{}, invariantf("unit for %q at offset %d, not above the acked %d", o.Key, o.Value, cur)
	}
	return o, nil
}
