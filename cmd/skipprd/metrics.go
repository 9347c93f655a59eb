package main

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sinks/iceberg"
	"github.com/skipprd/skipprd/storage"
)

// engineCollector exports the engine's Stats and the S3 store's request
// counts, read at scrape time: one engine query through the loop
// (bounded by adminQueryWait) per scrape. The engine's counters start at
// zero with each process, like any Prometheus counter.
type engineCollector struct {
	d *daemon
}

func newEngineCollector(d *daemon) *engineCollector { return &engineCollector{d: d} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("skipprd_"+name, help, labels, nil)
}

// statMetric is one metric read from engine.Stats.
type statMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(engine.Stats) float64
}

func counter(name, help string, v func(engine.Stats) uint64) statMetric {
	return statMetric{desc(name, help), prometheus.CounterValue, func(s engine.Stats) float64 { return float64(v(s)) }}
}

func gauge(name, help string, v func(engine.Stats) int64) statMetric {
	return statMetric{desc(name, help), prometheus.GaugeValue, func(s engine.Stats) float64 { return float64(v(s)) }}
}

var statMetrics = []statMetric{
	counter("units_rejected_total", "Units refused (backpressure or invalid).", func(s engine.Stats) uint64 { return s.UnitsRejected }),
	counter("units_duplicate_total", "Units answered as already committed or pending.", func(s engine.Stats) uint64 { return s.UnitsDuplicate }),
	counter("bytes_acked_total", "Bytes of units acked.", func(s engine.Stats) uint64 { return s.BytesAcked }),
	counter("commits_total", "Segments committed.", func(s engine.Stats) uint64 { return s.Commits }),
	counter("persist_failures_total", "Segment persists that failed and were retried.", func(s engine.Stats) uint64 { return s.PersistFailures }),
	counter("sink_failures_total", "Compaction jobs a sink failed (retried).", func(s engine.Stats) uint64 { return s.SinkFailures }),
	counter("segments_reclaimed_total", "Segments applied everywhere and deleted.", func(s engine.Stats) uint64 { return s.SegmentsReclaimed }),
	counter("store_requests_total", "Object-store requests the engine issued, retries included.", func(s engine.Stats) uint64 { return s.Requests }),
	counter("store_retries_total", "Object-store requests that retried a failed one.", func(s engine.Stats) uint64 { return s.Retries }),
	counter("fence_checks_total", "Reads of the writer object before deletes.", func(s engine.Stats) uint64 { return s.FenceChecks }),
	counter("sweeps_total", "Orphan sweeps run.", func(s engine.Stats) uint64 { return s.Sweeps }),
	counter("orphans_swept_total", "Orphaned or fenced segments deleted by sweeps.", func(s engine.Stats) uint64 { return s.OrphansSwept }),
	counter("wal_syncs_total", "Disk WAL group commits (fsyncs) that succeeded.", func(s engine.Stats) uint64 { return s.WALSyncs }),
	counter("wal_sync_failures_total", "Disk WAL writes or fsyncs that failed.", func(s engine.Stats) uint64 { return s.WALSyncFailures }),
	gauge("live_segments", "Committed segments not yet reclaimed.", func(s engine.Stats) int64 { return int64(s.LiveSegments) }),
	gauge("segment_bytes", "Body bytes of the committed segments not yet reclaimed.", func(s engine.Stats) int64 { return s.SegmentBytes }),
	gauge("offset_keys", "Source offsets the WAL's offsets view holds, floors included; at most 262144 (what _offsets holds).",
		func(s engine.Stats) int64 { return int64(s.OffsetKeys) }),
	gauge("wal_log_bytes", "Bytes in the disk WAL's log segments (0 with the S3 WAL).", func(s engine.Stats) int64 { return s.WALLogBytes }),
	gauge("memory_pool_bytes", "The engine's memory pool.", func(s engine.Stats) int64 { return s.PoolBytes }),
	gauge("admission_limit_bytes", "Admission's share of the pool.", func(s engine.Stats) int64 { return s.AdmissionBytes }),
	gauge("admission_used_bytes", "Bytes of units held against admission.", func(s engine.Stats) int64 { return s.HeldBytes }),
	gauge("body_cache_limit_bytes", "The body cache's share of the pool.", func(s engine.Stats) int64 { return s.CacheBytesMax }),
	gauge("body_cache_used_bytes", "Bytes the body cache holds or has reserved.", func(s engine.Stats) int64 { return s.CacheBytes }),
	gauge("body_cache_pinned_bytes", "Of the body cache's bytes, the bodies running jobs read (never evicted).", func(s engine.Stats) int64 { return s.CachePinnedBytes }),
}

