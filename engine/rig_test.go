package engine_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// rig runs engines against the simulator's object-store model: real
// engine code, a seeded world, no goroutines. Tests steer faults per
// request with a StoreFaultsFunc.
type rig struct {
	t      tb
	sched  *sim.Scheduler
	store  *sim.Store
	root   *sim.Rand
	cfg    engine.Config
	inc    *sim.Incarnation
	eng    *engine.Engine
	faults func(op sim.Op, key string) sim.Outcome
	// corrupt, if set, is asked for every successful GET, with its key:
	// damage it (as sim.CorruptBytes does with the parameter)?
	corrupt func(key string) (int64, bool)
	memory  memHint // the Memory port's answer
	// sinksFor gives each incarnation its sinks; nil: no compaction.
	sinksFor func(*sim.Incarnation) engine.Sinks
	// disk, if set, is every incarnation's Disk port (the disk WAL).
	disk *sim.Disk
}

// memHint is a Memory port with a fixed answer.
// rigFaults steers each request with rig.faults, and damages GET answers
// with rig.corrupt.
type rigFaults struct{ r *rig }

func (f rigFaults) Decide(op sim.Op, key string, _ time.Duration, _ *sim.Rand) (sim.Outcome, time.Duration) {
	if f.r.faults == nil {
		return sim.OK, 0
	}
	return f.r.faults(op, key), 0
}

func (f rigFaults) CorruptRead(key string) (int64, bool) {
	if f.r.corrupt == nil {
		return 0, false
	}
	return f.r.corrupt(key)
}

type memHint int64

func (m memHint) AvailableBytes() int64 { return int64(m) }

// tb is what the rig needs of a test: *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

func newRig(t tb, storeCfg sim.StoreConfig) *rig {
	t.Helper()
	r := &rig{t: t, root: sim.NewRand(1), memory: 8 << 20}
	r.sched = sim.NewScheduler(r.root.Split("sched"), sim.NewTrace(), sim.SchedulerConfig{})
	storeCfg.Faults = rigFaults{r}
	r.store = sim.NewStore(r.sched, r.root.Split("store"), storeCfg)
	r.cfg = engine.Config{
		Prefix: "wal", Pipeline: "test", TargetBytes: 64 << 10, MaxDelay: time.Minute, QueueCapacity: 2,
		PartBytes: 16 << 10, PartConcurrency: 2,
		CompactionConcurrency: 4, LiveSegmentsMax: 64, BitmapDelay: 100 * time.Millisecond, IdempotencyWindow: time.Hour,
		StreamChunkBytes: 4 << 10, MemoryPoll: time.Second, SweepInterval: 10 * time.Second, CheckpointDelay: 50 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		FenceWait: 500 * time.Millisecond, OrphanGrace: time.Minute, RecoveryConcurrency: 4,
	}
	return r
}

// start starts a new engine incarnation (killing the previous one) and
// runs until recovery finished.
func (r *rig) start() *engine.Engine {
	r.t.Helper()
	eng, err := r.tryStart()
	if err != nil {
		r.t.Fatalf("recovery: %v", err)
	}
	return eng
}

// tryStart starts a new incarnation's engine and runs until its recovery
// answers: the engine and that answer.
func (r *rig) tryStart() (*engine.Engine, error) {
	r.t.Helper()
	if r.inc != nil {
		r.inc.Kill()
	}
	r.inc = r.sched.NewIncarnation()
	eng, err := engine.New(r.cfg, r.ports())
	if err != nil {
		r.t.Fatal(err)
	}
	r.eng = eng
	var done bool
	var startErr error
	eng.Start(func(err error) { done, startErr = true, err })
	r.until(func() bool { return done }, "recovery")
	return eng, startErr
}

// ports are the current incarnation's ports.
func (r *rig) ports() engine.Ports {
	ports := engine.Ports{
		Clock: r.sched.Clock(), Rand: r.root.Split(fmt.Sprint("engine/", r.inc.ID())), Timers: r.inc.Timers(),
		Exec: r.inc.Executor(), Store: r.store.Client(r.inc), Memory: r.memory,
	}
	if r.sinksFor != nil {
		ports.Sinks = r.sinksFor(r.inc)
	}
	if r.disk != nil {
		ports.Disk = r.disk.Client(r.inc)
	}
	return ports
}

// until steps the world until cond holds.
func (r *rig) until(cond func() bool, what string) {
	r.t.Helper()
	for range 1_000_000 {
		if cond() {
			return
		}
		if !r.sched.Step() {
			break
		}
	}
	if !cond() {
		r.t.Fatalf("%s never happened (now %v)", what, r.sched.Now())
	}
}

// settle runs a simulated minute (the engine has periodic timers, so the
// world is never quite idle).
func (r *rig) settle() { r.sched.RunUntil(r.sched.Now() + time.Minute) }

var schema = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

// unit is one unit of rows of namespace ns with the given values.
func unit(ns string, vals ...int64) engine.Unit {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(vals)))
	return engine.Unit{
		Key:     segment.PartitionKey{SinkRef: "lake", Namespace: ns, Schema: segment.FingerprintOf(schema)},
		Schema:  schema,
		Batches: []arrow.RecordBatch{rec},
	}
}

func withOffset(u engine.Unit, key string, v uint64) engine.Unit {
	u.Offsets = segment.Offsets{{Key: key, Value: v}}
	return u
}

// result is the answer to one Submit.
type result struct {
	done bool
	err  error
}

func (r *rig) submit(u engine.Unit) *result {
	res := &result{}
	r.eng.Submit(u, func(err error) { res.done, res.err = true, err })
	return res
}

// committedValues decodes every segment the store holds a marker for and
// returns namespace → values, in segment id order then body order.
func (r *rig) committedValues() map[string][]int64 {
	r.t.Helper()
	out := map[string][]int64{}
	for _, key := range r.store.Keys("wal/test/p_year=") {
		if !strings.HasSuffix(key, ".seg.commit") {
			continue
		}
		raw, _ := r.store.Object(key)
		ix, err := segment.DecodeMarker(key, raw)
		if err != nil {
			r.t.Fatal(err)
		}
		body, _ := r.store.Object(strings.TrimSuffix(key, ".commit"))
		b, err := segment.CheckBody(ix, key, segment.Bytes(body), int64(len(body)))
		if err != nil {
			r.t.Fatal(err)
		}
		for i, e := range ix.Entries {
			s, err := b.ReadSlice(segment.SliceOrdinal(i), memory.DefaultAllocator)
			if err != nil {
				r.t.Fatal(err)
			}
			for _, rec := range s.Batches {
				out[e.Key.Namespace] = append(out[e.Key.Namespace], rec.Column(0).(*array.Int64).Int64Values()...)
			}
			s.Release()
		}
	}
	return out
}

func (r *rig) markers() (n int) {
	for _, key := range r.store.Keys("wal/test/p_year=") {
		if strings.HasSuffix(key, ".seg.commit") {
			n++
		}
	}
	return n
}
