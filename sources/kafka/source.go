package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// IngestFunc submits a unit and blocks until it is answered: nil means
// committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// Source reads topics' partitions into units. It holds no durable
// state: where each partition resumes is the host's offsets view, given
// to Run.
type Source struct {
	cfg     Config
	running atomic.Bool

	recordsIngested, recordsAcked, unitsAcked atomic.Uint64
	retries, gaps, gapRecords                 atomic.Uint64

	lagMu sync.Mutex
	hw    map[tp]int64 // per partition, the high watermark of its last fetch
	acked map[tp]int64 // per partition, the next offset acked (this Run)
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
	RecordsIngested uint64 // records of units handed to ingest (each unit once)
	RecordsAcked    uint64
	UnitsAcked      uint64
	Retries         uint64 // resubmissions of a unit
	Gaps            uint64 // ranges lost to retention and skipped (OnGapSkip)
	GapRecords      uint64 // records in them
	Lag             []PartitionLag
}

// PartitionLag is how far a partition's acked records are behind its
// high watermark, as of the last fetch.
type PartitionLag struct {
	Topic     string
	Partition int32
	Records   int64
}

// Stats returns the counters. Safe from any goroutine.
func (s *Source) Stats() Stats {
	st := Stats{RecordsIngested: s.recordsIngested.Load(), RecordsAcked: s.recordsAcked.Load(),
		UnitsAcked: s.unitsAcked.Load(), Retries: s.retries.Load(), Gaps: s.gaps.Load(), GapRecords: s.gapRecords.Load()}
	s.lagMu.Lock()
	for p, hw := range s.hw {
		lag := hw
		if a, ok := s.acked[p]; ok {
			lag = max(hw-a, 0)
		}
		st.Lag = append(st.Lag, PartitionLag{p.topic, p.partition, lag})
	}
	s.lagMu.Unlock()
	slices.SortFunc(st.Lag, func(a, b PartitionLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return st
}

// Run reads every partition of the topics from the offsets the host
// recovered (its offsets view), or from Start for a partition without
// one, and ingests the records until ctx ends (nil) or it fails: a
// *RecordError, a *GapError (OnGapStop), an *AheadError, a topic that
// does not exist, the host refusing every unit (engine.ErrClosed before
// ctx ended), a broken invariant. A broker that cannot be reached is
// logged and retried; the franz-go client retries fetches itself.
func (s *Source) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	if !s.running.CompareAndSwap(false, true) {
		return invariantf("source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	r, err := s.open(ctx, offsets)
	if r == nil || err != nil {
		return err
	}
	defer r.close()
	return r.run(ctx, ingest)
}

// run is one Run's state.
type run struct {
	s     *Source
	cl    *kgo.Client
	adm   *kadm.Client
	buf   *buffer
	known map[tp]bool // partitions being consumed

	posMu sync.Mutex
	pos   map[tp]int64 // the next offset the poller expects, where known
}

func (r *run) close() { r.cl.Close() }

// open finds the topics' partitions, checks each recovered offset
// against its log, and starts a client consuming them. nil, nil: ctx
// ended first.
func (s *Source) open(ctx context.Context, offsets segment.Offsets) (*run, error) {
	s.cfg.Logger.Info("kafka source: starting", "source", s.cfg.Name, "topics", s.cfg.Topics,
		"partitions_with_offsets", ownKeys(offsets, s.cfg.Name))
	meta, err := kgo.NewClient(s.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
	}
	adm := kadm.NewClient(meta)
	parts, err := s.partitions(ctx, adm)
	if err != nil || parts == nil {
		meta.Close()
		return nil, err
	}
	resume := resumeAt(offsets, s.cfg.Name, parts)
	start, err := s.checkResume(ctx, adm, resume)
	meta.Close()
	if err != nil || start == nil {
		return nil, err
	}
	consume := map[string]map[int32]kgo.Offset{}
	r := &run{s: s, buf: newBuffer(s.cfg.Topics, s.cfg.BufferBytes), known: map[tp]bool{}, pos: map[tp]int64{}}
	for _, p := range parts {
		o := kgo.NewOffset().AtStart()
		if s.cfg.Start == StartLatest {
			o = kgo.NewOffset().AtEnd()
		}
		if at, ok := start[p]; ok {
			o = kgo.NewOffset().At(at)
			r.pos[p] = at
			s.noteAcked(p, at) // the lag counts from here
		}
		if consume[p.topic] == nil {
			consume[p.topic] = map[int32]kgo.Offset{}
		}
		consume[p.topic][p.partition] = o
		r.known[p] = true
	}
	opts := append(s.clientOpts(), kgo.ConsumePartitions(consume), kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	if s.cfg.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	r.cl, err = kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
	}
	r.adm = kadm.NewClient(r.cl)
	return r, nil
}

func (s *Source) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...), kgo.ClientID("skipprd-" + s.cfg.Name)}
	return append(opts, s.cfg.ClientOpts...)
}

