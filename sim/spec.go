package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// WorldSpec is everything a seed draws about a world besides its faults:
// the engine's sizes and limits, the store's behaviour, the memory the
// machine offers, the sources and the sinks. A world is built from a
// spec, never from the seed alone, so a seed file that records the spec
// replays the same world after the generator (DrawWorld) changes.
//
// The seed still drives everything that happens inside the world
// (latencies, lags, same-instant order, source timing): those streams are
// split from it by label.
//
// Compatibility rule: a field added later must mean "as before" at its
// zero value, so that an older spec decodes to the world it described. A
// change that cannot keep that rule bumps SpecVersion; a spec of another
// version is refused with an error naming both versions.
type WorldSpec struct {
	Version int `json:"version"`
	// Engine is the engine's configuration (FenceWait is derived by the
	// world from the store's latencies and the fault plan, and ignored
	// here).
	Engine engine.Config `json:"engine"`
	// PageSize is the store's LIST page size.
	PageSize int `json:"page_size"`
	// PartSizeMin is the store's smallest non-final multipart part.
	PartSizeMin int `json:"part_size_min"`
	// AmbiguousLandMax: how late an unheard write may still land.
	AmbiguousLandMax time.Duration `json:"ambiguous_land_max"`
	// Response is how long answers take to travel back.
	Response Latency `json:"response"`
	// MemoryBytes is the memory hint (the Memory port) when no fault
	// changes it.
	MemoryBytes int64 `json:"memory_bytes"`
	// Sinks are the destinations, by sink_ref; each names a destination
	// kind the caller supplies (Config.Destinations).
	Sinks []SinkSpec `json:"sinks"`
	// Sources produce the workload; each namespace goes to one sink.
	Sources []SourceSpec `json:"sources"`
	// KillOnly (disk-WAL worlds) is the share of crashes that kill the
	// process and spare the machine: the page cache survives, so the next
	// process reads back writes no fsync made durable — after an fsync
	// error, writes that never will be. The rest are power losses.
	KillOnly float64 `json:"kill_only,omitempty"`
	// Pipelines are the world's further pipelines (pipeline.go), writing
	// its sinks beside the first one; none in most worlds.
	Pipelines []PipelineSpec `json:"pipelines,omitempty"`
}

// PipelineSpec is a further pipeline of a world: another daemon on the
// same machine with a data directory of its own (on the world's disk)
// and a WAL of its own — on that disk, in the world's store under its
// own name, or in a store of its own — its own sources and memory, and
// the world's sinks, which it shares with every other pipeline
// (docs/DESIGN.md §11: many pipelines, one destination).
type PipelineSpec struct {
	// Engine is its engine's configuration; Engine.Pipeline names it.
	Engine      engine.Config `json:"engine"`
	Sources     []SourceSpec  `json:"sources"`
	MemoryBytes int64         `json:"memory_bytes"`
	KillOnly    float64       `json:"kill_only,omitempty"`
	// OwnStore: its WAL lives in an object store of its own; false: in
	// the world's store, beside the first pipeline's.
	OwnStore bool `json:"own_store,omitempty"`
}

// SinkSpec is one destination of a world.
type SinkSpec struct {
	Ref  string `json:"ref"`  // the sink_ref partition keys carry
	Kind string `json:"kind"` // which destination (memory, parquet-objects, parquet-dir, …)
}

// SpecVersion is the version of WorldSpec this simulator builds worlds
// from.
const SpecVersion = 1

// Segment and part sizes of drawn worlds: production sizes (docs/DESIGN.md §6.2)
// and S3's smallest part.
const (
	targetMin   = 4 << 20
	targetMax   = 64 << 20
	partMin     = 5 << 20
	partMax     = 16 << 20
	s3PartMin   = 5 << 20
	bulkMaxSum  = 256 << 20 // bytes a world's bulk load delivers, at most
	memoryFloor = 32 << 20
)

