package sim

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
)

// Faults is what a world needs from a fault plan (package faults builds
// one from a seed, or replays a recorded schedule). Every method is one
// decision point of the world; none may draw from the world's streams.
type Faults interface {
	StoreFaults
	SinkFaults
	// CrashNow decides whether the engine is killed at this step.
	CrashNow() bool
	// ZombieNow decides whether the engine pauses at this step — a new
	// process takes over meanwhile — and for how long.
	ZombieNow() (time.Duration, bool)
	// RestartNow decides whether to stop the engine gracefully (Close,
	// then a new process) at this step.
	RestartNow() bool
	// CrashAtPoint decides whether to crash right after a compaction or
	// upload step (a sink apply answered, a bitmap write issued, a
	// reclaim delete done, a part uploaded): windows a per-step crash
	// rarely hits.
	CrashAtPoint() bool
	// PowerLossAfterCommit is asked when a disk-WAL engine's marker PUT
	// is answered (its segment committed): does the machine lose power
	// before the generation's flushed record is durable?
	PowerLossAfterCommit() bool
	// KillAfterFsyncError is asked at every failed fsync of a log
	// segment: does the process die, sparing the machine — right then
	// (delay 0, before the log rolled past the failed batch) or after
	// delay (when the next segment may hold retries of that batch)?
	KillAfterFsyncError() (delay time.Duration, ok bool)
	// MemoryChange is asked every memoryTick: a new memory hint, in
	// eighths of the world's base hint, or false.
	MemoryChange() (int64, bool)
	// Rewind is asked for each replayable partition when it resumes: how
	// many units earlier than the recovered offsets to restart from.
	Rewind() (uint64, bool)
	// CorruptAtRest is asked as each engine process starts with live
	// segments in the store: whether one's body or bitmap changes there
	// (CorruptBytes).
	CorruptAtRest() (int64, bool)
	Heal()
	ConfigureStore(StoreConfig) StoreConfig
	MaxExtraLatency() time.Duration
	DiskFaults() DiskFaults
	Describe() string // the plan, printed at the start of a run
	Injected() string // faults injected so far, by kind
}

// Config is one simulated run.
type Config struct {
	Seed   uint64
	Iters  uint64 // steps (events) of the fault phase and drain together
	Faults Faults // nil: no faults
	// World is the world to build; nil draws one from the seed
	// (DrawWorld over the names of Destinations).
	World *WorldSpec
	Trace io.Writer // optional human-readable trace
	// Destinations by kind name; a WorldSpec's sinks name them. Sinks of
	// a kind not supplied are an error (the run reports a violation).
	Destinations map[string]DestinationFactory
	// HTTP, if set, builds the real HTTP source's request handling for
	// one source (cmd/simulate passes sources/http's). The units of
	// sources that cannot replay then go through it as requests
	// (HTTPEndpoint).
	HTTP func(HTTPOptions) HTTPEndpoint
	// Prefix, if set, builds the real objects source's runner for a
	// prefix source (prefix.go); without it prefix sources stay idle.
	Prefix PrefixFactory
	// Codec, if set, builds a real broker source's record logic for a
	// broker source whose spec names one (broker_codec.go); without it
	// such sources run the world's model of it.
	Codec CodecFactory
	// MQTT, if set, builds the real MQTT source's message logic for a
	// source whose spec says CodecMQTT (mqtt_codec.go); without it such
	// sources are the world's HTTP clients.
	MQTT MessageCodecFactory
	// Recorder, if set, watches the trace from the first record, and the
	// run stops stepping when it halts (simulate -check-determinism).
	Recorder *Recorder
	// Tap, if set, watches the run from the side (tap.go): simulate
	// -timeline. It changes nothing, the trace hash included.
	Tap Tap
}

