package sources

import (
	"context"
	"errors"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Answer is what a source does with the host's answer to a unit it
// submitted. Every source that can resend a unit (one with offsets: the
// objects, Postgres CDC and generator sources) takes the same decision,
// here, so the one the simulator runs (the objects source) tests the
// others' too.
type Answer uint8

const (
	// Acked: nil; the unit is committed. Move on.
	Acked Answer = iota
	// Stopped: ctx has ended, whatever the answer; stop without error.
	Stopped
	// Invalid: engine.ErrInvalidUnit; the host never takes this unit as
	// it is. Return the error.
	Invalid
	// Refuses: engine.ErrClosed while ctx lives; the host refuses every
	// unit (it failed closed, or is closing). Return the error.
	Refuses
	// Later: engine.ErrResourceExhausted or engine.ErrNotReady; nothing
	// of the unit is held. Resend the same unit after a backoff.
	Later
	// Unknown: anything else (engine.ErrUnknownOutcome — a log write
	// failed, say on a full disk — or a host that stopped answering): the
	// unit may be committed. Log it and resend the very same unit (same
	// rows, same offsets) after a backoff: the host recognises a unit it
	// committed by its offsets and acks it without storing it again.
	Unknown
)

// Judge is the Answer to err, the host's answer to a unit submitted
// while ctx was the source's.
func Judge(ctx context.Context, err error) Answer {
	switch {
	case err == nil:
		return Acked
	case ctx.Err() != nil:
		return Stopped
	case errors.Is(err, engine.ErrInvalidUnit):
		return Invalid
	case errors.Is(err, engine.ErrClosed):
		return Refuses
	case errors.Is(err, engine.ErrResourceExhausted), errors.Is(err, engine.ErrNotReady):
		return Later
	}
	return Unknown
}

// The backoff between resends of a unit (Submit): long enough not to
// spin on a full admission, short enough that a freed writer is fed
// again within a flush or two.
const (
	ResendBase = 25 * time.Millisecond
	ResendMax  = time.Second
)

// Submit hands u to ingest until the answer is final, resending the very
// same unit (same rows, same offsets or idempotency key) after a backoff
// — ResendBase doubling to ResendMax, waited with sleep — while the
// answer may change (Later, Unknown); onRetry, if not nil, is told of
// each resend. ingest runs without ctx's cancellation: a host closing
// gracefully still answers the unit in flight. It returns the final
// Answer (Acked, Stopped, Invalid or Refuses) and the host's last error.
func Submit(ctx context.Context, ingest func(context.Context, engine.Unit) error, u engine.Unit,
	sleep func(context.Context, time.Duration) error, onRetry func(a Answer, backoff time.Duration, err error)) (Answer, error) {
	ingestCtx := context.WithoutCancel(ctx)
	backoff := ResendBase
	for {
		err := ingest(ingestCtx, u)
		a := Judge(ctx, err)
		if a != Later && a != Unknown {
			return a, err
		}
		if onRetry != nil {
			onRetry(a, backoff, err)
		}
		if sleep(ctx, backoff) != nil {
			return Stopped, err
		}
		backoff = min(2*backoff, ResendMax)
	}
}
