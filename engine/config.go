package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// Limits the writer's tuning is clamped to (docs/DESIGN.md §6.2).
const (
	TargetBytesMin   = 4 << 20
	TargetBytesMax   = 64 << 20
	QueueCapacityMin = 1
	QueueCapacityMax = 32
	DefaultPartBytes = 8 << 20
	DefaultMaxDelay  = 60 * time.Second
	AttemptsMax      = 5 // attempts per persist step before the step fails
	// DefaultLiveSegmentsMax: 1024 segments of the 8 MiB default target
	// is an 8 GiB backlog, recovered with about 2048 small reads.
	DefaultLiveSegmentsMax = 1024
	// CloseReclaimGrace: how long a graceful close waits by default
	// (Config.StopGrace), from its start, for reclaims (checkpoint PUTs,
	// three DELETEs) to finish; the next start finishes any it cuts
	// short.
	CloseReclaimGrace = 10 * time.Second
	flushDelayMin     = 100 * time.Millisecond
	flushDelayMax     = 500 * time.Millisecond
	flushDelayCold    = 250 * time.Millisecond
	persistEMAWeight  = 0.2
	persistEMAFactor  = 4
	markerReadLimit   = 64 << 20 // ≥ segment.MarkerBytesMax; checked in a test
	writerObjectLimit = 128 << 10
)

// Config is the engine's configuration. Production derives it from the
// environment (DeriveConfig); the simulator sets it directly, with small
// sizes so that many segments and multipart uploads happen in a short run.
type Config struct {
	Prefix   string // object key prefix ("" for none)
	Pipeline string // pipeline name; one writer per pipeline

	TargetBytes   int64         // flush when live bytes reach this (WAL_BYTES_PER_FILE)
	MaxDelay      time.Duration // coarse ceiling on any flush delay (WAL_MAX_DELAY_SECONDS)
	QueueCapacity int           // sealed snapshots that may wait for the writer

	PartBytes       int64 // multipart part size; a body up to this size is one PUT
	PartConcurrency int   // parts of one upload in flight at once

	// CompactionConcurrency bounds compaction jobs in flight at once.
	CompactionConcurrency int
	// LiveSegmentsMax bounds the WAL: segments committed and not yet
	// reclaimed, plus the snapshots on their way to becoming segments.
	// At the limit, units are refused with ErrResourceExhausted until
	// reclaim frees a slot — a sink slower than ingest (or down) turns
	// into backpressure, and recovery's cost (one marker and one bitmap
	// read per live segment) stays bounded.
	LiveSegmentsMax int
	// BitmapDelay: an incomplete segment's completion bitmap is written
	// this long after a job of it finished (coalescing writes).
	BitmapDelay time.Duration
	// IdempotencyWindow: how long an idempotency key is remembered after
	// its unit was submitted (up to one bucket longer, checkpoint.go); a
	// retry later than that is a new unit. Its buckets' names depend on
	// it: keep it across restarts.
	IdempotencyWindow time.Duration
	// OffsetsViewMax bounds the source offset keys the engine remembers
	// (idempotency keys live in the key store and are bounded by memory
	// instead, keystore.go), so that the one _offsets checkpoint object
	// can always hold them all: a unit that would grow the view past it
	// is refused (ErrResourceExhausted). Source offsets do not expire.
	// 0 means segment.CheckpointEntriesMax, also its upper limit.
	OffsetsViewMax int
	// StreamChunkBytes: a body larger than the cache is streamed in
	// ranged reads of this size.
	StreamChunkBytes int64
	// MemoryPoll: how often the memory hint is re-read (docs/DESIGN.md §10).
	MemoryPoll time.Duration
	// SweepInterval: how often the orphan sweeper lists the log again
	// after recovery.
	SweepInterval time.Duration
	// CheckpointDelay: reclaims wait up to this long so that one offsets
	// checkpoint write covers all of them.
	CheckpointDelay time.Duration

	RetryBase time.Duration // first backoff; doubles per attempt, upper half jittered
	RetryMax  time.Duration // backoff ceiling

	// FenceWait is how long recovery (after claiming its epoch) and the
	// settling of an in-doubt commit wait before reading the store, so
	// that a request a dead or superseded writer left in flight has landed
	// or died and everything that landed shows in LIST: it must exceed the
	// store's request lifetime (the S3 adapter's request timeout) plus the
	// store's LIST lag (zero on S3 today).
	FenceWait time.Duration
	// OrphanGrace: orphan bodies and stale uploads younger than this are
	// left alone by the sweeper.
	OrphanGrace time.Duration
	// RecoveryConcurrency bounds marker reads in flight during recovery.
	RecoveryConcurrency int
	// RecoveryGiveUp: how long recovery may keep failing (each attempt's
	// failure is a trouble event, trouble.go) before the engine stops
	// with ErrRecoveryGaveUp and the last failure, for a supervisor to
	// restart it or an operator to see; 0: never (keep retrying). A
	// refusal that no retry changes (ErrRefused) stops it at once.
	RecoveryGiveUp time.Duration
	// LiveBytesMax bounds the live snapshot's bytes (roomFor): past
	// TargetBytes live grows only while the writer's queue is full (a
	// slow store), and its seal must still encode (segment.BodyBytesMax).
	// A unit that does not fit finds live sealed first, or backpressure
	// (the S3 WAL) or a wait in the backlog (the disk WAL); a bound below
	// TargetBytes seals live at the bound. 0 means liveBytesMax, also its
	// upper limit.
	LiveBytesMax int64
	// StopGrace: how long a graceful close waits, from its start, for
	// reclaims to finish (Close; the jobs that can start always run to
	// their end); a segment whose reclaim it cuts short is left in the
	// WAL for the next start. 0 means CloseReclaimGrace.
	StopGrace time.Duration

	// Lanes say, per sink_ref, when a lane's open compaction job is cut
	// (cut.go); a sink missing here takes DefaultLanes. The zero
	// LaneLimits cut at every segment: a job per group per segment.
	Lanes        map[string]LaneLimits
	DefaultLanes LaneLimits
	// ValveSegments and ValveBytes are the WAL pressure valve: once the
	// owned segments reach ValveSegments, or their bytes ValveBytes, the
	// next segment cuts every open job that pins a segment older than the
	// newest half of that — so lanes waiting to fill a file never hold
	// the log at LiveSegmentsMax. 0: LiveSegmentsMax/2 (at least 1), and
	// ValveSegments × TargetBytes.
	ValveSegments int
	ValveBytes    int64

	// Disk, if set, makes the WAL the local disk (WAL_STORAGE=disk):
	// units are acked at the group-commit fsync, and memtable generations
	// become segments in Store later. nil: the S3 WAL.
	Disk *DiskWAL
}

