package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// reporting is what the engine tells its operator: the alert queue, the
// troubles being retried, coverage marks, counters and per-namespace
// statistics.
type reporting struct {
	alerts     []Alert                    // the alert queue, oldest first; INVARIANT: len ≤ AlertsMax (alert)
	trouble    troubles                   // what is failing and being retried (trouble.go)
	marks      Marks                      // coverage marks passed (coverage.go)
	stats      Stats                      // the counters Stats returns
	namespaces map[string]*NamespaceStats // Stats.Namespaces; INVARIANT: len ≤ NamespacesTrackedMax (namespace)
}

// Stats are the engine's counters, for progress lines, metrics and the
// simulator's summary. They never influence behaviour.
type Stats struct {
	UnitsSubmitted    uint64
	UnitsAcked        uint64 // acks for units this incarnation committed
	UnitsDuplicate    uint64 // submissions answered from the offsets view or joined to a pending unit
	UnitsRejected     uint64
	RowsAcked         uint64
	BytesAcked        uint64
	Commits           uint64
	PersistFailures   uint64
	InDoubt           uint64 // marker outcomes settled by a later read
	JobsApplied       uint64 // compaction jobs applied to their sinks
	RowsApplied       uint64
	SinkFailures      uint64
	SegmentsReclaimed uint64
	Requests          uint64 // object-store requests issued (including retries)
	Retries           uint64 // object-store requests that were retries of a failed one
	FenceChecks       uint64 // reads of the writer object before deletes (fence.go)
	Sweeps            uint64 // orphan sweeps run over a listing (sweep.go)
	RecoveryRuns      uint64
	RecoveryOps       uint64 // requests of the last successful recovery, retries included
	OrphansSwept      uint64
	UploadsAborted    uint64
	Alerts            uint64      // alerts raised; also the Seq of the last one (alerts.go)
	AlertsByKind      AlertCounts // Alerts per kind

	// Idempotency keys (keystore*.go).
	KeyLookups    uint64 // submissions whose key the filters admitted, looked up in runs
	KeyBlockReads uint64 // run blocks read by lookups
	KeyFalseHits  uint64 // blocks read that did not hold the key
	OffsetKeys    int    // source offsets the view holds (floors included): at most OffsetsViewMax
	KeyRuns       int    // runs listed in the key store's buckets
	KeyMemBytes   int64  // what the key store holds in memory

	// Local-disk WAL.
	WALSyncs           uint64 // group commits (fsyncs) that succeeded
	WALSyncFailures    uint64 // writes or fsyncs that failed (each poisons a segment)
	WALSegmentsCreated uint64
	WALSegmentsDeleted uint64
	WALReplayedUnits   uint64 // units recovery replayed from the log
	WALCorruptions     uint64 // partitions halted on corruption
	WALLogBytes        int64  // bytes in the log's segments now (0 with the S3 WAL)

	LiveSegments int // owned segments not yet reclaimed
	// OpenJobs are the lanes' jobs waiting for their cut (to fill their
	// file or their interval), in lane creation order.
	OpenJobs     []OpenJob
	SegmentBytes int64         // body bytes of the owned segments
	PersistEMA   time.Duration // moving average of one snapshot's persist time
	AckDelayEMA  time.Duration // moving average of submit-to-ack time
	Persist      Histogram     // one snapshot's persist time, seal to commit
	AckDelay     Histogram     // submit-to-ack time of each acked unit

	// The memory pool (memory.go) and its use.
	PoolBytes      int64 // the pool: a share of the memory the Memory port reports
	AdmissionBytes int64 // admission's share of the pool
	HeldBytes      int64 // bytes of units held (appended, not yet committed) against AdmissionBytes
	CacheBytesMax  int64 // the body cache's share of the pool
	CacheBytes     int64 // bytes the body cache holds or has reserved
	// CachePinnedBytes: of CacheBytes, bodies a running job reads
	// (pinned: never evicted, so they can outgrow a shrunk share).
	CachePinnedBytes int64

	// Namespaces are the per-namespace counters, sorted by name.
	Namespaces []NamespaceStats
}

// NamespaceStats count one namespace's units (Unit.Key.Namespace) and
// jobs. Namespaces past NamespacesTrackedMax are counted together under
// NamespaceOther.
type NamespaceStats struct {
	Namespace      string
	UnitsSubmitted uint64
	RowsSubmitted  uint64
	UnitsAcked     uint64
	RowsAcked      uint64
	JobsApplied    uint64
	RowsApplied    uint64
}

// NamespacesTrackedMax bounds the namespaces counted one by one: a source
// that invents a namespace per record must not grow the engine's memory
// (and a metric's series) without bound.
const NamespacesTrackedMax = 1024

// NamespaceOther collects the namespaces beyond NamespacesTrackedMax. It
// cannot clash with a real namespace's name only if no source uses it;
// the angle brackets make that unlikely.
const NamespaceOther = "<other>"

// LatencyBounds are the upper bounds of the latency histograms' buckets;
// a last bucket counts everything above the last bound.
var LatencyBounds = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute,
}

