package generator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
)

// Defaults for Config.
const (
	DefaultSinkRef   = "lake"
	DefaultKeyPrefix = "generator"
	// retryBaseDefault and retryMaxDefault bound the backoff after
	// backpressure: long enough not to spin on a full admission, short
	// enough that a freed writer is fed again within a flush or two.
	retryBaseDefault = 25 * time.Millisecond
	retryMaxDefault  = 1 * time.Second
	// lagMax: a partition that fell further behind its schedule than this
	// (backpressure, a paused laptop) restarts its schedule from now rather
	// than bursting to catch up; the rate is a shape, not a debt.
	lagMax = time.Second
	// partitionsMax bounds a stream's partitions (one goroutine each).
	partitionsMax = 64
)

// DefaultEpoch is the event time of offset 0 in every table.
var DefaultEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Stream is one namespace the generator produces.
type Stream struct {
	// Namespace is the table written, and the kind of data in it: one of
	// Tables().
	Namespace string
	// Partitions is how many independent partitions (offset keys, units
	// in flight) the stream has; 1..64.
	Partitions int
	// RowsPerSecond is the stream's total rate, split evenly across its
	// partitions; ≤ 0: as fast as ingest accepts.
	RowsPerSecond float64
	// BatchRows is the most rows in one unit; ≥ 1.
	BatchRows int
	// TotalRows, if not 0, makes the stream a snapshot: each partition
	// produces offsets [0, TotalRows) and then stops.
	TotalRows uint64
}

// DefaultStreams is the daemon's workload: a busy event stream, a
// moderate sessions stream, a trickle of page views, and a small orders
// snapshot that completes in about five seconds and then stops.
func DefaultStreams() []Stream {
	return []Stream{
		{Namespace: "events", Partitions: 4, RowsPerSecond: 20_000, BatchRows: 1_000},
		{Namespace: "sessions", Partitions: 1, RowsPerSecond: 500, BatchRows: 100},
		{Namespace: "pageviews", Partitions: 1, RowsPerSecond: 20, BatchRows: 10},
		{Namespace: "orders", Partitions: 1, RowsPerSecond: 2_000, BatchRows: 1_000, TotalRows: 10_000},
	}
}