// DeriveConfig computes production settings from the two operator inputs
// the design allows: the buffer threshold (BUFFER_THRESHOLD_BYTES) and the
// ingest thread count. Everything else is fixed or auto-tuned.
func DeriveConfig(prefix, pipeline string, bufferThresholdBytes int64, ingestThreads int, maxDelay time.Duration) Config {
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	return Config{
		Prefix:                prefix,
		Pipeline:              pipeline,
		TargetBytes:           min(max(bufferThresholdBytes, TargetBytesMin), TargetBytesMax),
		MaxDelay:              maxDelay,
		QueueCapacity:         min(max(ingestThreads, QueueCapacityMin), QueueCapacityMax),
		PartBytes:             DefaultPartBytes,
		PartConcurrency:       4,
		CompactionConcurrency: 8,
		LiveSegmentsMax:       DefaultLiveSegmentsMax,
		BitmapDelay:           time.Second,
		IdempotencyWindow:     24 * time.Hour,
		StreamChunkBytes:      8 << 20,
		MemoryPoll:            10 * time.Second,
		SweepInterval:         5 * time.Minute,
		CheckpointDelay:       2 * time.Second,
		RetryBase:             50 * time.Millisecond,
		RetryMax:              5 * time.Second,
		FenceWait:             35 * time.Second,
		OrphanGrace:           15 * time.Minute,
		RecoveryConcurrency:   16,
	}
}

// liveBytes is the live snapshot's bound in bytes (LiveBytesMax, or
// its default).
func (c Config) liveBytes() int64 {
	if c.LiveBytesMax == 0 {
		return liveBytesMax
	}
	return c.LiveBytesMax
}