// healFraction of the steps run with faults; the rest is the quiet phase
// in which everything heals, sources stop producing, and the run must
// converge: within drainTime of simulated time after the heal (a few
// recoveries, a backlog of LiveSegmentsMax segments, a couple of sweeps —
// far less), and within drainStepsMin steps or half the run's, whichever
// is more (a cap on runaway worlds). The bounds are absolute so that a
// short run (a shrunk failure) is not failed for want of steps.
const (
	healFraction  = 0.8
	drainTime     = time.Hour
	drainStepsMin = 500_000
	restartDelay  = 500 * time.Millisecond
	// closeBound: a graceful close that has not answered by then hangs.
	// Generous: it flushes and applies under the fault plan's retries and
	// latency spikes, and waits up to engine.CloseReclaimGrace for
	// reclaims.
	closeBound = 5 * time.Minute
	memoryTick = 5 * time.Second
	// zombieLife: a resumed zombie that has not failed closed by then is
	// killed (its supervisor noticed); every zombie dies at the heal.
	zombieLife = 3 * time.Minute
)

// World is one seeded simulated universe: scheduler, object store, disk,
// sources, the engine (one current incarnation, possibly zombies of
// earlier ones) and the oracle. Not safe for concurrent use; run many
// worlds in parallel instead.
type World struct {
	cfg      Config
	spec     WorldSpec
	root     *Rand
	trace    *Trace
	sched    *Scheduler
	store    *Store
	disk     *Disk
	faults   Faults
	engCfg   engine.Config
	layout   engine.Layout
	pageSize int
	mem      memory.Allocator
	sources  []*source
	oracle   *Oracle

	inc        *Incarnation
	eng        *engine.Engine
	zombies    []*zombie
	recovering bool
	recStart   time.Duration
	rec        recoveryStats
	producing  bool
	healAt     uint64          // the step the fault phase ends
	healTime   time.Duration   // when it ended
	deletes    []time.Duration // when segment keys were deleted, oldest first
	storeCfg   StoreConfig

	dests       map[string]Destination // by sink_ref; empty: no compaction
	blockingCfg BlockingConfig         // every incarnation's Blocking port (blocking.go)
	memHint     int64                  // what the Memory port answers
	sinkRand    *Rand
	lastTrouble time.Duration // last sink fault, crash or memory change
	progress    progress      // the progress oracle's memory of the current engine
	crashSoon   bool          // crash after the current step (a targeted crash point)
	powerSoon   bool          // lose power after the current step (right after a disk-WAL commit)
	killSoon    bool          // kill the process after the current step, sparing the machine
	// killOnRetry: the engine to kill when a retry of a unit answered
	// outcome-unknown is acked (fsync-error-kill with a delay).
	killOnRetry    *engine.Engine
	unknownOutcome map[UID]bool  // units answered ErrUnknownOutcome, until a retry is acked
	closing        bool          // a graceful close is in progress
	closeStart     time.Duration // when it began
	awaiting       int           // units submitted to the current engine, not answered yet
	memWatch       memWatch
	marks          engine.Marks      // coverage marks of every incarnation so far
	wmarks         map[string]uint64 // the world's own marks (marks.go)
	halted         string            // why the run stopped early as it should (an expected alert)
	// expected: what an alert may name (a segment corrupted at rest, a
	// job a sink refused): such an alert halts the run as it should.
	expected []string

	// top is the world's first pipeline when this World is a further one
	// (pipeline.go); nil on the first, which runs the loop.
	top   *World
	peers []*World // the further pipelines, on the first one
	// pipelines is the first one and its peers (all), built once.
	pipelines []*World
	data      hostDir // this pipeline's data directory on the disk
	label     string  // names a further pipeline in messages: its name and number
	// srcBase is the global index of this pipeline's first source: UIDs
	// name the global index, so they are unique across pipelines.
	srcBase int

	res Result
}

