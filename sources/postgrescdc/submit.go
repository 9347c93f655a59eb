package postgrescdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sources"
)

// Backoff after a refused unit or a failed session: long enough not to
// spin against a full host or a server that is restarting, short enough
// that the stream resumes within seconds.
const (
	retryBase = 25 * time.Millisecond
	retryMax  = 2 * time.Second
	// sessionRetryMax bounds the wait between two sessions.
	sessionRetryMax = 10 * time.Second
)

// errHost: the host refuses every unit (engine.ErrClosed); Run ends.
var errHost = errors.New("postgrescdc: the host refuses units")

// submit ingests u until it is acked, retrying the very same unit (same
// rows, same offsets) while the answer may change: a unit the host had
// committed before is recognised by its offsets and acked without being
// stored again.
//
// Answers: nil, acked. engine.ErrResourceExhausted, engine.ErrNotReady:
// retried after a backoff. engine.ErrInvalidUnit: returned (Run ends:
// the source built a unit the engine never takes). engine.ErrClosed:
// errHost. Anything else (engine.ErrUnknownOutcome, a host that stopped
// answering): logged and retried. errStopped once ctx has ended.
//
// ingest runs without ctx's cancellation, so a host closing gracefully
// still answers the unit in flight.
func (s *Source) submit(ctx context.Context, ingest IngestFunc, u engine.Unit) error {
	if len(u.Offsets) == 0 || u.Sidecar == nil {
		panic("postgrescdc: a unit without offsets or sidecar")
	}
	ingestCtx := context.WithoutCancel(ctx)
	backoff := retryBase
	for {
		err := ingest(ingestCtx, u)
		switch sources.Judge(ctx, err) {
		case sources.Acked:
			s.stats.units.Add(1)
			return nil
		case sources.Stopped:
			return errStopped
		case sources.Invalid:
			return fmt.Errorf("postgrescdc: unit for %s at %d refused: %w", u.Offsets[0].Key, u.Offsets[0].Value, err)
		case sources.Refuses:
			return fmt.Errorf("%w: %w", errHost, err)
		case sources.Later:
		case sources.Unknown:
			s.cfg.Logger.Warn("postgrescdc: ingest failed; retrying the same unit", "slot", s.cfg.Slot,
				"offset_key", u.Offsets[0].Key, "offset", u.Offsets[0].Value, "retry_in", backoff, "error", err)
		}
		s.stats.retries.Add(1)
		if s.cfg.Sleep(ctx, backoff) != nil {
			return errStopped
		}
		backoff = min(2*backoff, retryMax)
	}
}
