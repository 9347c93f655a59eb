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
//   - A partition is lost only while busy: drop marks the busy ones, and
//     done or abandon, freeing them, clears the mark.
type buffer struct {
	mu     sync.Mutex
	queues map[tp][]*kgo.Record
	busy   map[tp]bool
	lost   map[tp]bool // busy partitions this run no longer owns (drop)
	topics []string    // round-robin order of take
	next   int         // the topic take looks at first
	// turn is, per topic, the partition its last take began with; the
	// next begins after it.
	turn  map[string]int32
	bytes int
	limit int // the poller waits while bytes ≥ limit
	// changed is closed (and replaced) when records are queued, a
	// partition is freed or bytes drop: every waiter wakes and looks
	// again. A waiter takes it under mu with what it looked at, so no
	// change between the two is missed.
	changed chan struct{}
}

func newBuffer(topics []string, limit int) *buffer {
	return &buffer{queues: map[tp][]*kgo.Record{}, busy: map[tp]bool{}, lost: map[tp]bool{}, topics: slices.Clone(topics), turn: map[string]int32{},
		limit: limit, changed: make(chan struct{})}
}

// addTopics adds topics to the round-robin of take.
func (b *buffer) addTopics(topics []string) {
	b.mu.Lock()
	b.topics = append(b.topics, topics...)
	b.mu.Unlock()
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

// takeTopic takes from topic's free partitions, the first one after the
// one the last take of the topic began with: partitions take turns,
// none waits while others have records (fair, whatever InFlight).
func (b *buffer) takeTopic(topic string, maxBytes int) []*kgo.Record {
	var out []*kgo.Record
	size := 0
	ps := b.partitionsOf(topic)
	last, ok := b.turn[topic]
	if !ok {
		last = -1
	}
	first := slices.IndexFunc(ps, func(p tp) bool { return p.partition > last })
	if first < 0 {
		first = 0
	}
	for i := range ps {
		p := ps[(first+i)%len(ps)]
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
		if len(out) == 0 {
			b.turn[topic] = p.partition
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

// done frees the partitions of an acked unit whose values were bytes
// long.
func (b *buffer) done(parts []tp, bytes int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freeLocked(parts, bytes)
}

// freeLocked frees parts, busy, and the bytes of their records leaving
// the buffer. REQUIRES: mu held.
func (b *buffer) freeLocked(parts []tp, bytes int) error {
	for _, p := range parts {
		if !b.busy[p] {
			return invariantf("topic %q partition %d freed while not busy", p.topic, p.partition)
		}
		b.busy[p] = false
		delete(b.lost, p)
	}
	b.bytes -= bytes
	if b.bytes < 0 {
		return invariantf("buffer holds %d bytes after freeing %d", b.bytes, bytes)
	}
	b.signalLocked()
	return nil
}

// drop forgets the queued records of parts, partitions this run no
// longer owns, and marks those of them that are busy lost: the unit
// holding them is sent no more once its answer says nothing of it is
// held (abandon).
func (b *buffer) drop(parts []tp) {
	b.mu.Lock()
	for _, p := range parts {
		for _, r := range b.queues[p] {
			b.bytes -= len(r.Value)
		}
		delete(b.queues, p)
		if b.busy[p] {
			b.lost[p] = true
		}
	}
	b.signalLocked()
	b.mu.Unlock()
}

// lostAny reports whether one of parts is lost.
func (b *buffer) lostAny(parts []tp) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range parts {
		if b.lost[p] {
			return true
		}
	}
	return false
}

// abandon frees the partitions of a unit that will not be sent again,
// made of recs: the records of lost partitions leave the buffer; the
// others go back in front of their queues, to be taken into another
// unit.
func (b *buffer) abandon(recs []*kgo.Record, parts []tp) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	gone, back := 0, map[tp][]*kgo.Record{}
	for _, r := range recs {
		p := tp{r.Topic, r.Partition}
		if b.lost[p] {
			gone += len(r.Value)
		} else {
			back[p] = append(back[p], r)
		}
	}
	for p, rs := range back {
		b.queues[p] = append(rs, b.queues[p]...)
	}
	return b.freeLocked(parts, gone)
}

// waitFree blocks until none of parts is busy, or ctx ends.
func (b *buffer) waitFree(ctx context.Context, parts []tp) error {
	for {
		b.mu.Lock()
		busy := slices.ContainsFunc(parts, func(p tp) bool { return b.busy[p] })
		ch := b.changed
		b.mu.Unlock()
		if !busy {
			return nil
		}
		if err := wait(ctx, ch); err != nil {
			return err
		}
	}
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
