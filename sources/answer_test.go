package sources

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
