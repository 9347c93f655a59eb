package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// poll fetches records into the buffer while it has room: a full buffer
// stops the fetching (franz-go then holds at most one fetch per broker),
// which is the source's backpressure.
//
// In a group, rebalances wait from a poll until its records are in the
// buffer (kgo.BlockRebalanceOnPoll, AllowRebalance): a revoke never
// meets records fetched before it and queued after it.
func (r *run) poll(ctx context.Context) error {
	for {
		if ch := r.buf.room(); ch != nil {
			if wait(ctx, ch) != nil {
				return nil
			}
			continue
		}
		fs := r.cl.PollFetches(ctx)
		err := r.queue(ctx, fs)
		if r.s.cfg.Group != "" {
			r.cl.AllowRebalance()
		}
		if err != nil || ctx.Err() != nil {
			return err
		}
		if r.once.over() {
			return errOnceReached
		}
	}
}

// queue puts the records of a poll of partitions the run owns in the
// buffer, and handles its errors.
func (r *run) queue(ctx context.Context, fs kgo.Fetches) error {
	if ctx.Err() != nil {
		return nil
	}
	for _, e := range fs.Errors() {
		if err := r.fetchError(ctx, e.Topic, e.Partition, e.Err); err != nil {
			return err
		}
	}
	var recs []*kgo.Record
	var err error
	fs.EachPartition(func(f kgo.FetchTopicPartition) {
		p := tp{f.Topic, f.Partition}
		if !r.owns(p) {
			return // not this run's (a group's revoke released it)
		}
		data := f.Records
		if r.once != nil {
			data = r.once.saw(p, data) // control records kept for once (once.go) are no rows
		}
		if err == nil && len(data) > 0 {
			err = r.advance(p, data)
			recs = append(recs, data...)
		}
		r.s.noteLag(p, f.HighWatermark)
	})
	if err == nil && len(recs) > 0 {
		r.buf.add(recs)
	}
	return err
}

// advance moves a partition's expected position past recs, which must
// all be at or after it: a record before it would be a row twice.
func (r *run) advance(p tp, recs []*kgo.Record) error {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	for _, rec := range recs {
		if at, ok := r.pos[p]; ok && rec.Offset < at {
			return invariantf("topic %q partition %d: fetched offset %d, expected %d or after", p.topic, p.partition, rec.Offset, at)
		}
		r.pos[p] = rec.Offset + 1
	}
	return nil
}

// fetchError handles a partition's fetch error. Records removed before
// they were fetched (offset out of range: the client was told not to
// reset on its own) are a gap; anything else is logged, and the client
// goes on retrying.
func (r *run) fetchError(ctx context.Context, topic string, partition int32, err error) error {
	p := tp{topic, partition}
	var loss *kgo.ErrDataLoss
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed):
		return nil
	case errors.Is(err, kerr.OffsetOutOfRange):
		return r.outOfRange(ctx, p)
	case errors.As(err, &loss) && loss.ResetTo > loss.ConsumedTo:
		return r.skipTo(p, &GapError{Topic: topic, Partition: partition, From: loss.ConsumedTo, To: loss.ResetTo})
	case errors.As(err, &loss):
		return &AheadError{Topic: topic, Partition: partition, Resume: loss.ConsumedTo, End: loss.ResetTo}
	}
	r.s.cfg.Logger.Warn("kafka source: fetch failed; the client retries", "source", r.s.cfg.Name,
		"topic", topic, "partition", partition, "error", err)
	return nil
}

// outOfRange finds where p's log is now and what that means for the
// position the poller expected (Source.Resume); a partition not read
// yet expected its first record, at 0, and is moved to where the log
// says. A failed listing is left to the next fetch, which fails again
// and brings this back.
func (r *run) outOfRange(ctx context.Context, p tp) error {
	r.posMu.Lock()
	at, known := r.pos[p]
	r.posMu.Unlock()
	starts, err := r.adm.ListStartOffsets(ctx, p.topic)
	if err != nil {
		return nil
	}
	ends, err := r.adm.ListEndOffsets(ctx, p.topic)
	if err != nil {
		return nil
	}
	st, en, err := listedRange(p, starts, ends)
	if err != nil {
		return nil
	}
	next, gap, err := r.s.Resume(p.topic, p.partition, at, st, en)
	if err == nil && (gap != nil || !known) {
		r.moveTo(p, next)
	}
	return err
}

// skipTo reports gap and, when the source skips gaps, moves p's
// consumption to the gap's end.
func (r *run) skipTo(p tp, g *GapError) error {
	if err := r.s.gap(g); err != nil {
		return err
	}
	r.moveTo(p, g.To)
	return nil
}

// moveTo moves p's consumption to offset next.
func (r *run) moveTo(p tp, next int64) {
	r.posMu.Lock()
	r.pos[p] = next
	r.posMu.Unlock()
	if r.once != nil {
		r.once.movedTo(p, next)
	}
	r.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{p.topic: {p.partition: {Epoch: -1, Offset: next}}})
}

// noteLag records p's high watermark as of its last fetch.
func (s *Source) noteLag(p tp, hw int64) {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	if s.hw == nil {
		s.hw, s.acked = map[tp]int64{}, map[tp]int64{}
	}
	s.hw[p] = hw
}

// forgetLag drops the lag of parts, no longer consumed.
func (s *Source) forgetLag(parts []tp) {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	for _, p := range parts {
		delete(s.hw, p)
		delete(s.acked, p)
	}
}

// noteAcked records that p's records before next are acked.
func (s *Source) noteAcked(p tp, next int64) {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	if s.hw == nil {
		s.hw, s.acked = map[tp]int64{}, map[tp]int64{}
	}
	s.acked[p] = next
}
