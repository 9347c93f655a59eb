package natsjs

import (
	"context"
	"sync"
)

// queue holds the messages pulled and not yet acked, in sequence order.
//
// INVARIANT: bytes is the sum of the values queued and taken but not yet
// done (checked in done).
type queue struct {
	mu      sync.Mutex
	msgs    []Message
	bytes   int
	limit   int           // the poller waits while bytes ≥ limit
	changed chan struct{} // closed and replaced at every change
}

func newQueue(limit int) *queue { return &queue{limit: limit, changed: make(chan struct{})} }

func (q *queue) signalLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

func (q *queue) add(m Message) {
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.bytes += len(m.Value)
	q.signalLocked()
	q.mu.Unlock()
}

// waitRoom blocks while the queue is full.
func (q *queue) waitRoom(ctx context.Context) error {
	for {
		q.mu.Lock()
		full, ch := q.bytes >= q.limit, q.changed
		q.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take blocks until messages are queued, then removes and returns them
// up to maxBytes of values (at least one).
func (q *queue) take(ctx context.Context, maxBytes int) ([]Message, error) {
	for {
		q.mu.Lock()
		n, size := 0, 0
		for n < len(q.msgs) && (n == 0 || size+len(q.msgs[n].Value) <= maxBytes) {
			size += len(q.msgs[n].Value)
			n++
		}
		if n > 0 {
			out := append([]Message(nil), q.msgs[:n]...)
			q.msgs = q.msgs[n:]
			q.mu.Unlock()
			return out, nil
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// giveBack puts messages taken but not sent back in front.
func (q *queue) giveBack(msgs []Message) {
	q.mu.Lock()
	q.msgs = append(append([]Message(nil), msgs...), q.msgs...)
	q.signalLocked()
	q.mu.Unlock()
}

// done drops an acked unit's bytes.
func (q *queue) done(bytes int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bytes -= bytes
	if q.bytes < 0 {
		panic(invariantf("queue holds %d bytes after %d were acked", q.bytes, bytes).Error())
	}
	q.signalLocked()
}
