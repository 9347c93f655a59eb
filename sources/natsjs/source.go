package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
	"github.com/skipprd/skipprd/sources/messages"
)

// IngestFunc submits a unit and blocks until it is answered: nil means
// committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// The columns every row gets besides its value's.
const (
	ColSubject   = "_nats_subject"
	ColSequence  = "_nats_sequence"
	ColTimestamp = "_nats_timestamp"
)

var metaFields = []arrow.Field{
	{Name: ColSubject, Type: arrow.BinaryTypes.String},
	{Name: ColSequence, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColTimestamp, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}

// Source reads one JetStream stream into units. It holds no durable
// state: where it resumes is the host's offsets view, given to Run.
type Source struct {
	cfg     Config
	running atomic.Bool

	messagesIngested, messagesAcked, unitsAcked atomic.Uint64
	retries, gaps, gapMessages                  atomic.Uint64

	// faults, when set (by a test), wraps the client Run connects with:
	// faults injected into the real client's answers.
	faults func(jetstream.JetStream) jetstream.JetStream
}

// New returns a source for cfg, or an error naming what is wrong with it.
func New(cfg Config) (*Source, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg}, nil
}

// Stats are a source's counters since New.
type Stats struct {
	MessagesIngested, MessagesAcked, UnitsAcked uint64
	Retries                                     uint64
	Gaps, GapMessages                           uint64 // ranges removed by the stream's limits and skipped (OnGapSkip)
}

// Stats returns the counters. Safe from any goroutine.
func (s *Source) Stats() Stats {
	return Stats{MessagesIngested: s.messagesIngested.Load(), MessagesAcked: s.messagesAcked.Load(), UnitsAcked: s.unitsAcked.Load(),
		Retries: s.retries.Load(), Gaps: s.gaps.Load(), GapMessages: s.gapMessages.Load()}
}

// OffsetKey is the source's offset key; its value is the stream
// sequence of the next message.
func (s *Source) OffsetKey() string { return "nats/" + s.cfg.Name + "/" + s.cfg.Stream }

// Run reads the stream from the sequence the host recovered (its
// offsets view), or from Start, and ingests its messages until ctx ends
// (nil) or it fails: a *MessageError, a *GapError (OnGapStop), an
// *AheadError, a stream that does not exist, the host refusing every
// unit, a broken invariant. A server that cannot be reached is logged
// and retried (the client reconnects itself once connected).
func (s *Source) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	if !s.running.CompareAndSwap(false, true) {
		return invariantf("source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	nc, js, err := s.connect(ctx)
	if nc == nil {
		return err
	}
	defer nc.Close()
	if s.faults != nil {
		js = s.faults(js)
	}
	next, known := s.Recovered(offsets)
	start, err := s.startAt(ctx, js, next, known)
	if err != nil || ctx.Err() != nil {
		return err
	}
	cons, err := js.OrderedConsumer(ctx, s.cfg.Stream, s.consumerConfig(start, known))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("nats source %q: consumer of stream %q: %w", s.cfg.Name, s.cfg.Stream, err)
	}
	s.cfg.Logger.Info("nats source: starting", "source", s.cfg.Name, "stream", s.cfg.Stream, "from_sequence", start, "recovered", known)
	once, err := s.startOnce(ctx, js, cons)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("nats source %q: once: stream %q: %w", s.cfg.Name, s.cfg.Stream, err)
	}
	r := &run{s: s, js: js, q: newQueue(s.cfg.BufferBytes), expect: start, once: once}
	if err := r.run(ctx, cons, ingest); !errors.Is(err, errOnceReached) {
		return err
	}
	s.cfg.Logger.Info("nats source: once: every message up to the stream's last sequence at start is acked", "source", s.cfg.Name,
		"stream", s.cfg.Stream, "last_sequence", once.mark)
	return nil
}

// connect connects, retrying while the server cannot be reached. nil:
// ctx ended first.
func (s *Source) connect(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	opts := append([]nats.Option{nats.Name("skipprd-" + s.cfg.Name), nats.MaxReconnects(-1)}, s.cfg.Options...)
	backoff := retryBase
	for {
		nc, err := nats.Connect(s.cfg.URL, opts...)
		if err == nil {
			js, err := jetstream.New(nc)
			if err == nil {
				return nc, js, nil
			}
			nc.Close()
		}
		s.cfg.Logger.Warn("nats source: cannot connect; retrying", "source", s.cfg.Name, "url", s.cfg.URL, "retry_in", backoff, "error", err)
		if s.cfg.Sleep(ctx, backoff) != nil {
			return nil, nil, nil
		}
		backoff = min(2*backoff, 10*retryMax)
	}
}

