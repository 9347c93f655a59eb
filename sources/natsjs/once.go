package natsjs

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// With Config.Once a Run ends on its own once it has ingested the
// stream up to its last sequence at start (the mark, read once the
// consumer exists) and had every message up to it acked. Which message
// is the last of that range the source learns as the consumer delivers
// them (the subjects filter some out, some may be deleted): the range
// is complete at a message of sequence ≤ mark with nothing pending after
// it for the consumer (its metadata's NumPending: no message of its
// subjects past it, so none up to the mark), or at the first message
// past the mark; a consumer with nothing pending when it starts has an
// empty range. The Run ends once the acked offset (the sequence after
// the last message acked) passes the range's last message: the poller
// or the worker, whichever sees it first, ends it with errOnceReached.
// The unit in flight is answered first; messages queued past the range
// are dropped unacked, and the next Run reads them again.

// errOnceReached: the range of a once Run is ingested and acked; Run
// returns nil.
var errOnceReached = errors.New("nats source: once: ingested up to the stream's last sequence at start")

// onceRange is a once Run's progress towards its end; the poller and
// the worker share it.
type onceRange struct {
	mu       sync.Mutex
	mark     uint64 // the stream's last sequence at start
	last     uint64 // the range's last message delivered so far (0: none)
	complete bool   // no message of the range is still to come
	acked    uint64 // the sequence after the last message acked (the offset)
}

// startOnce reads the mark and whether the consumer has anything
// pending; nil without Once.
func (s *Source) startOnce(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer) (*onceRange, error) {
	if !s.cfg.Once {
		return nil, nil
	}
	st, err := js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	o := &onceRange{mark: st.CachedInfo().State.LastSeq, complete: info.NumPending == 0}
	s.cfg.Logger.Info("nats source: once: ingesting up to the stream's last sequence at start", "source", s.cfg.Name,
		"stream", s.cfg.Stream, "last_sequence", o.mark, "pending", info.NumPending)
	return o, nil
}

// delivered takes a message the poller pulled, of sequence seq with
// pending messages after it; it reports whether the Run is over.
func (o *onceRange) delivered(seq, pending uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.complete && seq <= o.mark {
		o.last = seq
		o.complete = pending == 0
	} else {
		o.complete = true
	}
	return o.reached()
}

// ackedTo records that every message before next is acked; it reports
// whether the Run is over.
func (o *onceRange) ackedTo(next uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acked = max(o.acked, next)
	return o.reached()
}

// reached: the range is complete and its last message, if it has one,
// acked. REQUIRES mu.
func (o *onceRange) reached() bool { return o.complete && (o.last == 0 || o.acked > o.last) }

// over reports whether the Run is over; a nil range (not once) never is.
func (o *onceRange) over() bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reached()
}
