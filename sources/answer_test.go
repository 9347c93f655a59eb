package sources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

func TestJudge(t *testing.T) {
	live, ended := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want Answer
	}{
		{live, nil, Acked},
		{ended, nil, Acked}, // an ack is an ack, however late
		{ended, engine.ErrResourceExhausted, Stopped},
		{ended, engine.ErrUnknownOutcome, Stopped},
		{live, fmt.Errorf("x: %w", engine.ErrInvalidUnit), Invalid},
		{live, fmt.Errorf("x: %w", engine.ErrClosed), Refuses},
		{live, fmt.Errorf("x: %w", engine.ErrResourceExhausted), Later},
		{live, engine.ErrNotReady, Later},
		{live, fmt.Errorf("WAL segment: %w: no space left on device", engine.ErrUnknownOutcome), Unknown},
		{live, errors.New("storage: unit unanswered"), Unknown},
	} {
		if got := Judge(c.ctx, c.err); got != c.want {
			t.Errorf("Judge(ctx ended %v, %v) = %d, want %d", c.ctx.Err() != nil, c.err, got, c.want)
		}
	}
}

// Submit resends the very same unit while the answer may change, and
// returns the first final one; a stop during the backoff is Stopped.
func TestSubmitResendsTheSameUnitUntilTheAnswerIsFinal(t *testing.T) {
	u := engine.Unit{IdempotencyKey: "k"}
	answers := []error{engine.ErrResourceExhausted, engine.ErrUnknownOutcome, errors.New("connection reset"), nil}
	calls, retries := 0, 0
	ingest := func(_ context.Context, got engine.Unit) error {
		if got.IdempotencyKey != u.IdempotencyKey {
			t.Errorf("resent unit %q, want the same %q", got.IdempotencyKey, u.IdempotencyKey)
		}
		calls++
		return answers[calls-1]
	}
	var waited []time.Duration
	sleep := func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }
	a, err := Submit(context.Background(), ingest, u, sleep, func(Answer, time.Duration, error) { retries++ })
	if a != Acked || err != nil || calls != 4 || retries != 3 {
		t.Fatalf("Submit: %v, %v after %d calls, %d retries; want Acked after 4 and 3", a, err, calls, retries)
	}
	if want := []time.Duration{ResendBase, 2 * ResendBase, 4 * ResendBase}; !slices.Equal(waited, want) {
		t.Errorf("backoffs %v, want %v", waited, want)
	}
	stop := func(context.Context, time.Duration) error { return context.Canceled }
	if a, _ := Submit(context.Background(), func(context.Context, engine.Unit) error { return engine.ErrNotReady }, u, stop, nil); a != Stopped {
		t.Errorf("a stop during the backoff: %v, want Stopped", a)
	}
	if a, err := Submit(context.Background(), func(context.Context, engine.Unit) error { return engine.ErrInvalidUnit }, u, sleep, nil); a != Invalid || !errors.Is(err, engine.ErrInvalidUnit) {
		t.Errorf("an invalid unit: %v, %v; want Invalid with the host's error", a, err)
	}
}