// DrawWorld draws a world from r: segment targets of 4–64 MiB, part sizes,
// the number of namespaces and partitions, rates, unit and row sizes, the
// memory hint, queue and concurrency limits, and which of dests run as
// sinks. Row payloads scale with the segment target only in the bulk
// load, so most events stay small and a world stays fast, while the bulk
// load fills production-size segments: multipart uploads of several
// parts, bodies larger than the cache (streamed), eviction under pins.
func DrawWorld(r *Rand, dests []string) WorldSpec {
	s := WorldSpec{Version: SpecVersion, PageSize: 2 + int(logUniform(r, 1, 999)), PartSizeMin: s3PartMin}
	s.Engine = drawEngine(r.Split("engine"))
	if g := r.Split("recovery-give-up"); g.Chance(0.3) {
		// A recovery that keeps failing stops the process, as the
		// daemon does; the world, its supervisor, starts another.
		s.Engine.RecoveryGiveUp = g.Duration(2*time.Second, 30*time.Second)
	}
	if d := r.Split("disk-wal"); d.Chance(diskWALShare) {
		s.Engine.Disk = drawDiskWAL(d)
		if k := r.Split("kill-only"); k.Chance(0.5) {
			s.KillOnly = k.Float64() / 2 // power losses stay the rule: they tear writes
		}
	}
	target := s.Engine.TargetBytes
	// From a machine whose admission cannot take one round of the bulk
	// load (backpressure) to one whose cache holds many bodies.
	s.MemoryBytes = max(int64(logUniform(r, 1.2*float64(target), 40*float64(target))), memoryFloor)
	if r.Chance(0.5) {
		s.AmbiguousLandMax = r.Duration(time.Millisecond, 2*time.Second)
	}
	s.Response = Latency{Base: 500 * time.Microsecond, Tail: r.Duration(0, 5*time.Millisecond)}
	s.Sinks = drawSinks(r.Split("sinks"), dests)
	drawLanes(r.Split("lanes"), &s.Engine, s.Sinks)
	s.Sources = drawSources(r.Split("sources"), s)
	if p := r.Split("pipelines"); len(s.Sinks) > 0 && p.Chance(pipelinesShare) {
		s.Pipelines = drawPipelines(p, s)
	}
	// Retention, partitions added and outages behind some broker
	// sources (own stream: the draws above keep their values).
	drawBrokers(r.Split("brokers"), &s)
	// The real Kafka or NATS source's record logic behind some broker
	// sources (own stream).
	drawCodecs(r.Split("codecs"), &s)
	// A live snapshot bounded from a quarter of a target to three
	// targets in some worlds (own stream; the default, 512 MiB, is beyond
	// any world's size): a unit past the bound finds live sealed first,
	// and with the writer's queue full the S3 WAL answers backpressure
	// and the disk WAL's durable units wait in its backlog.
	if lb := r.Split("live-bytes"); lb.Chance(0.3) {
		s.Engine.LiveBytesMax = int64(logUniform(lb, float64(target)/4, 3*float64(target)))
	}
	// Last, once every source and partition is drawn (no draw: the
	// streams above keep their values).
	fitOffsetsView(&s.Engine, s.Sources)
	for i := range s.Pipelines {
		fitOffsetsView(&s.Pipelines[i].Engine, s.Pipelines[i].Sources)
	}
	return s
}

// objectsInFlight is how many objects the objects source ingests at once
// when SourceSpec.InFlight is 0 (sources/objects DefaultInFlight).
const objectsInFlight = 4

// fitOffsetsView raises a pipeline's drawn OffsetsViewMax to hold every
// source offset key its sources can leave in the view — one per log
// partition (brokers' added ones included), one per object a prefix
// source drops and its floor — plus the keys of the units that can be
// in flight at once, which the engine counts as new (engine viewRoom):
// one unit per partition, InFlight per prefix source, each with its
// object's key and a floor. A full view refuses units with new keys
// until floors retire keys; an order "any" source's keys never retire,
// so a world that fills it stalls for good and never converges
// (cmd/simulate's coverage: backpressure-view is left to an engine test).
func fitOffsetsView(cfg *engine.Config, srcs []SourceSpec) {
	if cfg.OffsetsViewMax == 0 {
		return // the default, segment.CheckpointEntriesMax: far beyond any world
	}
	need := 0
	for _, src := range srcs {
		switch {
		case src.Prefix:
			inFlight := src.InFlight
			if inFlight == 0 {
				inFlight = objectsInFlight
			}
			need += int(src.Units) + 1 + 2*inFlight
		case src.Replayable:
			need += 2 * src.Partitions
		}
	}
	if need > cfg.OffsetsViewMax {
		cfg.OffsetsViewMax = min(need, segment.CheckpointEntriesMax)
	}
}

