package natsjs

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// A jump is a message delivered past the sequence the poller expected
// (Message.after): the messages between were of other subjects, deleted,
// or removed by the stream's limits. Only the third kind is a gap: the
// stream's first sequence moved past the one expected, the gap Resume
// names at a start. The worker checks the jumps of the messages it takes
// before it ingests any of them (checkJumps), with one stream info
// request for all of them — not one per message, which would cost a
// round trip per message of a stream whose other subjects interleave.

// checkJumps reports the gaps at msgs' jumps (Resume: an error with
// OnGapStop; logged and counted with OnGapSkip), then clears their
// marks, so that messages given back to the queue are not checked again.
func (r *run) checkJumps(ctx context.Context, msgs []Message) error {
	first, known := uint64(0), false
	for i := range msgs {
		m := &msgs[i]
		if m.after == 0 {
			continue
		}
		if m.after >= m.Seq {
			return invariantf("stream %q: message %d marked as a jump past %d", r.s.cfg.Stream, m.Seq, m.after)
		}
		if !known {
			f, err := r.firstSeq(ctx)
			if err != nil {
				return err
			}
			first, known = f, true
		}
		// The stream's first sequence, or the message itself if the
		// stream holds none before it: the range removed ends there.
		if _, _, err := r.s.Resume(m.after, min(first, m.Seq), m.Seq); err != nil {
			return err
		}
		m.after = 0
	}
	return nil
}

// firstSeq is the stream's first sequence now. A request that fails is
// logged, counted and retried until it is answered or ctx ends: a jump
// is never let through unchecked, and a server briefly away does not
// stop the source. A stream that no longer exists does.
func (r *run) firstSeq(ctx context.Context) (uint64, error) {
	backoff := retryBase
	for {
		st, err := r.js.Stream(ctx, r.s.cfg.Stream)
		switch {
		case err == nil:
			return st.CachedInfo().State.FirstSeq, nil
		case ctx.Err() != nil:
			return 0, errStopped
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return 0, fmt.Errorf("nats source %q: stream %q: %w", r.s.cfg.Name, r.s.cfg.Stream, err)
		}
		r.s.retries.Add(1)
		r.s.cfg.Logger.Warn("nats source: cannot read the stream's first sequence to check for a gap; retrying", "source", r.s.cfg.Name,
			"stream", r.s.cfg.Stream, "retry_in", backoff, "error", err)
		if r.s.cfg.Sleep(ctx, backoff) != nil {
			return 0, errStopped
		}
		backoff = min(2*backoff, retryMax)
	}
}