// NewWorld builds the world for cfg.
func NewWorld(cfg Config) *World {
	root := NewRand(cfg.Seed)
	w := &World{cfg: cfg, root: root, trace: NewTrace(), faults: cfg.Faults, producing: true, mem: memory.DefaultAllocator,
		unknownOutcome: map[UID]bool{}}
	if w.faults == nil {
		w.faults = noFaults{}
	}
	if cfg.Trace != nil {
		w.trace.SetWriter(cfg.Trace)
	}
	if cfg.Recorder != nil {
		w.trace.SetRecorder(cfg.Recorder)
	}
	if cfg.Tap != nil {
		w.trace.SetTap(cfg.Tap)
	}
	if cfg.World != nil {
		w.spec = *cfg.World
	} else {
		w.spec = DrawWorld(root.Split("world"), destinationNames(cfg.Destinations))
	}
	w.sched = NewScheduler(root.Split("sched"), w.trace, SchedulerConfig{})
	w.engCfg, w.pageSize = w.spec.Engine, w.spec.PageSize
	storeCfg := w.faults.ConfigureStore(StoreConfig{PageSize: w.pageSize, PartSizeMin: w.spec.PartSizeMin,
		Response: w.spec.Response, AmbiguousLandMax: w.spec.AmbiguousLandMax})
	storeCfg.Faults = w.faults
	w.store = NewStore(w.sched, root.Split("store"), storeCfg)
	w.storeCfg = storeCfg
	w.disk = NewDisk(w.sched, root.Split("disk"), DiskConfig{Faults: w.faults.DiskFaults()})
	w.data = hostDir{disk: w.disk}
	w.layout = engine.NewLayout(w.engCfg.Prefix, w.engCfg.Pipeline)
	w.oracle = newOracle(w)
	for i, spec := range w.spec.Sources {
		w.sources = append(w.sources, newSource(w, i, spec))
	}
	w.engCfg.FenceWait = w.fenceWait(storeCfg)
	w.memHint, w.sinkRand = w.spec.MemoryBytes, root.Split("sink")
	w.healAt = uint64(float64(cfg.Iters) * healFraction)
	w.blockingCfg = drawBlocking(root.Split("blocking"))
	w.dests = map[string]Destination{}
	for _, k := range w.spec.Sinks {
		f, ok := cfg.Destinations[k.Kind]
		if !ok {
			w.oracle.fail("world spec: sink %s of kind %q: no such destination", k.Ref, k.Kind)
			continue
		}
		w.dests[k.Ref] = f(w, k.Ref)
	}
	for i, ps := range w.spec.Pipelines {
		w.peers = append(w.peers, newPeer(w, i+2, ps))
	}
	w.wireShared()
	return w
}

// killAfterFsyncError kills the process, sparing the machine, after a
// failed fsync of the log if the fault fires: at once, before the log
// rolled past the failed batch (the page cache holds what the disk never
// will), or later — right after the first retry of a unit answered
// outcome-unknown is acked, when the next segment holds that retry under
// a sequence number the failed batch also used, or after the drawn delay
// if no retry is acked before.
func (w *World) killAfterFsyncError(path string) {
	if !strings.HasSuffix(path, ".wal") {
		return
	}
	delay, ok := w.faults.KillAfterFsyncError()
	if !ok || !w.producing {
		return
	}
	if delay == 0 {
		w.killSoon = true
		return
	}
	eng := w.eng
	w.killOnRetry = eng
	w.sched.After(delay, func() {
		if w.eng == eng && w.killOnRetry == eng {
			w.killSoon = true
		}
	})
}

// retryAnswered sees the answer to a unit: one answered outcome-unknown
// is remembered, and the ack of its retry fires an armed kill.
func (w *World) retryAnswered(uid UID, err error) {
	switch {
	case errors.Is(err, engine.ErrUnknownOutcome):
		w.unknownOutcome[uid] = true
	case err == nil && w.unknownOutcome[uid]:
		delete(w.unknownOutcome, uid)
		if w.killOnRetry != nil && w.killOnRetry == w.eng {
			w.killSoon = true
		}
	}
}

func destinationNames(m map[string]DestinationFactory) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Spec returns the world's specification.
func (w *World) Spec() WorldSpec { return w.spec }