func drawEngine(r *Rand) engine.Config {
	target := int64(logUniform(r, targetMin, targetMax))
	part := min(int64(logUniform(r, partMin, partMax)), max(partMin, target/3))
	cfg := engine.Config{
		Prefix: "wal", Pipeline: "sim",
		TargetBytes:           target,
		MaxDelay:              engine.DefaultMaxDelay,
		QueueCapacity:         1 + r.Intn(8),
		PartBytes:             part,
		PartConcurrency:       1 + r.Intn(4),
		RetryBase:             20 * time.Millisecond,
		RetryMax:              2 * time.Second,
		OrphanGrace:           10 * time.Second,
		RecoveryConcurrency:   1 + r.Intn(16),
		CompactionConcurrency: 1 + r.Intn(8),
		LiveSegmentsMax:       8 + int(logUniform(r, 1, 248)),
		BitmapDelay:           r.Duration(10*time.Millisecond, 500*time.Millisecond),
		IdempotencyWindow:     10 * time.Minute,
		StreamChunkBytes:      int64(logUniform(r, 256<<10, 8<<20)),
		MemoryPoll:            time.Second,
		SweepInterval:         5 * time.Second,
		CheckpointDelay:       r.Duration(50*time.Millisecond, time.Second),
	}
	if r.Chance(0.2) {
		cfg.MaxDelay = r.Duration(10*time.Millisecond, 200*time.Millisecond)
	}
	if r.Chance(0.2) {
		// A smaller limit on source offsets (one key per log partition,
		// one per prefix object), raised to what the world's sources need
		// once they are drawn (fitOffsetsView): a full view would stall a
		// source for good. Idempotency keys are not counted.
		cfg.OffsetsViewMax = 500 + r.Intn(8000)
	}
	if r.Chance(0.5) {
		// A grace shorter than a slow persist: the sweeper meets bodies
		// whose marker is still on its way, and only its other defenses
		// (the marker HEAD, the snapshots in flight) keep them.
		cfg.OrphanGrace = r.Duration(500*time.Millisecond, 5*time.Second)
	}
	if r.Chance(0.3) {
		// A window of minutes, not ten: in a world of 10⁵ steps (about
		// ten minutes) keys expire, buckets are swept, and a retry held
		// up by an outage lands in the oldest bucket or just past the end.
		cfg.IdempotencyWindow = r.Duration(time.Minute, 5*time.Minute)
	}
	return cfg
}

// drawLanes draws when lanes' jobs are cut (engine.LaneLimits): in every
// world the first sink's jobs span segments, cut by size in some (file
// bytes of 16 KiB–8 MiB of payload), by their flush interval (100 ms–
// 1 min) in others, by the WAL pressure valve where it sits low; a further
// sink now and then has limits of its own, a job per segment among them
// (the Postgres sink's default, and the limits before spanning jobs).
func drawLanes(r *Rand, c *engine.Config, sinks []SinkSpec) {
	spanning := func() engine.LaneLimits {
		return engine.LaneLimits{
			FileBytes:     int64(logUniform(r, 16<<10, 8<<20)),
			FlushInterval: time.Duration(logUniform(r, float64(100*time.Millisecond), float64(time.Minute))),
		}
	}
	c.DefaultLanes = spanning()
	for _, k := range sinks[min(1, len(sinks)):] {
		if !r.Chance(0.5) {
			continue
		}
		if c.Lanes == nil {
			c.Lanes = map[string]engine.LaneLimits{}
		}
		c.Lanes[k.Ref] = engine.LaneLimits{}
		if r.Chance(0.5) {
			c.Lanes[k.Ref] = spanning()
		}
	}
	if r.Chance(0.4) {
		c.ValveSegments = 1 + r.Intn(max(c.LiveSegmentsMax/4, 1))
	}
	if r.Chance(0.2) {
		c.ValveBytes = int64(logUniform(r, float64(c.TargetBytes), 8*float64(c.TargetBytes)))
	}
}

