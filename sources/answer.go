package sources

import (
	"context"
	"errors"

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
