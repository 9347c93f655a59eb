package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
	commits, commitErrors                     atomic.Uint64

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
	// Commits and CommitErrors count the commits of acked offsets to the
	// consumer group (Config.Group) that succeeded and that failed.
	Commits, CommitErrors uint64
	// Lag is per partition consumed (with a group: assigned) now.
	Lag []PartitionLag
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
		UnitsAcked: s.unitsAcked.Load(), Retries: s.retries.Load(), Gaps: s.gaps.Load(), GapRecords: s.gapRecords.Load(),
		Commits: s.commits.Load(), CommitErrors: s.commitErrors.Load()}
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

// Run reads every partition of the topics — or, with a Group, those the
// group assigns — from the offsets the host recovered (its offsets
// view), or from Start for a partition without one, and ingests the
// records until ctx ends (nil) or it fails: a *RecordError, a *GapError
// (OnGapStop), an *AheadError, a topic that does not exist, the host
// refusing every unit (engine.ErrClosed before ctx ended), a broken
// invariant. A broker that cannot be reached is logged and retried; the
// franz-go client retries fetches itself.
func (s *Source) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	if !s.running.CompareAndSwap(false, true) {
		return invariantf("source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run{s: s, topics: s.newTopicSet(), owned: map[tp]bool{}, view: slices.Clone(offsets), pos: map[tp]int64{}}
	r.fail = func(err error) {
		if err != nil && !errors.Is(err, errStopped) && ctx.Err() == nil {
			cancel(err)
		}
	}
	r.ctx = ctx
	defer r.close()
	if err := r.open(ctx); err != nil || ctx.Err() != nil {
		return cmp.Or(err, r.cause(ctx))
	}
	if err := r.run(ctx, ingest); !errors.Is(err, errOnceReached) {
		return err
	}
	s.cfg.Logger.Info("kafka source: once: every partition found at start is acked up to its high watermark then", "source", s.cfg.Name)
	return nil
}

// run is one Run's state.
type run struct {
	s *Source
	// ctx is Run's: it ends when the run stops. The group's callbacks,
	// which franz-go runs with its own, wait on it.
	ctx    context.Context
	cl     *kgo.Client  // consumes
	meta   *kgo.Client  // looks up, for adm: ready before cl's group callbacks run
	adm    *kadm.Client // on meta
	buf    *buffer
	topics *topicSet
	// fail ends the run with err (nil and errStopped do not).
	fail func(err error)
	// commits sends acked offsets to the group; nil without one.
	commits *committer
	// once: with Config.Once, the progress towards the marks (once.go);
	// nil otherwise.
	once *onceMarks

	ownMu sync.Mutex
	owned map[tp]bool     // the partitions consumed: all found (direct), or those assigned (group)
	view  segment.Offsets // the offsets given to Run, max-merged with every unit acked since

	posMu sync.Mutex
	pos   map[tp]int64 // the next offset the poller expects, where known
}

// cause is what Run returns once ctx ended: nil when its parent ended
// it, or else the failure that did.
func (r *run) cause(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// open finds the topics' partitions and starts a client consuming them:
// all of them from where they resume (direct), or those the group will
// assign. nil with ctx ended: it ended first.
func (r *run) open(ctx context.Context) error {
	s := r.s
	s.cfg.Logger.Info("kafka source: starting", "source", s.cfg.Name, "topics", s.cfg.Topics, "topic_regex", s.cfg.TopicRegex,
		"group", s.cfg.Group, "partitions_with_offsets", ownKeys(r.view, s.cfg.Name))
	var err error
	if r.meta, err = kgo.NewClient(s.clientOpts()...); err != nil {
		return fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
	}
	r.adm = kadm.NewClient(r.meta)
	parts, ok, err := r.discover(ctx)
	if !ok {
		return err
	}
	r.buf = newBuffer(r.topics.all(), s.cfg.BufferBytes)
	var opts []kgo.Opt
	if s.cfg.Group != "" {
		opts = r.groupOpts()
	} else if opts, err = r.directOpts(ctx, parts); opts == nil {
		return err
	}
	if s.cfg.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	opts = append(s.metadataOpts(), opts...)
	if r.cl, err = kgo.NewClient(append(opts, s.cfg.ClientOpts...)...); err != nil {
		return fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
	}
	return nil
}

// close closes the clients open opened.
func (r *run) close() {
	if r.cl != nil {
		r.cl.Close()
	}
	if r.meta != nil {
		r.meta.Close()
	}
}

// directOpts checks each recovered offset against its log and returns
// the client options consuming parts, each from where it resumes.
// nil, nil: ctx ended first.
func (r *run) directOpts(ctx context.Context, parts []tp) ([]kgo.Opt, error) {
	s := r.s
	start, err := s.checkResume(ctx, r.adm, resumeAt(r.view, s.cfg.Name, parts))
	if err != nil || start == nil {
		return nil, err
	}
	consume := map[string]map[int32]kgo.Offset{}
	for _, p := range parts {
		o := s.startOffset()
		if at, ok := start[p]; ok {
			o = kgo.NewOffset().At(at)
			r.pos[p] = at
			s.noteAcked(p, at) // the lag counts from here
		}
		if consume[p.topic] == nil {
			consume[p.topic] = map[int32]kgo.Offset{}
		}
		consume[p.topic][p.partition] = o
		r.owned[p] = true
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(consume), kgo.ConsumeResetOffset(kgo.NoResetOffset())}
	if !s.cfg.Once {
		return opts, nil
	}
	if r.once, err = s.onceStart(ctx, r.adm, parts, start); r.once == nil {
		return nil, err
	}
	return append(opts, kgo.KeepControlRecords()), nil // passed over in queue (once.go)
}

// metadataOpts are the options every client of the source starts with:
// its brokers, and metadata refreshed every Config.Metadata (within
// franz-go's bounds) and cached no longer, so that the watch finds
// partitions and topics added, and the consumer their leaders, soon
// after they appear (a group refreshes on its own).
func (s *Source) metadataOpts() []kgo.Opt {
	minAge := max(10*time.Millisecond, min(5*time.Second, s.cfg.Metadata))
	return []kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...), kgo.ClientID("skipprd-" + s.cfg.Name),
		kgo.MetadataMinAge(minAge), kgo.MetadataMaxAge(max(minAge, min(s.cfg.Metadata, time.Hour)))}
}