// diskWALShare is the share of drawn worlds that run the local-disk WAL.
const diskWALShare = 0.35

// drawDiskWAL draws a disk WAL small enough that segments roll, batches
// split, valves fire and backpressure happens within a run: log segments
// of 16 KiB–1 MiB, batches of 4–256 KiB, 1–4 partitions, SYNC or
// BATCH_SYNC, valve and backpressure bounds of a few MiB.
func drawDiskWAL(r *Rand) *engine.DiskWAL {
	d := engine.DefaultDiskWAL()
	d.Partitions = 1 + r.Intn(4)
	d.SegmentBytes = int64(logUniform(r, 16<<10, 1<<20)) / engine.DirectAlign * engine.DirectAlign
	d.BatchBytes = min(int64(logUniform(r, 4<<10, 256<<10)), d.SegmentBytes)
	if r.Chance(0.3) {
		d.Sync = engine.BatchSync
		d.BatchSyncInterval = r.Duration(time.Millisecond, 20*time.Millisecond)
	}
	d.PinnedMax = r.Duration(2*time.Second, time.Minute)
	d.TotalBytesMax = int64(logUniform(r, 1<<20, 64<<20))
	if r.Chance(0.4) {
		// At most a segment or two: the size valve seals live at every
		// tick that finds it non-empty.
		d.TotalBytesMax = d.SegmentBytes * int64(1+r.Intn(2))
	}
	d.PartitionBytesMax = max(int64(logUniform(r, 512<<10, 32<<20)), 2*d.SegmentBytes)
	d.SealDelay = 0 // the adaptive delay, as before SealDelay; drawn below
	if r.Split("seal-delay").Chance(0.5) {
		d.SealDelay = time.Duration(logUniform(r.Split("seal-delay/value"), float64(50*time.Millisecond), float64(5*time.Second)))
	}
	return d
}

// drawSinks picks one or two destinations from dests (none: no sinks).
func drawSinks(r *Rand, dests []string) []SinkSpec {
	if len(dests) == 0 {
		return nil
	}
	n := 1
	if r.Chance(0.3) {
		n = 2
	}
	out := make([]SinkSpec, n)
	for i := range out {
		out[i] = SinkSpec{Ref: sinkRef(i), Kind: dests[r.Intn(len(dests))]}
	}
	return out
}

func sinkRef(i int) string {
	if i == 0 {
		return "lake"
	}
	return fmt.Sprintf("lake%d", i+1)
}

// logUniform draws from [lo, hi] with a uniform logarithm.
func logUniform(r *Rand, lo, hi float64) float64 {
	if lo >= hi {
		return lo
	}
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

// MarshalSpec returns the spec as one line of JSON.
func MarshalSpec(s WorldSpec) ([]byte, error) { return json.Marshal(s) }

// UnmarshalSpec decodes a spec, refusing unknown fields, trailing data
// and another version.
func UnmarshalSpec(b []byte) (WorldSpec, error) {
	var s WorldSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return WorldSpec{}, fmt.Errorf("sim: world spec: %w", err)
	}
	if dec.More() {
		return WorldSpec{}, fmt.Errorf("sim: world spec: trailing data")
	}
	if s.Version != SpecVersion {
		return WorldSpec{}, fmt.Errorf("sim: world spec version %d; this simulator builds version %d worlds", s.Version, SpecVersion)
	}
	return s, nil
}