// partitions lists the topics' partitions, retrying while the brokers
// cannot be reached. nil, nil: ctx ended first.
func (s *Source) partitions(ctx context.Context, adm *kadm.Client) ([]tp, error) {
	backoff := retryBase
	for {
		details, err := adm.ListTopics(ctx, s.cfg.Topics...)
		if err == nil {
			return s.partitionsOf(details)
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		s.cfg.Logger.Warn("kafka source: cannot list the topics; retrying", "source", s.cfg.Name, "retry_in", backoff, "error", err)
		if s.cfg.Sleep(ctx, backoff) != nil {
			return nil, nil
		}
		backoff = min(2*backoff, 10*retryMax)
	}
}

func (s *Source) partitionsOf(details kadm.TopicDetails) ([]tp, error) {
	var out []tp
	for _, t := range s.cfg.Topics {
		d, ok := details[t]
		switch {
		case !ok:
			return nil, fmt.Errorf("kafka source %q: topic %q does not exist", s.cfg.Name, t)
		case d.Err != nil:
			return nil, fmt.Errorf("kafka source %q: topic %q: %w", s.cfg.Name, t, d.Err)
		}
		for _, p := range d.Partitions.Numbers() {
			out = append(out, tp{t, p})
		}
	}
	return out, nil
}

// checkResume compares each recovered offset with its partition's log:
// below its start, the records between were removed before they were
// ingested (a *GapError, or with OnGapSkip the start instead); above its
// end, the log is not the one the offsets were taken from (*AheadError).
// It returns where each recovered partition starts. nil, nil: ctx ended.
func (s *Source) checkResume(ctx context.Context, adm *kadm.Client, resume map[tp]int64) (map[tp]int64, error) {
	if len(resume) == 0 {
		return map[tp]int64{}, nil
	}
	starts, err := adm.ListStartOffsets(ctx, s.cfg.Topics...)
	if err == nil {
		var ends kadm.ListedOffsets
		ends, err = adm.ListEndOffsets(ctx, s.cfg.Topics...)
		if err == nil {
			return s.settleResume(resume, starts, ends)
		}
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("kafka source %q: list the partitions' offsets: %w", s.cfg.Name, err)
}

func (s *Source) settleResume(resume map[tp]int64, starts, ends kadm.ListedOffsets) (map[tp]int64, error) {
	out := map[tp]int64{}
	for p, at := range resume {
		st, ok1 := starts.Lookup(p.topic, p.partition)
		en, ok2 := ends.Lookup(p.topic, p.partition)
		switch {
		case !ok1 || !ok2 || st.Err != nil || en.Err != nil:
			return nil, fmt.Errorf("kafka source %q: topic %q partition %d: no start or end offset listed (%v, %v)",
				s.cfg.Name, p.topic, p.partition, st.Err, en.Err)
		case at > en.Offset:
			return nil, &AheadError{Topic: p.topic, Partition: p.partition, Resume: at, End: en.Offset}
		case at < st.Offset:
			if err := s.gap(&GapError{Topic: p.topic, Partition: p.partition, From: at, To: st.Offset}); err != nil {
				return nil, err
			}
			at = st.Offset
		}
		out[p] = at
	}
	return out, nil
}

// gap reports a range lost to retention: the error with OnGapStop;
// logged and counted with OnGapSkip.
func (s *Source) gap(g *GapError) error {
	if s.cfg.OnGap == OnGapStop {
		return g
	}
	s.gaps.Add(1)
	s.gapRecords.Add(uint64(g.To - g.From))
	s.cfg.Logger.Error("kafka source: records lost to retention, skipped (on_gap: skip)", "source", s.cfg.Name,
		"topic", g.Topic, "partition", g.Partition, "from", g.From, "to", g.To-1, "records", g.To-g.From)
	return nil
}

// errStopped: ctx ended; Run returns nil.
var errStopped = errors.New("kafka source: stopped")

// run runs the poller, the workers and the metadata watch until one
// fails or ctx ends.
func (r *run) run(ctx context.Context, ingest IngestFunc) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	fail := func(err error) {
		if err != nil && !errors.Is(err, errStopped) && ctx.Err() == nil {
			cancel(err)
		}
	}
	wg.Go(func() { fail(r.poll(ctx)) })
	wg.Go(func() { fail(r.watch(ctx)) })
	for range r.s.cfg.InFlight {
		wg.Go(func() { fail(r.work(ctx, ingest)) })
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// watch looks the topics up every Metadata interval and consumes
// partitions added since, from their start.
func (r *run) watch(ctx context.Context) error {
	for r.s.cfg.Sleep(ctx, r.s.cfg.Metadata) == nil {
		details, err := r.adm.ListTopics(ctx, r.s.cfg.Topics...)
		if err != nil {
			r.s.cfg.Logger.Warn("kafka source: cannot look the topics up", "source", r.s.cfg.Name, "error", err)
			continue
		}
		parts, err := r.s.partitionsOf(details)
		if err != nil {
			return err
		}
		add := map[string]map[int32]kgo.Offset{}
		for _, p := range parts {
			if r.known[p] {
				continue
			}
			r.known[p] = true
			if add[p.topic] == nil {
				add[p.topic] = map[int32]kgo.Offset{}
			}
			add[p.topic][p.partition] = kgo.NewOffset().AtStart()
			r.s.cfg.Logger.Info("kafka source: new partition", "source", r.s.cfg.Name, "topic", p.topic, "partition", p.partition)
		}
		if len(add) > 0 {
			r.cl.AddConsumePartitions(add)
		}
	}
	return nil
}