// stopGrace is how long a graceful close waits (StopGrace, or its
// default).
//
// REQUIRES: c validated (New did): a negative grace would end the close's
// wait for reclaims before it began.
func (c Config) stopGrace() time.Duration {
	if c.StopGrace < 0 {
		panic(fmt.Sprintf("engine: a close's grace is not negative (Config.StopGrace validated): %v", c.StopGrace))
	}
	if c.StopGrace == 0 {
		return CloseReclaimGrace
	}
	return c.StopGrace
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Pipeline == "":
		return fmt.Errorf("engine: config: pipeline name is empty")
	case c.TargetBytes <= 0:
		return fmt.Errorf("engine: config: target bytes %d must be positive", c.TargetBytes)
	case c.MaxDelay <= 0:
		return fmt.Errorf("engine: config: max delay %v must be positive", c.MaxDelay)
	case c.QueueCapacity < QueueCapacityMin || c.QueueCapacity > QueueCapacityMax:
		return fmt.Errorf("engine: config: queue capacity %d outside %d..%d", c.QueueCapacity, QueueCapacityMin, QueueCapacityMax)
	case c.PartBytes <= 0 || c.PartConcurrency <= 0:
		return fmt.Errorf("engine: config: part size %d and concurrency %d must be positive", c.PartBytes, c.PartConcurrency)
	case c.CompactionConcurrency <= 0 || c.BitmapDelay < 0 || c.CheckpointDelay < 0 || c.IdempotencyWindow <= 0 || c.StreamChunkBytes <= 0 || c.MemoryPoll <= 0 || c.SweepInterval <= 0:
		return fmt.Errorf("engine: config: compaction concurrency %d, bitmap delay %v, idempotency window %v, stream chunk %d, memory poll %v, sweep interval %v",
			c.CompactionConcurrency, c.BitmapDelay, c.IdempotencyWindow, c.StreamChunkBytes, c.MemoryPoll, c.SweepInterval)
	case c.RetryBase <= 0 || c.RetryMax < c.RetryBase:
		return fmt.Errorf("engine: config: retry base %v / max %v", c.RetryBase, c.RetryMax)
	case c.FenceWait < 0 || c.OrphanGrace < 0:
		return fmt.Errorf("engine: config: fence wait %v and orphan grace %v must not be negative", c.FenceWait, c.OrphanGrace)
	case c.LiveSegmentsMax < 1:
		return fmt.Errorf("engine: config: live segments max %d must be at least 1", c.LiveSegmentsMax)
	case c.RecoveryGiveUp < 0 || c.StopGrace < 0:
		return fmt.Errorf("engine: config: recovery give-up %v and stop grace %v must not be negative", c.RecoveryGiveUp, c.StopGrace)
	case c.RecoveryConcurrency <= 0:
		return fmt.Errorf("engine: config: recovery concurrency %d must be positive", c.RecoveryConcurrency)
	}
	return c.validateParts()
}

// validateParts checks the valve, the offsets view, the lanes' limits and
// the disk WAL's settings.
func (c Config) validateParts() error {
	switch {
	case c.ValveSegments < 0 || c.ValveSegments > c.LiveSegmentsMax || c.ValveBytes < 0:
		return fmt.Errorf("engine: config: valve at %d segments (live segments max %d) or %d bytes", c.ValveSegments, c.LiveSegmentsMax, c.ValveBytes)
	case c.LiveBytesMax < 0 || c.LiveBytesMax > liveBytesMax:
		return fmt.Errorf("engine: config: live bytes max %d outside 0..%d", c.LiveBytesMax, liveBytesMax)
	case c.OffsetsViewMax < 0 || c.OffsetsViewMax > segment.CheckpointEntriesMax:
		return fmt.Errorf("engine: config: offsets view max %d outside 0..%d (what one checkpoint holds)", c.OffsetsViewMax, segment.CheckpointEntriesMax)
	}
	if err := c.DefaultLanes.Validate("default"); err != nil {
		return err
	}
	for _, ref := range slices.Sorted(maps.Keys(c.Lanes)) {
		if err := c.Lanes[ref].Validate(fmt.Sprintf("sink %q", ref)); err != nil {
			return err
		}
	}
	if c.Disk != nil {
		return c.Disk.Validate()
	}
	return nil
}

// LaneLimits say when a lane's open job is cut: at the first segment
// after its PARTs' payload bytes reach FileBytes, or its oldest PART has
// waited FlushInterval (cut.go). FileBytes 0 cuts at every segment (the
// interval is then unused).
type LaneLimits struct {
	FileBytes     int64
	FlushInterval time.Duration
}

