package kafka

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// buffer holds the records fetched and not yet acked, per partition,
// and hands them to the workers a unit at a time.
//
// INVARIANTS (checked where they could break: done):
//   - A partition is busy exactly while a unit holding its records is
//     being built or awaits its answer; its queued records all come
//     after that unit's, so no two units of a partition are in flight
//     and a partition's units are acked in offset order.
//   - bytes is the sum of the values of the queued and the busy records.
type buffer struct {
	mu     sync.Mutex
	queues map[tp][]*kgo.Record
	busy   map[tp]bool
	topics []string // round-robin order of take
	next   int      // the topic take looks at first
	bytes  int
	limit  int // the poller waits while bytes ≥ limit
	// changed is closed (and replaced) when records are queued, a
	// partition is freed or bytes drop: every waiter wakes and looks
	// again. A waiter takes it under mu with what it looked at, so no
	// change between the two is missed.
	changed chan struct{}
}

func newBuffer(topics []string, limit int) *buffer {
	return &buffer{queues: map[tp][]*kgo.Record{}, busy: map[tp]bool{}, topics: slices.Clone(topics), limit: limit,
		changed: make(chan struct{})}
}

// signalLocked wakes every waiter. REQUIRES: mu held.
func (b *buffer) signalLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// add queues records fetched for their partitions, in fetch order.
func (b *buffer) add(recs []*kgo.Record) {
	b.mu.Lock()
	for _, r := range recs {
		p := tp{r.Topic, r.Partition}
		b.queues[p] = append(b.queues[p], r)
		b.bytes += len(r.Value)
	}
	b.signalLocked()
	b.mu.Unlock()
}

// room returns nil when the poller may fetch more, or else a channel
// closed at the next change.
func (b *buffer) room() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes < b.limit {
		return nil
	}
	return b.changed
}

// take removes and returns queued records of one topic's free
// partitions — a partition's records in offset order, partitions one
// after another — up to maxBytes of values (at least one record), and
// marks their partitions busy. When no free partition has any, it
// returns no records and a channel closed at the next change.
func (b *buffer) take(maxBytes int) (string, []*kgo.Record, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.topics {
		topic := b.topics[(b.next+i)%len(b.topics)]
		recs := b.takeTopic(topic, maxBytes)
		if len(recs) > 0 {
			b.next = (b.next + i + 1) % len(b.topics)
			return topic, recs, nil
		}
	}
	return "", nil, b.changed
}

func (b *buffer) takeTopic(topic string, maxBytes int) []*kgo.Record {
	var out []*kgo.Record
	size := 0
	for _, p := range b.partitionsOf(topic) {
		q := b.queues[p]
		if b.busy[p] || len(q) == 0 {
			continue
		}
		n := 0
		for n < len(q) && (len(out)+n == 0 || size+len(q[n].Value) <= maxBytes) {
			size += len(q[n].Value)
			n++
		}
		if n == 0 {
			break
		}
		out = append(out, q[:n]...)
		b.queues[p] = q[n:]
		b.busy[p] = true
	}
	return out
}

// partitionsOf returns topic's partitions with queues, in partition order.
func (b *buffer) partitionsOf(topic string) []tp {
	var ps []tp
	for p := range b.queues {
		if p.topic == topic {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(x, y tp) int { return int(x.partition) - int(y.partition) })
	return ps
}

// giveBack puts records a worker took but will not send in this unit
// back in front of their queues; a partition none of whose taken
// records stay in the unit (keep) is free again.
func (b *buffer) giveBack(recs []*kgo.Record, keep []tp) {
	b.mu.Lock()
	byPart := map[tp][]*kgo.Record{}
	var order []tp
	for _, r := range recs {
		p := tp{r.Topic, r.Partition}
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], r)
	}
	for _, p := range order {
		b.queues[p] = append(byPart[p], b.queues[p]...)
		if !slices.Contains(keep, p) {
			b.busy[p] = false
		}
	}
	b.signalLocked()
	b.mu.Unlock()
}

// done frees the partitions of an acked (or abandoned) unit whose
// values were bytes long.
func (b *buffer) done(parts []tp, bytes int) error {
	b.mu.Lock()
	for _, p := range parts {
		if !b.busy[p] {
			b.mu.Unlock()
			return invariantf("topic %q partition %d freed while not busy", p.topic, p.partition)
		}
		b.busy[p] = false
	}
	b.bytes -= bytes
	if b.bytes < 0 {
		n := b.bytes
		b.mu.Unlock()
		return invariantf("buffer holds %d bytes after freeing %d", n, bytes)
	}
	b.signalLocked()
	b.mu.Unlock()
	return nil
}

// wait blocks until ch is closed or ctx ends.
func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