// Tables lists the namespaces a Stream may name, sorted.
func Tables() []string {
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Config configures a Generator. Zero fields take the defaults.
type Config struct {
	Streams   []Stream  // nil: DefaultStreams()
	SinkRef   string    // destination of every unit; "": DefaultSinkRef
	KeyPrefix string    // offset keys are {KeyPrefix}/{namespace}/{partition}; "": DefaultKeyPrefix
	Epoch     time.Time // event time of offset 0; zero: DefaultEpoch
	RetryBase time.Duration
	RetryMax  time.Duration
	Allocator memory.Allocator // nil: memory.DefaultAllocator
	Logger    *slog.Logger     // nil: slog.Default()
}

// IngestFunc submits a unit and blocks until it is answered: nil means
// committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// Generator is a replayable synthetic source. It holds no durable state:
// where each partition resumes is the host's offsets view, and every
// record is a pure function of (namespace, partition, offset), so a
// resumed run regenerates exactly what a crashed one had not committed.
type Generator struct {
	cfg   Config
	parts []*partition

	rowsIngested atomic.Uint64
	rowsAcked    atomic.Uint64
	unitsAcked   atomic.Uint64
	retries      atomic.Uint64
	unknowns     atomic.Uint64

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// partition is one (stream, partition) worker's state.
type partition struct {
	stream    Stream
	index     int
	key       segment.PartitionKey
	table     table
	offsetKey string
	next      atomic.Uint64 // next offset to produce = acked high-water mark
}

// New returns a generator for cfg.
//
// REQUIRES: every stream is valid (see Stream); namespaces are distinct.
// An invalid configuration is a programming error and panics.
func New(cfg Config) *Generator {
	cfg = cfg.withDefaults()
	g := &Generator{cfg: cfg, now: time.Now, sleep: sources.Sleep}
	seen := map[string]bool{}
	for _, s := range cfg.Streams {
		t, ok := tables[s.Namespace]
		if !ok || seen[s.Namespace] || s.Partitions < 1 || s.Partitions > partitionsMax || s.BatchRows < 1 {
			panic(fmt.Sprintf("generator: invalid stream %+v (tables %v, partitions 1..%d, batch ≥ 1, distinct namespaces)",
				s, Tables(), partitionsMax))
		}
		seen[s.Namespace] = true
		fp := segment.FingerprintOf(t.schema)
		for i := range s.Partitions {
			g.parts = append(g.parts, &partition{
				stream: s, index: i, table: t,
				key: segment.PartitionKey{
					SinkRef: cfg.SinkRef, Namespace: s.Namespace, Partition: strconv.Itoa(i), Schema: fp,
				},
				offsetKey: g.OffsetKey(s.Namespace, i),
			})
		}
	}
	return g
}

func (c Config) withDefaults() Config {
	if c.Streams == nil {
		c.Streams = DefaultStreams()
	}
	if c.SinkRef == "" {
		c.SinkRef = DefaultSinkRef
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Epoch.IsZero() {
		c.Epoch = DefaultEpoch
	}
	if c.RetryBase <= 0 {
		c.RetryBase = retryBaseDefault
	}
	if c.RetryMax < c.RetryBase {
		c.RetryMax = max(retryMaxDefault, c.RetryBase)
	}
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// OffsetKey is the offset key of a namespace's partition.
func (g *Generator) OffsetKey(namespace string, partition int) string {
	return g.cfg.KeyPrefix + "/" + namespace + "/" + strconv.Itoa(partition)
}

// Stats are a generator's counters since New.
type Stats struct {
	// RowsIngested: rows of units handed to ingest that are acked or
	// still awaiting their answer (each unit once, however often retried);
	// a unit given up — stopped, refused for good, unanswered — leaves it.
	RowsIngested uint64
	RowsAcked    uint64 // rows of units answered nil (committed now, or before a restart)
	UnitsAcked   uint64
	Retries      uint64 // resubmissions, for any reason
	// Unknowns counts the answers that left a unit's outcome unknown (a
	// failed log write, a host that stopped answering): each was retried.
	Unknowns uint64
}

// Stats returns the counters. Safe from any goroutine.
func (g *Generator) Stats() Stats {
	return Stats{
		RowsIngested: g.rowsIngested.Load(),
		RowsAcked:    g.rowsAcked.Load(),
		UnitsAcked:   g.unitsAcked.Load(),
		Retries:      g.retries.Load(),
		Unknowns:     g.unknowns.Load(),
	}
}

// Positions returns, per offset key, the next offset each partition will
// produce: where Run started it plus what has been acked since. Safe from
// any goroutine.
func (g *Generator) Positions() segment.Offsets {
	var o segment.Offsets
	for _, p := range g.parts {
		o = o.Advance(p.offsetKey, p.next.Load())
	}
	return o
}

// Records builds the records [from, from+n) of a namespace's partition —
// the very batch Run would submit for that range. The caller releases it.
func (g *Generator) Records(namespace string, partition int, from uint64, n int) (arrow.RecordBatch, error) {
	for _, p := range g.parts {
		if p.stream.Namespace == namespace && p.index == partition {
			return g.build(p, from, n), nil
		}
	}
	return nil, fmt.Errorf("generator: no partition %d of namespace %q", partition, namespace)
}

// build makes the batch for offsets [from, from+n) of p.
func (g *Generator) build(p *partition, from uint64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(g.cfg.Allocator, p.table.schema)
	defer b.Release()
	b.Reserve(n)
	for i := range uint64(n) {
		off := from + i
		at := g.cfg.Epoch.Add(time.Duration(off) * p.table.step)
		p.table.fill(b, seedFor(p.stream.Namespace, p.index, off), off, at)
	}
	return b.NewRecordBatch()
}

// Run produces every stream until ctx ends, every snapshot stream is
// complete and there is no unbounded one, or ingest fails for good. Each
// partition resumes at offsets[OffsetKey(namespace, partition)] (0 if
// absent) — pass the host's recovered offsets view — and has at most one
// unit in flight: the engine's offsets are high-water marks, so a later
// unit committing ahead of an unanswered earlier one would skip it.
//
// Answers, per unit:
//   - nil: acked; the partition moves on.
//   - engine.ErrResourceExhausted, engine.ErrNotReady: backpressure or
//     recovery still running; the same unit (same rows, same offsets) is
//     retried after a jittered, growing backoff.
//   - any answer once ctx has ended: the host is shutting down; stop.
//   - engine.ErrInvalidUnit, or engine.ErrClosed while ctx lives (the
//     host failed closed): the partition stops and Run returns the error
//     once every partition has stopped (the others are told to stop too).
//   - anything else — engine.ErrUnknownOutcome (a log write failed: the
//     disk filled, an fsync error), storage.ErrUnanswered: the unit may or
//     may not be committed. The same unit (same rows, same offsets) is
//     retried after the backoff, logged: the host recognises a unit it
//     committed by its offset, so the retry settles it either way — as
//     every other source does.
//
// Ending ctx stops producing but does not abandon a unit in flight: its
// ingest call runs on without ctx's cancellation until answered, so that
// a host closing gracefully (Host.Close commits and acks what it holds)
// can still ack it.
func (g *Generator) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	resume := make([]any, 0, 2*len(g.parts))
	for _, p := range g.parts {
		v, _ := offsets.Get(p.offsetKey)
		p.next.Store(v)
		resume = append(resume, p.offsetKey, v)
	}
	g.cfg.Logger.Info("generator: resuming from offsets", resume...)
	var wg sync.WaitGroup
	errs := make([]error, len(g.parts))
	for i, p := range g.parts {
		wg.Go(func() {
			if errs[i] = g.produce(runCtx, ctx, ingest, p); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// produce runs one partition. stopCtx ends production; ingest calls are
// detached from it (see Run).
func (g *Generator) produce(stopCtx, parent context.Context, ingest IngestFunc, p *partition) error {
	ingestCtx := context.WithoutCancel(parent)
	pace := newPacer(p.stream.RowsPerSecond/float64(p.stream.Partitions), g.now(), p.next.Load())
	for {
		next := p.next.Load()
		n := uint64(p.stream.BatchRows)
		if total := p.stream.TotalRows; total != 0 {
			if next >= total {
				g.cfg.Logger.Info("generator: snapshot complete", "namespace", p.stream.Namespace,
					"partition", p.index, "rows", total)
				return nil
			}
			n = min(n, total-next)
		}
		if err := g.sleep(stopCtx, pace.wait(g.now(), next, n)); err != nil {
			return nil // stopped
		}
		if err := g.submit(stopCtx, ingestCtx, ingest, p, next, int(n)); err != nil {
			if errors.Is(err, errStopped) {
				return nil
			}
			return fmt.Errorf("generator: %s from offset %d: %w", p.offsetKey, next, err)
		}
		p.next.Store(next + n)
	}
}

// errStopped: the partition stopped between units, without error.
var errStopped = errors.New("generator: stopped")

// submit ingests offsets [from, from+n) of p until acked, resending the
// same unit after a backoff while the answer may change (sources.Judge:
// backpressure, not ready, outcome unknown).
func (g *Generator) submit(stopCtx, ingestCtx context.Context, ingest IngestFunc, p *partition, from uint64, n int) error {
	batch := g.build(p, from, n)
	defer batch.Release()
	u := engine.Unit{
		Key:     p.key,
		Schema:  p.table.schema,
		Batches: []arrow.RecordBatch{batch},
		Offsets: segment.Offsets{{Key: p.offsetKey, Value: from + uint64(n)}},
	}
	g.rowsIngested.Add(uint64(n))
	acked := false
	defer func() {
		if !acked {
			g.rowsIngested.Add(-uint64(n)) // given up: no longer ingested
		}
	}()
	backoff := g.cfg.RetryBase
	for {
		err := ingest(ingestCtx, u)
		switch sources.Judge(stopCtx, err) {
		case sources.Acked:
			acked = true
			g.rowsAcked.Add(uint64(n))
			g.unitsAcked.Add(1)
			return nil
		case sources.Stopped:
			return errStopped
		case sources.Invalid, sources.Refuses:
			return err
		case sources.Later:
		case sources.Unknown:
			g.unknowns.Add(1)
			g.cfg.Logger.Warn("generator: ingest failed; retrying the same unit", "offset_key", p.offsetKey,
				"from", from, "rows", n, "retry_in", backoff, "err", err)
		}
		g.retries.Add(1)
		// Jitter over the upper half of the backoff, so partitions
		// refused together do not all come back together.
		d := backoff/2 + rand.N(backoff/2+1)
		if g.sleep(stopCtx, d) != nil {
			return errStopped
		}
		backoff = min(2*backoff, g.cfg.RetryMax)
	}
}