// Validate reports limits no lane can follow; what names them in the
// message.
func (l LaneLimits) Validate(what string) error {
	switch {
	case l.FileBytes < 0 || l.FlushInterval < 0:
		return fmt.Errorf("engine: config: lanes of %s: file bytes %d and flush interval %v must not be negative", what, l.FileBytes, l.FlushInterval)
	case l.FileBytes > 0 && l.FlushInterval == 0:
		return fmt.Errorf("engine: config: lanes of %s: file bytes %d need a flush interval, or a quiet lane would wait for ever", what, l.FileBytes)
	}
	return nil
}

// Valve returns the pressure valve's thresholds, defaults filled in.
//
// REQUIRES: c validated (New did). Then the valve opens within the WAL's
// bound — 1 ≤ segments ≤ LiveSegmentsMax — at a positive byte count: a
// valve past the bound never opens before the WAL is full, one at 0
// bytes cuts every job at every segment.
func (c *Config) Valve() (segments int, bytes int64) {
	segments, bytes = c.ValveSegments, c.ValveBytes
	if segments == 0 {
		segments = max(c.LiveSegmentsMax/2, 1)
	}
	if bytes == 0 {
		bytes = int64(segments) * c.TargetBytes
	}
	if segments < 1 || segments > c.LiveSegmentsMax || bytes < 1 {
		panic(fmt.Sprintf("engine: the valve opens within the WAL's bound, at a positive size: %d segments (set %d, live segments max %d), %d bytes (set %d, target %d)",
			segments, c.ValveSegments, c.LiveSegmentsMax, bytes, c.ValveBytes, c.TargetBytes))
	}
	return segments, bytes
}

// LanesOf returns the limits of sink ref's lanes.
//
// REQUIRES: c validated (New did), and its Lanes map — which New shares
// with its caller — left as it was then: limits no lane can follow would
// hold a quiet lane's job open for ever, or cut at a negative size.
func (c *Config) LanesOf(ref string) LaneLimits {
	l, ok := c.Lanes[ref]
	if !ok {
		l = c.DefaultLanes
	}
	if err := l.Validate(ref); err != nil {
		panic(fmt.Sprintf("engine: a sink's lanes follow validated limits (was Config.Lanes changed after New?): %v", err))
	}
	return l
}

// SyncMode says when the disk WAL fsyncs (WAL_SYNC_MODE).
type SyncMode uint8

const (
	// SyncEveryBatch (SYNC, the default): a batch is written and fsynced
	// as soon as entries are queued and no sync is in flight; concurrent
	// writers pile into the next sync.
	SyncEveryBatch SyncMode = iota
	// BatchSync (BATCH_SYNC): batches are fsynced on a timer
	// (BatchSyncInterval). Fewer fsyncs, higher latency; still no unit
	// is acked before the fsync that covers it.
	BatchSync
)

func (m SyncMode) String() string {
	if m == BatchSync {
		return "BATCH_SYNC"
	}
	return "SYNC"
}

// Disk WAL defaults and limits (docs/DESIGN.md §9; docs/OPERATING.md
// "Local-disk WAL").
const (
	DefaultWALSegmentBytes      = 32 << 20
	DefaultWALBatchBytes        = 256 << 10
	DefaultWALCommitInterval    = 200 * time.Microsecond
	WALCommitIntervalMin        = 50 * time.Microsecond
	DefaultWALBatchSyncInterval = 10 * time.Millisecond
	DefaultWALPinnedMax         = 5 * time.Minute
	DefaultWALSealDelay         = 2 * time.Second
	DefaultWALTotalBytesMax     = 512 << 20
	DefaultWALPartitionBytesMax = 256 << 20
	// WALPartitionsMax bounds the independent logs (a seal record names
	// the partitions of its generation in a 64-bit mask).
	WALPartitionsMax = 64
)