// startAt compares the recovered sequence with the stream's: below its
// first, messages were removed before they were ingested (a *GapError,
// or with OnGapSkip its first sequence instead); past its last + 1, the
// stream is not the one the offsets were taken from (*AheadError).
func (s *Source) startAt(ctx context.Context, js jetstream.JetStream, next uint64, known bool) (uint64, error) {
	st, err := js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		return 0, fmt.Errorf("nats source %q: stream %q: %w", s.cfg.Name, s.cfg.Stream, err)
	}
	if !known {
		return 0, nil
	}
	info := st.CachedInfo().State
	at, _, err := s.Resume(next, info.FirstSeq, info.LastSeq)
	return at, err
}

func (s *Source) consumerConfig(start uint64, known bool) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: s.cfg.Subjects, DeliverPolicy: jetstream.DeliverAllPolicy}
	switch {
	case known:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	case s.cfg.Start == StartNew:
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	return cfg
}

// gap reports a range removed by the stream's limits: the error with
// OnGapStop; logged and counted with OnGapSkip.
func (s *Source) gap(g *GapError) error {
	if s.cfg.OnGap == OnGapStop {
		return g
	}
	s.gaps.Add(1)
	s.gapMessages.Add(g.To - g.From)
	s.cfg.Logger.Error("nats source: messages removed by the stream's limits, skipped (on_gap: skip)", "source", s.cfg.Name,
		"stream", g.Stream, "from", g.From, "to", g.To-1)
	return nil
}

// run is one Run's state.
type run struct {
	s  *Source
	js jetstream.JetStream
	q  *queue
	// expect: the sequence the poller expects next (0: not known yet).
	expect uint64
	// once: with Config.Once, the progress towards the end (once.go);
	// nil otherwise.
	once *onceRange
}

var errStopped = errors.New("nats source: stopped")

func (r *run) run(ctx context.Context, cons jetstream.Consumer, ingest IngestFunc) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fail := func(err error) {
		if err != nil && !errors.Is(err, errStopped) && ctx.Err() == nil {
			cancel(err)
		}
	}
	if r.once.over() {
		return errOnceReached // nothing pending at start
	}
	var wg sync.WaitGroup
	wg.Go(func() { fail(r.poll(ctx, cons)) })
	wg.Go(func() { fail(r.work(ctx, ingest)) })
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// poll pulls messages into the queue while it has room.
func (r *run) poll(ctx context.Context, cons jetstream.Consumer) error {
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("nats source %q: pull from stream %q: %w", r.s.cfg.Name, r.s.cfg.Stream, err)
	}
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		if err := r.q.waitRoom(ctx); err != nil {
			return nil
		}
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			r.s.cfg.Logger.Warn("nats source: pull failed; the client retries", "source", r.s.cfg.Name, "error", err)
			continue
		}
		m, err := r.message(msg)
		if err != nil {
			return err
		}
		r.q.add(m)
		if r.once != nil && r.once.delivered(m.Seq, m.pending) {
			return errOnceReached
		}
	}
}

// message reads msg's metadata and checks its sequence: below the one
// expected is a message twice (an invariant); above it is a jump, marked
// for the worker to check for a gap before it ingests it (jump.go).
func (r *run) message(msg jetstream.Msg) (Message, error) {
	md, err := msg.Metadata()
	if err != nil {
		return Message{}, invariantf("a message without metadata: %v", err)
	}
	seq := md.Sequence.Stream
	if r.expect != 0 && seq < r.expect {
		return Message{}, invariantf("stream %q: sequence %d delivered after %d", r.s.cfg.Stream, seq, r.expect-1)
	}
	m := Message{Seq: seq, Subject: msg.Subject(), At: md.Timestamp.UnixMicro(), Value: msg.Data(), pending: md.NumPending}
	if r.expect != 0 && seq > r.expect {
		m.after = r.expect
	}
	r.expect = seq + 1
	return m, nil
}