// Histogram counts durations into LatencyBounds' buckets (not
// cumulative: Buckets[i] counts d ≤ LatencyBounds[i] and above the bound
// before; the last counts the rest).
type Histogram struct {
	Buckets [len(LatencyBounds) + 1]uint64
	Count   uint64
	Sum     time.Duration
}

// observe counts d into its bucket.
//
// REQUIRES: d ≥ 0 (a latency; a negative one would land in the first
// bucket and take from Sum).
func (h *Histogram) observe(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("engine: a latency observed is not negative: %v", d))
	}
	i, _ := slices.BinarySearch(LatencyBounds[:], d) // first bound ≥ d
	h.Buckets[i]++
	h.Count++
	h.Sum += d
}

// Progress returns the few gauges an oracle reads at every step, without
// the copies Stats makes: segments owned, jobs applied, alerts raised and
// sink failures.
func (e *Engine) Progress() (live int, applied, alerts, sinkFailures uint64) {
	return len(e.segs), e.stats.JobsApplied, e.stats.Alerts, e.stats.SinkFailures
}

// Stats returns a copy of the counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.LiveSegments = len(e.segs)
	for _, st := range e.segs {
		s.SegmentBytes += st.Index.BodyBytes
	}
	if l, ok := e.dlog.(*diskLog); ok {
		s.WALLogBytes = l.totalBytes()
		ls := l.log.Stats()
		s.WALSyncs, s.WALSyncFailures = ls.Syncs, ls.SyncFailures
		s.WALSegmentsCreated, s.WALSegmentsDeleted = ls.SegmentsCreated, ls.SegmentsDeleted
	}
	s.KeyRuns, s.KeyMemBytes = e.keys.runs(), e.keys.memBytes()
	s.OffsetKeys = e.committed.len()
	s.PersistEMA = e.persistEMA
	s.AckDelayEMA = e.ackDelayEMA
	s.PoolBytes, s.AdmissionBytes, s.CacheBytesMax = e.budget.pool, e.budget.admission, e.budget.cache
	s.HeldBytes = e.held
	s.CacheBytes = e.cache.used + e.cache.reserved
	s.CachePinnedBytes = e.cache.pinnedBytes()
	s.OpenJobs = e.OpenJobs()
	s.Namespaces = make([]NamespaceStats, 0, len(e.namespaces))
	//engine:orderless — sorted right below
	for _, ns := range e.namespaces {
		s.Namespaces = append(s.Namespaces, *ns)
	}
	slices.SortFunc(s.Namespaces, func(a, b NamespaceStats) int { return strings.Compare(a.Namespace, b.Namespace) })
	return s
}

// namespace returns the counters of ns, creating them (or, beyond
// NamespacesTrackedMax, returning NamespaceOther's).
func (e *Engine) namespace(ns string) *NamespaceStats {
	if c, ok := e.namespaces[ns]; ok {
		return c
	}
	if len(e.namespaces) >= NamespacesTrackedMax-1 { // one slot stays for NamespaceOther
		ns = NamespaceOther
		if c, ok := e.namespaces[ns]; ok {
			return c
		}
	}
	c := &NamespaceStats{Namespace: ns}
	e.namespaces[ns] = c
	if len(e.namespaces) > NamespacesTrackedMax {
		e.broken("namespaces counted ≤ NamespacesTrackedMax: %d counted after adding %q, limit %d", len(e.namespaces), ns, NamespacesTrackedMax)
	}
	return c
}

// countAcked counts an acked unit, in total and in its namespace.
func (e *Engine) countAcked(u *unit) {
	if u.bytes <= 0 || u.rows < 0 {
		// The counters are unsigned: a negative would count as 2⁶⁴ − n.
		e.broken("an acked unit counts bytes and rows ≥ 0: unit %d of partition %d, %d bytes, %d rows", u.seq, u.part, u.bytes, u.rows)
		return
	}
	if len(u.dones) == 0 {
		// Counted as its submitters are told (commit, the disk WAL's
		// fsync, a replayed unit's retries): none left means it was
		// answered already, and is counted twice.
		e.broken("an acked unit has submitters to ack: unit %d of partition %d, %d bytes, replayed %t", u.seq, u.part, u.bytes, u.replayed)
		return
	}
	e.stats.UnitsAcked++
	e.stats.BytesAcked += uint64(u.bytes)
	e.stats.RowsAcked += uint64(u.rows)
	c := e.namespace(u.ns)
	c.UnitsAcked++
	c.RowsAcked += uint64(u.rows)
}

// observeAckDelay records a fresh ack's submit-to-ack time.
func (e *Engine) observeAckDelay(u *unit) {
	d := e.now() - u.since
	if d < 0 {
		e.broken("submit-to-ack time ≥ 0 (the monotonic clock never goes back): unit %d of partition %d appended at %v, acked at %v", u.seq, u.part, u.since, u.since+d)
		return
	}
	e.ackDelayEMA = time.Duration(ema(float64(e.ackDelayEMA), float64(d)))
	e.stats.AckDelay.observe(d)
}