// DiskWAL configures the local-disk write-ahead log. A nil Config.Disk
// is the S3 WAL: a unit is durable (and acked) when its segment's marker
// lands. With DiskWAL a unit is durable at the group-commit fsync that
// covers its log entry; segments are committed later, when memtable
// generations are flushed.
type DiskWAL struct {
	// Partitions: independent logs (wal/partition-{id}); a unit goes to
	// the one its namespace and partition hash to. Corruption halts one.
	Partitions   int
	SegmentBytes int64 // fixed size of a log segment file (preallocated)
	BatchBytes   int64 // most entry bytes one group commit writes
	// CommitInterval (SYNC) bounds how long a queued entry waits before
	// its batch starts. It is an upper bound, not a timer (Go timers
	// cannot fire at 50–200 µs): the committer starts a batch as soon as
	// entries are queued and no sync is in flight, so an entry waits at
	// most one sync in flight — the bound holds whenever an fsync takes
	// less than the interval, and is only validated here.
	CommitInterval    time.Duration
	Sync              SyncMode
	BatchSyncInterval time.Duration // BATCH_SYNC's timer; > 0
	// Pressure valves: a log segment pinned by unflushed generations for
	// longer than PinnedMax, or a WAL above TotalBytesMax, forces a
	// flush; a partition above PartitionBytesMax refuses units
	// (ErrResourceExhausted) until a flush frees segments.
	PinnedMax         time.Duration
	TotalBytesMax     int64
	PartitionBytesMax int64
	// SealDelay: the memtable is sealed into a segment once it reaches
	// TargetBytes or its first unit has waited this long (never above
	// MaxDelay). Units are acked at the fsync, not at the seal, so the
	// S3 WAL's adaptive delay (100–500 ms, for ack latency) would only
	// make many small segments — and with lanes waiting to fill their
	// files, many live ones. 0: that adaptive delay.
	SealDelay time.Duration
}

// DefaultDiskWAL returns the documented defaults.
func DefaultDiskWAL() *DiskWAL {
	return &DiskWAL{
		Partitions: 1, SegmentBytes: DefaultWALSegmentBytes, BatchBytes: DefaultWALBatchBytes,
		CommitInterval: DefaultWALCommitInterval, Sync: SyncEveryBatch, BatchSyncInterval: DefaultWALBatchSyncInterval,
		PinnedMax: DefaultWALPinnedMax, TotalBytesMax: DefaultWALTotalBytesMax, PartitionBytesMax: DefaultWALPartitionBytesMax,
		SealDelay: DefaultWALSealDelay,
	}
}

// Validate reports the first disk WAL setting that cannot work, naming
// the environment variable that sets it.
func (d *DiskWAL) Validate() error {
	switch {
	case d.Partitions < 1 || d.Partitions > WALPartitionsMax:
		return fmt.Errorf("engine: config: WAL_PARTITIONS=%d outside 1..%d", d.Partitions, WALPartitionsMax)
	case d.SegmentBytes < 2*DirectAlign || d.SegmentBytes > wal.SegmentBytesMax || d.SegmentBytes%DirectAlign != 0:
		return fmt.Errorf("engine: config: WAL_SEGMENT_BYTES=%d must be a multiple of %d from %d to %d", d.SegmentBytes, DirectAlign, 2*DirectAlign, wal.SegmentBytesMax)
	case d.SealDelay < 0:
		return fmt.Errorf("engine: config: memtable seal delay %v is negative", d.SealDelay)
	case d.BatchBytes < 1 || d.BatchBytes > d.SegmentBytes:
		return fmt.Errorf("engine: config: the group commit's batch of %d bytes must be 1..WAL_SEGMENT_BYTES (%d)", d.BatchBytes, d.SegmentBytes)
	case d.CommitInterval < WALCommitIntervalMin:
		return fmt.Errorf("engine: config: WAL_COMMIT_INTERVAL_US=%d below the minimum of %d µs", d.CommitInterval.Microseconds(), WALCommitIntervalMin.Microseconds())
	case d.Sync != SyncEveryBatch && d.Sync != BatchSync:
		return fmt.Errorf("engine: config: WAL_SYNC_MODE %d is neither SYNC nor BATCH_SYNC", d.Sync)
	case d.Sync == BatchSync && d.BatchSyncInterval <= 0:
		return fmt.Errorf("engine: config: wal_batch_sync_interval_ms (WAL_BATCH_SYNC_INTERVAL_MS) must be positive with BATCH_SYNC, got %v", d.BatchSyncInterval)
	case d.PinnedMax <= 0 || d.TotalBytesMax <= 0:
		return fmt.Errorf("engine: config: WAL valves must be positive: pinned max %v, total bytes %d", d.PinnedMax, d.TotalBytesMax)
	case d.PartitionBytesMax < 2*d.SegmentBytes:
		// One segment is always the append target: below two, a partition
		// could never take a unit.
		return fmt.Errorf("engine: config: a WAL partition's bytes limit %d must be at least twice WAL_SEGMENT_BYTES (%d)", d.PartitionBytesMax, d.SegmentBytes)
	}
	return nil
}