// startOffset is where a partition without a recovered offset starts.
func (s *Source) startOffset() kgo.Offset {
	if s.cfg.Start == StartLatest {
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().AtStart()
}

// clientOpts are the options of a client that only looks things up.
func (s *Source) clientOpts() []kgo.Opt {
	return append(s.metadataOpts(), s.cfg.ClientOpts...)
}

// discover finds the topics — the listed ones, or those matching — and
// their partitions, retrying while the brokers cannot be reached. ok is
// false when it failed (err) or ctx ended first.
func (r *run) discover(ctx context.Context) (parts []tp, ok bool, err error) {
	s := r.s
	backoff := retryBase
	for {
		details, err := r.topics.lookup(ctx, r.adm)
		if err == nil {
			return r.found(details)
		}
		if ctx.Err() != nil {
			return nil, false, nil
		}
		s.cfg.Logger.Warn("kafka source: cannot list the topics; retrying", "source", s.cfg.Name, "retry_in", backoff, "error", err)
		if s.cfg.Sleep(ctx, backoff) != nil {
			return nil, false, nil
		}
		backoff = min(2*backoff, 10*retryMax)
	}
}

// found takes the topics of details into the set and lists their
// partitions.
func (r *run) found(details kadm.TopicDetails) ([]tp, bool, error) {
	s := r.s
	if err := r.topics.add(r.topics.fresh(details)); err != nil {
		return nil, false, fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
	}
	if len(r.topics.all()) == 0 {
		s.cfg.Logger.Warn("kafka source: no topic matches topic_regex yet; looking again every metadata interval",
			"source", s.cfg.Name, "topic_regex", s.cfg.TopicRegex, "every", s.cfg.Metadata)
	}
	parts, err := partitionsOf(details, r.topics.all())
	if err != nil {
		return nil, false, fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
	}
	return parts, true, nil
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
	var topics []string
	for p := range resume {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		var ends kadm.ListedOffsets
		ends, err = adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			return s.settleResume(resume, starts, ends)
		}
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("kafka source %q: list the partitions' offsets: %w", s.cfg.Name, err)
}

// listedRange is p's start and end offsets from the listings, or an
// error naming the partition when either is missing or failed.
func listedRange(p tp, starts, ends kadm.ListedOffsets) (start, end int64, err error) {
	st, ok1 := starts.Lookup(p.topic, p.partition)
	en, ok2 := ends.Lookup(p.topic, p.partition)
	if !ok1 || !ok2 || st.Err != nil || en.Err != nil {
		return 0, 0, fmt.Errorf("topic %q partition %d: no start or end offset listed (%v, %v)", p.topic, p.partition, st.Err, en.Err)
	}
	return st.Offset, en.Offset, nil
}

func (s *Source) settleResume(resume map[tp]int64, starts, ends kadm.ListedOffsets) (map[tp]int64, error) {
	out := map[tp]int64{}
	for p, at := range resume {
		st, en, err := listedRange(p, starts, ends)
		if err != nil {
			return nil, fmt.Errorf("kafka source %q: %w", s.cfg.Name, err)
		}
		next, _, err := s.Resume(p.topic, p.partition, at, st, en)
		if err != nil {
			return nil, err
		}
		out[p] = next
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

// run runs the poller, the workers, the metadata watch and, in a group,
// the committer until one fails or ctx ends.
func (r *run) run(ctx context.Context, ingest IngestFunc) error {
	if r.once.over() {
		return errOnceReached // nothing below the marks to read
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.fail(r.poll(ctx)) })
	wg.Go(func() { r.fail(r.watch(ctx)) })
	if r.commits != nil {
		wg.Go(func() { r.commits.run(ctx) })
	}
	for range r.s.cfg.InFlight {
		wg.Go(func() { r.fail(r.work(ctx, ingest)) })
	}
	wg.Wait()
	return r.cause(ctx)
}

// watch looks the topics up every Metadata interval for partitions
// added since and, with TopicRegex, topics: both read from their start.
func (r *run) watch(ctx context.Context) error {
	for r.s.cfg.Sleep(ctx, r.s.cfg.Metadata) == nil {
		details, err := r.topics.lookup(ctx, r.adm)
		if err != nil {
			r.s.cfg.Logger.Warn("kafka source: cannot look the topics up", "source", r.s.cfg.Name, "error", err)
			continue
		}
		if err := r.refresh(details); err != nil {
			return fmt.Errorf("kafka source %q: %w", r.s.cfg.Name, err)
		}
	}
	return nil
}

// refresh consumes the topics and partitions of details not consumed
// yet: new topics are added to the group's subscription (which assigns
// their partitions), or, direct, every new partition is consumed from
// its start. A topic of the set that is gone is an error.
func (r *run) refresh(details kadm.TopicDetails) error {
	fresh := r.topics.fresh(details)
	if err := r.topics.add(fresh); err != nil {
		return err
	}
	if len(fresh) > 0 {
		r.s.cfg.Logger.Info("kafka source: new topics match topic_regex", "source", r.s.cfg.Name, "topics", fresh)
		r.buf.addTopics(fresh)
	}
	parts, err := partitionsOf(details, r.topics.all())
	if err != nil {
		return err
	}
	if r.s.cfg.Group != "" {
		r.cl.AddConsumeTopics(fresh...) // the group finds new partitions itself (MetadataMaxAge)
		return nil
	}
	add := map[string]map[int32]kgo.Offset{}
	for _, p := range r.own(parts) {
		if add[p.topic] == nil {
			add[p.topic] = map[int32]kgo.Offset{}
		}
		add[p.topic][p.partition] = kgo.NewOffset().AtStart()
		r.s.cfg.Logger.Info("kafka source: new partition", "source", r.s.cfg.Name, "topic", p.topic, "partition", p.partition)
	}
	if len(add) > 0 {
		r.cl.AddConsumePartitions(add)
	}
	return nil
}

// own marks parts owned and returns those that were not.
func (r *run) own(parts []tp) []tp {
	r.ownMu.Lock()
	defer r.ownMu.Unlock()
	var added []tp
	for _, p := range parts {
		if !r.owned[p] {
			r.owned[p] = true
			added = append(added, p)
		}
	}
	return added
}

// owns reports whether the run consumes p.
func (r *run) owns(p tp) bool {
	r.ownMu.Lock()
	defer r.ownMu.Unlock()
	return r.owned[p]
}