// nsMetric is one per-namespace counter.
type nsMetric struct {
	desc  *prometheus.Desc
	value func(engine.NamespaceStats) uint64
}

var nsMetrics = []nsMetric{
	{desc("units_submitted_total", "Units submitted, per namespace.", "namespace"), func(n engine.NamespaceStats) uint64 { return n.UnitsSubmitted }},
	{desc("rows_submitted_total", "Rows submitted, per namespace.", "namespace"), func(n engine.NamespaceStats) uint64 { return n.RowsSubmitted }},
	{desc("units_acked_total", "Units acked, per namespace.", "namespace"), func(n engine.NamespaceStats) uint64 { return n.UnitsAcked }},
	{desc("rows_acked_total", "Rows acked, per namespace.", "namespace"), func(n engine.NamespaceStats) uint64 { return n.RowsAcked }},
	{desc("jobs_applied_total", "Compaction jobs applied to sinks, per namespace.", "namespace"), func(n engine.NamespaceStats) uint64 { return n.JobsApplied }},
	{desc("rows_applied_total", "Rows applied to sinks, per namespace.", "namespace"), func(n engine.NamespaceStats) uint64 { return n.RowsApplied }},
}

var (
	descAlerts   = desc("alerts_total", "Engine alerts raised, by kind.", "kind")
	descAckDelay = desc("ack_delay_seconds", "Submit-to-ack time of acked units.")
	descPersist  = desc("persist_seconds", "Persist time of one segment, seal to commit.")
	descS3       = desc("s3_requests_total", "S3 requests by operation and outcome.", "op", "outcome")
	descFailing  = desc("failing_seconds", "How long each operation the engine is retrying has been failing (absent when it works).", "op")
	descStatsUp  = desc("engine_stats_up", "1 if this scrape read the engine's stats, 0 if its loop did not answer in time.")
	descWaitB    = desc("lane_waiting_bytes", "Payload bytes of a lane's open job, waiting to fill its file or its flush interval (absent when none waits).", "sink", "namespace")
	descWaitS    = desc("lane_waiting_seconds", "How long a lane's open job has waited since its first rows committed (absent when none waits).", "sink", "namespace")
	descWaitSeg  = desc("lane_waiting_segments", "Segments a lane's open job holds rows of, and so keeps in the WAL (absent when none waits).", "sink", "namespace")
)

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range statMetrics {
		ch <- m.desc
	}
	for _, m := range nsMetrics {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{descAlerts, descAckDelay, descPersist, descS3, descStatsUp, descFailing, descWaitB, descWaitS, descWaitSeg, descIceberg, descKafkaLag, descKafkaGaps, descKafkaGapRecords, descKafkaCommits} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	if s3, ok := c.d.s3Stats(); ok {
		collectS3(ch, s3)
	}
	collectIceberg(ch, c.d.icebergs)
	collectKafka(ch, c.d.sources)
	ctx, cancel := context.WithTimeout(context.Background(), adminQueryWait)
	defer cancel()
	st, err := c.d.host.Stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descStatsUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descStatsUp, prometheus.GaugeValue, 1)
	for _, m := range statMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(st))
	}
	for _, ns := range st.Namespaces {
		for _, m := range nsMetrics {
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.value(ns)), ns.Namespace)
		}
	}
	for _, j := range st.OpenJobs {
		ch <- prometheus.MustNewConstMetric(descWaitB, prometheus.GaugeValue, float64(j.Bytes), j.SinkRef, j.Namespace)
		ch <- prometheus.MustNewConstMetric(descWaitS, prometheus.GaugeValue, j.Waited.Seconds(), j.SinkRef, j.Namespace)
		ch <- prometheus.MustNewConstMetric(descWaitSeg, prometheus.GaugeValue, float64(j.Segments), j.SinkRef, j.Namespace)
	}
	for _, k := range engine.AlertKinds() {
		ch <- prometheus.MustNewConstMetric(descAlerts, prometheus.CounterValue, float64(st.AlertsByKind[k]), k.String())
	}
	ch <- histogram(descAckDelay, st.AckDelay)
	ch <- histogram(descPersist, st.Persist)
	if ts, err := c.d.host.Troubles(ctx); err == nil {
		for _, t := range ts {
			ch <- prometheus.MustNewConstMetric(descFailing, prometheus.GaugeValue, t.Lasted.Seconds(), t.Op)
		}
	}
}