// fenceWait covers the longest a WAL write can stay in flight plus the
// longest LIST lag, so that recovery sees everything a dead incarnation
// made durable (engine.Config.FenceWait). A WAL write carries at most one
// part (a body up to PartBytes goes in one PUT, a larger one in parts).
func (w *World) fenceWait(sc StoreConfig) time.Duration {
	var longest time.Duration
	maxBody := max(w.engCfg.PartBytes, 1<<20)
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
	World        string // the drawn world, one line
	Steps        uint64
	SimTime      time.Duration
	Wall         time.Duration
	Acks         uint64
	Crashes      uint64
	KillsOnly    uint64 // crashes that spared the machine (its page cache)
	Restarts     uint64 // graceful stops
	Zombies      uint64 // incarnations paused while another took over
	Faults       string
	Segments     uint64
	Destination  string
	Applied      uint64 // jobs the destinations hold at the end
	MaxLive      int    // most segments owned at once
	OrphansSwept uint64
	WorstRecOps  uint64
	WorstRecTime time.Duration
	Halted       string // why the run stopped early, as it should have
	Marks        engine.Marks
	// DestMarks are the destinations' own coverage marks (Marked), summed
	// by name over the world's destinations.
	DestMarks map[string]uint64
	// WorldMarks are the world's own coverage marks (marks.go): its
	// sources' rare paths.
	WorldMarks map[string]uint64
	Hash       uint64
	Violations []string
	// Classes are the violations' format strings: what kind of check
	// failed, without the values (shrinking keeps a failure of the same
	// class).
	Classes []string
}

// Err reports the run's first violation, or nil.
func (r Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return fmt.Errorf("%s (and %d more)", r.Violations[0], len(r.Violations)-1)
}

func (w *World) onApply(op Op, key string) {
	if _, _, _, ok := w.layout.ParseKey(key); ok && op == OpDelete {
		w.deletes = append(w.deletes, w.sched.Now())
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

func (noFaults) Decide(Op, string, time.Duration, *Rand) (Outcome, time.Duration) { return OK, 0 }
func (noFaults) DecideSink(time.Duration) SinkOutcome                             { return SinkOK }
func (noFaults) CrashAtPoint() bool                                               { return false }
func (noFaults) PowerLossAfterCommit() bool                                       { return false }
func (noFaults) KillAfterFsyncError() (time.Duration, bool)                       { return 0, false }
func (noFaults) MemoryChange() (int64, bool)                                      { return 0, false }
func (noFaults) CrashNow() bool                                                   { return false }
func (noFaults) ZombieNow() (time.Duration, bool)                                 { return 0, false }
func (noFaults) RestartNow() bool                                                 { return false }
func (noFaults) Rewind() (uint64, bool)                                           { return 0, false }
func (noFaults) CorruptAtRest() (int64, bool)                                     { return 0, false }
func (noFaults) Heal()                                                            {}
func (noFaults) ConfigureStore(c StoreConfig) StoreConfig                         { return c }
func (noFaults) MaxExtraLatency() time.Duration                                   { return 0 }
func (noFaults) Describe() string                                                 { return "none[]" }
func (noFaults) DiskFaults() DiskFaults                                           { return nil }
func (noFaults) Injected() string                                                 { return "" }

// Engine returns the current engine (nil between a crash and restart).
func (w *World) Engine() *engine.Engine { return w.eng }

// SkewStoreRequest makes store request number seq (counted from 1, as
// store.issue req= prints it) take one nanosecond longer than the seed
// says. It exists for tests of the determinism check, which need a world
// that deliberately differs from another of the same seed at one known
// event; a real run never calls it.
func (w *World) SkewStoreRequest(seq uint64) { w.store.skew = seq }

// recorderHalted: a Recorder asked the run to stop stepping.
func (w *World) recorderHalted() bool { return w.cfg.Recorder != nil && w.cfg.Recorder.Halted() }
