package sim

import (
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
)

// Faults is what a world needs from a fault plan (package faults builds
// one from a seed).
type Faults interface {
	StoreFaults
	SinkFaults
	CrashNow(r *Rand) bool
	// RestartNow decides whether to stop the engine gracefully (Close,
	// then a new process) at this step.
	RestartNow(r *Rand) bool
	// CrashAtPoint decides whether to crash right after a compaction step
	// (a sink apply answered, a bitmap write issued, a reclaim delete
	// done): windows a per-step crash rarely hits.
	CrashAtPoint(r *Rand) bool
	// MemoryChange is asked every memoryTick: a new memory hint, or false.
	MemoryChange(r *Rand) (int64, bool)
	Heal()
	ConfigureStore(StoreConfig) StoreConfig
	MaxExtraLatency() time.Duration
	DiskFaults() DiskFaults
	Describe() string // the plan, printed at the start of a run
	Injected() string // faults injected so far, by kind
}

// Config is one simulated run.
type Config struct {
	Seed     uint64
	Iters    uint64       // steps (events) of the fault phase and drain together
	Faults   Faults       // nil: no faults
	Workload []SourceSpec // nil: DefaultWorkload
	Trace    io.Writer    // optional human-readable trace
	// Recorder, if set, watches the trace from the first record, and the
	// run stops stepping when it halts (simulate -check-determinism).
	Recorder *Recorder
	// Destinations the seed picks one from (sink_ref "lake"); none: no
	// compaction, and the sink and reclaim oracles are off.
	Destinations []DestinationFactory
}

// healFraction of the steps run with faults; the rest is the quiet phase
// in which everything heals, sources stop producing, and the run must
// converge. drainExtra is how much longer a run may take to converge.
const (
	healFraction = 0.8
	drainExtra   = 0.5
	restartDelay = 500 * time.Millisecond
	// closeBound: a graceful close that has not answered by then hangs.
	// Generous: it flushes and applies under the fault plan's retries and
	// latency spikes, and waits up to engine.CloseReclaimGrace for
	// reclaims.
	closeBound = 5 * time.Minute
	memoryTick = 5 * time.Second
	// defaultMemory is the memory hint unless a fault changes it: a pool
	// of about 45 MiB, far above what the small simulated segments need.
	defaultMemory = 64 << 20
)

// World is one seeded simulated universe: scheduler, object store, disk,
// sources, the engine (one incarnation at a time) and the oracle. Not safe
// for concurrent use; run many worlds in parallel instead.
type World struct {
	cfg      Config
	root     *Rand
	trace    *Trace
	sched    *Scheduler
	store    *Store
	disk     *Disk
	faults   Faults
	crashRnd *Rand
	stopRnd  *Rand // graceful restarts
	engCfg   engine.Config
	layout   engine.Layout
	pageSize int
	builder  *builder
	sources  []*source
	oracle   *Oracle

	inc        *Incarnation
	eng        *engine.Engine
	recovering bool
	recStart   time.Duration
	rec        recoveryStats
	producing  bool
	deletes    []time.Duration // when segment keys were deleted, oldest first
	storeCfg   StoreConfig

	dest        Destination // nil: no compaction
	memHint     int64       // what the Memory port answers
	sinkRand    *Rand
	lastTrouble time.Duration // last sink fault, crash or memory change
	progress    progress      // the progress oracle's memory of the current engine
	crashSoon   bool          // crash after the current step (a targeted crash point)
	closing     bool          // a graceful close is in progress
	closeStart  time.Duration // when it began
	awaiting    int           // units submitted to the current engine, not answered yet
	mem         memWatch

	res Result
}

// NewWorld builds the world for cfg.Seed.
func NewWorld(cfg Config) *World {
	root := NewRand(cfg.Seed)
	w := &World{cfg: cfg, root: root, trace: NewTrace(), faults: cfg.Faults, producing: true}
	if w.faults == nil {
		w.faults = noFaults{}
	}
	if cfg.Trace != nil {
		w.trace.SetWriter(cfg.Trace)
	}
	if cfg.Recorder != nil {
		w.trace.SetRecorder(cfg.Recorder)
	}
	w.sched = NewScheduler(root.Split("sched"), w.trace, SchedulerConfig{})
	w.crashRnd, w.stopRnd = root.Split("crash"), root.Split("restart")
	w.engCfg, w.pageSize = w.drawEngineConfig(root.Split("config"))
	if vr := root.Split("config/view"); vr.Chance(0.2) {
		// A view too small for the HTTP source's keys over a window: its
		// units meet ErrResourceExhausted until keys expire.
		w.engCfg.OffsetsViewMax = 2000 + vr.Intn(30000)
	}
	storeCfg := w.faults.ConfigureStore(StoreConfig{PageSize: w.pageSize, PartSizeMin: int(w.engCfg.PartBytes),
		Response: Latency{Base: 500 * time.Microsecond, Tail: 2 * time.Millisecond}})
	if cr := root.Split("store-config"); cr.Chance(0.5) {
		storeCfg.AmbiguousLandMax = cr.Duration(time.Millisecond, 2*time.Second)
	}
	storeCfg.Faults = w.faults
	w.store = NewStore(w.sched, root.Split("store"), storeCfg)
	w.storeCfg = storeCfg
	w.disk = NewDisk(w.sched, root.Split("disk"), DiskConfig{Faults: w.faults.DiskFaults()})
	w.layout = engine.NewLayout(w.engCfg.Prefix, w.engCfg.Pipeline)
	w.builder = newBuilder(memory.DefaultAllocator)
	w.oracle = newOracle(w)
	w.store.OnApply = w.onApply
	specs := cfg.Workload
	if specs == nil {
		specs = DefaultWorkload()
	}
	for i, spec := range specs {
		w.sources = append(w.sources, newSource(w, i, spec))
	}
	w.engCfg.FenceWait = w.fenceWait(storeCfg)
	w.memHint, w.sinkRand = defaultMemory, root.Split("sink")
	if n := len(cfg.Destinations); n > 0 {
		w.dest = cfg.Destinations[root.Split("destination").Intn(n)](w)
	}
	return w
}