// collectS3 exports every (operation, outcome) pair, zeros included, so
// a rate over a pair that starts failing has a series to start from.
func collectS3(ch chan<- prometheus.Metric, s3 storage.S3Stats) {
	for _, op := range storage.S3Ops() {
		for _, out := range storage.S3Outcomes() {
			ch <- prometheus.MustNewConstMetric(descS3, prometheus.CounterValue, float64(s3.Count(op, out)), op.String(), out.String())
		}
	}
}

// histogram converts an engine histogram (per-bucket counts) into
// Prometheus's cumulative buckets, in seconds.
func histogram(d *prometheus.Desc, h engine.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(engine.LatencyBounds))
	var cum uint64
	for i, bound := range engine.LatencyBounds {
		cum += h.Buckets[i]
		buckets[bound.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets)
}

// namedIceberg is an Iceberg sink and its name in the pipeline file.
type namedIceberg struct {
	name string
	sink *iceberg.Sink
}

var descIceberg = desc("iceberg_commit_outcomes_total", "What an Iceberg sink's commit protocol met, by sink and outcome: "+
	"committed, found_in_snapshot and found_by_watermark (a replay found applied), conflict_rebased (another writer committed first), "+
	"conflict_found_landed, ambiguous_landed, ambiguous_lost, lookup_failed, refused, expired, expire_failed, maintain_skipped; "+
	"and of its small-file rewrites: rewritten, rewrite_landed, rewrite_rebased, rewrite_abandoned, rewrite_failed, rewrite_schemas_split.", "sink", "outcome")

// collectIceberg exports every Iceberg sink's counts, zeros included.
func collectIceberg(ch chan<- prometheus.Metric, sinks []namedIceberg) {
	for _, s := range sinks {
		st := s.sink.Stats()
		for _, o := range []struct {
			name string
			n    int64
		}{
			{"committed", st.Committed}, {"found_in_snapshot", st.FoundSnapshot}, {"found_by_watermark", st.FoundWatermark},
			{"conflict_rebased", st.Conflicts}, {"conflict_found_landed", st.ConflictLanded}, {"ambiguous_landed", st.AmbiguousLanded},
			{"ambiguous_lost", st.AmbiguousLost}, {"lookup_failed", st.LookupFailed}, {"refused", st.Refused},
			{"expired", st.Expired}, {"expire_failed", st.ExpireFailed}, {"maintain_skipped", st.MaintainSkipped},
			{"rewritten", st.Rewritten}, {"rewrite_landed", st.RewriteLanded}, {"rewrite_rebased", st.RewriteConflicts},
			{"rewrite_abandoned", st.RewriteAbandoned}, {"rewrite_failed", st.RewriteFailed}, {"rewrite_schemas_split", st.RewriteSplit},
		} {
			ch <- prometheus.MustNewConstMetric(descIceberg, prometheus.CounterValue, float64(o.n), s.name, o.name)
		}
	}
}

var (
	descKafkaLag = desc("kafka_lag_records", "Records of a Kafka partition not yet acked, behind its high watermark as of the last fetch.",
		"source", "topic", "partition")
	descKafkaGaps       = desc("kafka_gaps_total", "Ranges of records retention removed before a Kafka source ingested them, skipped (on_gap: skip).", "source")
	descKafkaGapRecords = desc("kafka_gap_records_total", "Records in those ranges.", "source")
	descKafkaCommits    = desc("kafka_group_commits_total", "Commits of acked offsets to a Kafka source's consumer group (group:), for lag tools only; outcome ok or error.",
		"source", "outcome")
)

// collectKafka exports each Kafka source's lag per partition, the gaps
// it skipped and its commits to its group.
func collectKafka(ch chan<- prometheus.Metric, sources []source) {
	for _, s := range sources {
		k, ok := s.(*kafkaSource)
		if !ok {
			continue
		}
		st := k.src.Stats()
		for _, l := range st.Lag {
			ch <- prometheus.MustNewConstMetric(descKafkaLag, prometheus.GaugeValue, float64(l.Records), k.name, l.Topic, strconv.Itoa(int(l.Partition)))
		}
		ch <- prometheus.MustNewConstMetric(descKafkaGaps, prometheus.CounterValue, float64(st.Gaps), k.name)
		ch <- prometheus.MustNewConstMetric(descKafkaGapRecords, prometheus.CounterValue, float64(st.GapRecords), k.name)
		if k.spec.Group != "" {
			ch <- prometheus.MustNewConstMetric(descKafkaCommits, prometheus.CounterValue, float64(st.Commits), k.name, "ok")
			ch <- prometheus.MustNewConstMetric(descKafkaCommits, prometheus.CounterValue, float64(st.CommitErrors), k.name, "error")
		}
	}
}