// work takes units of messages from the queue and ingests each until it
// is acked.
func (r *run) work(ctx context.Context, ingest IngestFunc) error {
	for {
		msgs, err := r.q.take(ctx, r.s.cfg.UnitBytes)
		if err != nil {
			return nil
		}
		if err := r.checkJumps(ctx, msgs); err != nil {
			return err
		}
		u, n, err := r.build(msgs)
		if err != nil {
			return err
		}
		err = r.s.submit(ctx, ingest, u, n)
		messages.ReleaseAll(u.Batches)
		if err != nil {
			return err
		}
		r.q.done(n)
		if r.once != nil && r.once.ackedTo(u.Offsets[0].Value) {
			return errOnceReached
		}
	}
}

// build makes the unit of msgs' first messages (Source.Unit) and gives
// the rest back. It returns the unit and the bytes of the values it
// holds.
func (r *run) build(msgs []Message) (engine.Unit, int, error) {
	u, n, err := r.s.Unit(msgs)
	if err != nil {
		return u, 0, err
	}
	if n < len(msgs) {
		r.q.giveBack(msgs[n:])
	}
	bytes := 0
	for _, m := range msgs[:n] {
		bytes += len(m.Value)
	}
	return u, bytes, nil
}

// unit is the unit of msgs, in sequence order, advancing the offset to
// the sequence after the last.
func (s *Source) unit(msgs []Message) (engine.Unit, error) {
	values := make([][]byte, len(msgs))
	for i, m := range msgs {
		values[i] = m.Value
		if i > 0 && m.Seq <= msgs[i-1].Seq {
			return engine.Unit{}, invariantf("sequence %d after %d in a unit", m.Seq, msgs[i-1].Seq)
		}
	}
	dec := messages.Decoder{Format: s.cfg.Format, Limits: s.cfg.Limits, Mem: s.cfg.Allocator, Meta: metaFields,
		AppendMeta: func(i int, bs []array.Builder) {
			bs[0].(*array.StringBuilder).Append(msgs[i].Subject)
			bs[1].(*array.Int64Builder).Append(int64(msgs[i].Seq))
			bs[2].(*array.TimestampBuilder).Append(arrow.Timestamp(msgs[i].At))
		}}
	schema, batches, err := dec.Decode(values)
	if ve, ok := errors.AsType[*messages.ValueError](err); ok {
		m := msgs[ve.Index]
		return engine.Unit{}, &MessageError{Stream: s.cfg.Stream, Sequence: m.Seq, Subject: m.Subject, Reason: ve.Reason}
	}
	if err != nil {
		return engine.Unit{}, err
	}
	return engine.Unit{
		Key: segment.PartitionKey{SinkRef: s.cfg.SinkRef, Namespace: s.cfg.namespace(), Partition: "0",
			Schema: segment.FingerprintOf(schema)},
		Schema: schema, Batches: batches,
		Offsets: segment.Offsets{{Key: s.OffsetKey(), Value: msgs[len(msgs)-1].Seq + 1}},
	}, nil
}

// submit ingests u until it is acked (sources.Submit: the very same
// unit again while the answer may change).
func (s *Source) submit(ctx context.Context, ingest IngestFunc, u engine.Unit, bytes int) error {
	n := uint64(0)
	for _, b := range u.Batches {
		n += uint64(b.NumRows())
	}
	s.messagesIngested.Add(n)
	a, err := sources.Submit(ctx, ingest, u, s.cfg.Sleep, func(a sources.Answer, backoff time.Duration, err error) {
		s.retries.Add(1)
		if a == sources.Unknown {
			s.cfg.Logger.Warn("nats source: ingest failed; retrying the same unit", "source", s.cfg.Name,
				"offsets", fmt.Sprint(u.Offsets), "retry_in", backoff, "error", err)
		}
	})
	switch a {
	case sources.Acked:
		s.messagesAcked.Add(n)
		s.unitsAcked.Add(1)
		return nil
	case sources.Invalid:
		err = fmt.Errorf("nats source %q: the host refuses a unit of %d messages (%d bytes, offsets %v): %w", s.cfg.Name, n, bytes, u.Offsets, err)
	case sources.Refuses:
		err = fmt.Errorf("nats source %q: the host refuses units: %w", s.cfg.Name, err)
	default:
		err = errStopped
	}
	s.messagesIngested.Add(-n)
	return err
}