// drawEngineConfig picks the engine's sizes for this seed: small, so that
// a short run commits many segments and uses multipart uploads.
func (w *World) drawEngineConfig(r *Rand) (engine.Config, int) {
	targets := []int64{32 << 10, 128 << 10, 512 << 10}
	parts := []int64{16 << 10, 64 << 10}
	cfg := engine.Config{
		Prefix: "wal", Pipeline: "sim",
		TargetBytes:         targets[r.Intn(len(targets))],
		MaxDelay:            engine.DefaultMaxDelay,
		QueueCapacity:       1 + r.Intn(4),
		PartBytes:           parts[r.Intn(len(parts))],
		PartConcurrency:     1 + r.Intn(4),
		RetryBase:           20 * time.Millisecond,
		RetryMax:            2 * time.Second,
		OrphanGrace:         10 * time.Second,
		RecoveryConcurrency: 1 + r.Intn(8),

		CompactionConcurrency: 1 + r.Intn(4),
		LiveSegmentsMax:       32 + r.Intn(200),
		BitmapDelay:           r.Duration(10*time.Millisecond, 500*time.Millisecond),
		IdempotencyWindow:     10 * time.Minute,
		StreamChunkBytes:      int64(4<<10) << r.Intn(4),
		MemoryPoll:            time.Second,
		SweepInterval:         5 * time.Second,
		CheckpointDelay:       r.Duration(50*time.Millisecond, time.Second),
	}
	if r.Chance(0.2) {
		cfg.MaxDelay = r.Duration(10*time.Millisecond, 200*time.Millisecond)
	}
	return cfg, 2 + r.Intn(40)
}

// fenceWait covers the longest a request can stay in flight plus the
// longest LIST lag, so that recovery sees everything a dead incarnation
// made durable (engine.Config.FenceWait).
func (w *World) fenceWait(sc StoreConfig) time.Duration {
	var longest time.Duration
	maxBody := int64(defaultMemory) // admission is a share of it; no body is larger
	for _, l := range sc.Latency {
		d := l.Base + 45*l.Tail + time.Duration(maxBody*int64(l.PerMiB)>>20)
		longest = max(longest, d)
	}
	response := sc.Response.Base + 45*sc.Response.Tail
	return longest + response + w.faults.MaxExtraLatency() + sc.AmbiguousLandMax + sc.ListLagMax + time.Second
}

// Result summarises a run.
type Result struct {
	Seed         uint64
	Plan         string
	Steps        uint64
	SimTime      time.Duration
	Wall         time.Duration
	Acks         uint64
	Crashes      uint64
	Restarts     uint64 // graceful stops
	Faults       string
	Segments     uint64
	Destination  string
	Applied      uint64 // jobs the destination holds at the end
	MaxLive      int    // most segments owned at once
	OrphansSwept uint64
	WorstRecOps  uint64
	WorstRecTime time.Duration
	Hash         uint64
	Violations   []string
}

// Err reports the run's first violation, or nil.
func (r Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return fmt.Errorf("%s (and %d more)", r.Violations[0], len(r.Violations)-1)
}

func (w *World) onApply(op Op, key string) {
	if op == OpDelete {
		if _, _, _, ok := w.layout.ParseKey(key); ok {
			w.deletes = append(w.deletes, w.sched.Now())
		}
	}
	w.oracle.onApply(op, key)
}

// lingeringDeletes counts segment keys deleted recently enough that a
// listing may still show them.
func (w *World) lingeringDeletes() uint64 {
	cutoff := w.sched.Now() - w.storeCfg.ListLingerMax - time.Second
	i := 0
	for i < len(w.deletes) && w.deletes[i] < cutoff {
		i++
	}
	w.deletes = w.deletes[i:]
	return uint64(len(w.deletes))
}

type noFaults struct{}

func (noFaults) Decide(Op, string, *Rand) (Outcome, time.Duration) { return OK, 0 }
func (noFaults) DecideSink(*Rand) (bool, bool)                     { return false, false }
func (noFaults) SinkDown(time.Duration) bool                       { return false }
func (noFaults) CrashAtPoint(*Rand) bool                           { return false }
func (noFaults) MemoryChange(*Rand) (int64, bool)                  { return 0, false }
func (noFaults) CrashNow(*Rand) bool                               { return false }
func (noFaults) RestartNow(*Rand) bool                             { return false }
func (noFaults) Heal()                                             {}
func (noFaults) ConfigureStore(c StoreConfig) StoreConfig          { return c }
func (noFaults) MaxExtraLatency() time.Duration                    { return 0 }
func (noFaults) Describe() string                                  { return "none[]" }
func (noFaults) DiskFaults() DiskFaults                            { return nil }
func (noFaults) Injected() string                                  { return "" }

// Engine returns the current engine (nil between a crash and restart).
func (w *World) Engine() *engine.Engine { return w.eng }

// SkewStoreRequest makes store request number seq (counted from 1, as
// store.issue req= prints it) take one nanosecond longer than the seed
// says. It exists for tests of the determinism check, which need a world
// that deliberately differs from another of the same seed at one known
// event; a real run never calls it.
func (w *World) SkewStoreRequest(seq uint64) { w.store.skew = seq }

// halted: a Recorder asked the run to stop stepping.
func (w *World) halted() bool { return w.cfg.Recorder != nil && w.cfg.Recorder.Halted() }