// Summary is the spec in one short line, for a run's plan line.
func (s WorldSpec) Summary() string {
	c := s.Engine
	var sinks, srcs []string
	for _, k := range s.Sinks {
		sinks = append(sinks, k.Ref+"="+k.Kind)
	}
	for _, src := range s.Sources {
		srcs = append(srcs, src.summary()+src.Broker.summary())
	}
	out := fmt.Sprintf("wal=%s target=%s part=%s parts_in_flight=%d queue=%d live_max=%d compaction=%d stream_chunk=%s memory=%s page=%d lanes=%s sinks=[%s] sources=[%s]",
		walSummary(c.Disk), mib(c.TargetBytes), mib(c.PartBytes), c.PartConcurrency, c.QueueCapacity, c.LiveSegmentsMax, c.CompactionConcurrency,
		mib(c.StreamChunkBytes), mib(s.MemoryBytes), s.PageSize, lanesSummary(c), strings.Join(sinks, " "), strings.Join(srcs, " "))
	if c.LiveBytesMax > 0 {
		out += " live_bytes=" + mib(c.LiveBytesMax)
	}
	for _, p := range s.Pipelines {
		out += " " + p.summary()
	}
	return out
}

// lanesSummary says when the world's lanes are cut.
func lanesSummary(c engine.Config) string {
	one := func(l engine.LaneLimits) string {
		if l.FileBytes == 0 {
			return "per-segment"
		}
		return fmt.Sprintf("%s/%v", mib(l.FileBytes), l.FlushInterval.Round(time.Millisecond))
	}
	out := one(c.DefaultLanes)
	for _, ref := range slices.Sorted(maps.Keys(c.Lanes)) {
		out += fmt.Sprintf(",%s:%s", ref, one(c.Lanes[ref]))
	}
	if c.ValveSegments > 0 || c.ValveBytes > 0 {
		out += fmt.Sprintf(",valve=%d/%s", c.ValveSegments, mib(c.ValveBytes))
	}
	return out
}

// walSummary names the world's WAL: s3, or disk with its shape.
func walSummary(d *engine.DiskWAL) string {
	if d == nil {
		return "s3"
	}
	mode := d.Sync.String()
	if d.Sync == engine.BatchSync {
		mode += "/" + d.BatchSyncInterval.String()
	}
	return fmt.Sprintf("disk[partitions=%d segment=%s batch=%s %s pinned_max=%v total_max=%s partition_max=%s]",
		d.Partitions, mib(d.SegmentBytes), mib(d.BatchBytes), mode, d.PinnedMax, mib(d.TotalBytesMax), mib(d.PartitionBytesMax))
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

// SmallSpec is a small fixed world for unit tests: 32 KiB segments, 16
// KiB parts, the default workload (events, pageviews, an orders CDC
// snapshot, an HTTP source), all going to sink "lake" of kind sinkKind
// ("" for no sink).
func SmallSpec(sinkKind string) WorldSpec {
	s := WorldSpec{Version: SpecVersion, PageSize: 5, MemoryBytes: 64 << 20,
		Response: Latency{Base: 500 * time.Microsecond, Tail: 2 * time.Millisecond}, Sources: DefaultWorkload()}
	s.Engine = engine.Config{
		Prefix: "wal", Pipeline: "sim", TargetBytes: 32 << 10, MaxDelay: engine.DefaultMaxDelay, QueueCapacity: 2,
		PartBytes: 16 << 10, PartConcurrency: 2, RetryBase: 20 * time.Millisecond, RetryMax: 2 * time.Second,
		OrphanGrace: 10 * time.Second, RecoveryConcurrency: 4, CompactionConcurrency: 2, LiveSegmentsMax: 64,
		BitmapDelay: 100 * time.Millisecond, IdempotencyWindow: 10 * time.Minute, StreamChunkBytes: 4 << 10,
		MemoryPoll: time.Second, SweepInterval: 5 * time.Second, CheckpointDelay: 200 * time.Millisecond,
	}
	if sinkKind != "" {
		s.Sinks = []SinkSpec{{Ref: "lake", Kind: sinkKind}}
	}
	return s
}
