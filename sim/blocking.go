package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// The Blocking port (engine.Blocking) of one incarnation: a pool of
// workers running blocking calls — a database transaction — in simulated
// time. A call's life:
//
//	Do ─▶ queue ─▶ start ─(Run)─▶ work runs ─(Answer)─▶ done on the loop
//	              a worker is     its effect lands:     an event the
//	              free            a world event         incarnation owns;
//	                                                    frees the worker
//
// work runs inline, at one instant: what it does (a transaction applied
// to a model) lands then, whatever becomes of the process. So a crash
// (Incarnation.Kill) leaves a call in one of three states, as the port's
// contract says: queued calls never start; a started call whose work has
// not run yet either still runs — a COMMIT already sent lands, with its
// ctx ended because the process stopped — or never does, as the call's
// own draw (BlockingConfig.LandAfterDeath) decided when it started; and
// done never runs. A paused incarnation's work still runs (the request
// was sent before the freeze); its done, and its workers, wait for Resume.
//
// A call may also run out of the port's time limit (TimeoutChance): its
// ctx ends and done gets an error wrapping context.DeadlineExceeded —
// and, as the contract says, its effect is as unknown as at a crash: the
// work still lands (LandAfterDeath, drawn again) or never does.
//
// Deterministic: one goroutine, every delay and decision drawn from the
// port's own stream in the order calls start.

// BlockingConfig shapes a Blocking port. Zero durations and a zero
// worker count take the defaults (DefaultBlockingConfig).
type BlockingConfig struct {
	// Workers bounds the calls started at once; later calls queue in
	// the order Do was called.
	Workers int
	// Run is the time from a call's start to its work: the transaction
	// travelling to its COMMIT.
	Run Latency
	// Answer is the time from work to done: the answer travelling back.
	Answer Latency
	// LandAfterDeath is the chance that a started call whose process dies
	// before its work ran still runs it.
	LandAfterDeath float64
	// TimeoutChance is the chance that a started call runs out of the
	// port's time limit: done sees context.DeadlineExceeded whether or not
	// its work landed. 0: none does (the worlds recorded before it).
	TimeoutChance float64
}

// DefaultBlockingConfig is a small connection pool near its database.
var DefaultBlockingConfig = BlockingConfig{
	Workers:        4,
	Run:            Latency{Base: time.Millisecond, Tail: 3 * time.Millisecond},
	Answer:         Latency{Base: 200 * time.Microsecond, Tail: time.Millisecond},
	LandAfterDeath: 0.5,
}

// blockingWorkersMax bounds a config's workers: a pool, not a fan-out.
const blockingWorkersMax = 64

// blockingPort is one incarnation's Blocking port.
type blockingPort struct {
	inc  *Incarnation
	rand *Rand
	cfg  BlockingConfig
	// running counts started calls whose done has not run.
	// INVARIANT: 0 <= running <= cfg.Workers.
	running int
	queue   []*blockingCall // waiting for a worker, in Do order
	calls   uint64          // numbers calls for the trace
}

type blockingCall struct {
	id   uint64
	work func(context.Context) error
	done func(error)
}

// Blocking returns a Blocking port bound to the incarnation, drawing
// from r (give it a stream of its own, split from the root seed).
func (inc *Incarnation) Blocking(r *Rand, cfg BlockingConfig) engine.Blocking {
	if cfg.Workers == 0 {
		cfg.Workers = DefaultBlockingConfig.Workers
	}
	if cfg.Run == (Latency{}) {
		cfg.Run = DefaultBlockingConfig.Run
	}
	if cfg.Answer == (Latency{}) {
		cfg.Answer = DefaultBlockingConfig.Answer
	}
	if cfg.Workers < 0 || cfg.Workers > blockingWorkersMax {
		panic(fmt.Sprintf("sim: Blocking with %d workers (1..%d)", cfg.Workers, blockingWorkersMax))
	}
	return &blockingPort{inc: inc, rand: r, cfg: cfg}
}

// Do implements engine.Blocking.
func (b *blockingPort) Do(work func(ctx context.Context) error, done func(err error)) {
	if work == nil || done == nil {
		panic("sim: Blocking.Do with a nil work or done")
	}
	if !b.inc.alive {
		return // a dead process sends nothing
	}
	b.calls++
	c := &blockingCall{id: b.calls, work: work, done: done}
	b.queue = append(b.queue, c)
	s := b.inc.sched
	s.trace.Begin(s.now, KindBlockingQueue).U("inc", b.inc.id).U("call", c.id).U("queued", uint64(len(b.queue))).End()
	b.startWaiting()
}

// startWaiting starts queued calls while a worker is free.
func (b *blockingPort) startWaiting() {
	for b.running < b.cfg.Workers && len(b.queue) > 0 && b.inc.alive {
		c := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.start(c)
	}
}

// start draws the call's fate and schedules its work as a world event:
// once started, the request is on its way whatever the process does.
func (b *blockingPort) start(c *blockingCall) {
	b.running++
	run := b.cfg.Run.Sample(b.rand, 0)
	answer := b.cfg.Answer.Sample(b.rand, 0)
	lands := b.rand.Chance(b.cfg.LandAfterDeath)
	s := b.inc.sched
	s.trace.Begin(s.now, KindBlockingStart).U("inc", b.inc.id).U("call", c.id).I("run", int64(run)).I("answer", int64(answer)).End()
	if b.cfg.TimeoutChance > 0 && b.rand.Chance(b.cfg.TimeoutChance) {
		b.timeOut(c, run, answer, b.rand.Chance(b.cfg.LandAfterDeath))
		return
	}
	s.After(run, func() { b.run(c, answer, lands) })
}

// timeOut is a call that ran out of its time limit: its work lands at its
// time or never, with its ctx ended, and done — if the process lives —
// gets the deadline, never the work's own answer.
func (b *blockingPort) timeOut(c *blockingCall, run, answer time.Duration, lands bool) {
	s := b.inc.sched
	s.After(run, func() {
		if lands {
			_ = c.work(stoppedCtx)
		}
		s.trace.Begin(s.now, KindBlockingTimeout).U("inc", b.inc.id).U("call", c.id).U("landed", boolWord(lands)).End()
		if !b.inc.alive {
			return
		}
		b.inc.After(answer, func() {
			b.running--
			b.startWaiting()
			c.done(fmt.Errorf("sim: blocking call %d: %w", c.id, context.DeadlineExceeded))
		})
	})
}

// run runs the call's work, then schedules done on the loop — unless the
// process died meanwhile: then the work runs only if the call lands
// (with its ctx ended), and done never runs.
func (b *blockingPort) run(c *blockingCall, answer time.Duration, lands bool) {
	s, alive := b.inc.sched, b.inc.alive
	if !alive && !lands {
		s.trace.Begin(s.now, KindBlockingDrop).U("inc", b.inc.id).U("call", c.id).End()
		return
	}
	ctx := context.Background()
	if !alive {
		ctx = stoppedCtx
	}
	err := c.work(ctx)
	s.trace.Begin(s.now, KindBlockingRun).U("inc", b.inc.id).U("call", c.id).U("alive", boolWord(alive)).U("err", boolWord(err != nil)).End()
	if !alive {
		return
	}
	b.inc.After(answer, func() {
		b.running--
		s.trace.Begin(s.now, KindBlockingDone).U("inc", b.inc.id).U("call", c.id).End()
		b.startWaiting()
		c.done(err)
	})
}

// stoppedCtx is the context of work that runs after its process died.
var stoppedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func boolWord(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// drawBlocking draws a world's Blocking port: a pool of 1–8 workers,
// calls that reach their COMMIT after 0.2–5 ms and a tail, answers that
// take a little longer to come back, and the share of calls in flight
// at a crash that still land.
func drawBlocking(r *Rand) BlockingConfig {
	return BlockingConfig{
		Workers:        1 + r.Intn(8),
		Run:            Latency{Base: r.Duration(200*time.Microsecond, 5*time.Millisecond), Tail: r.Duration(0, 20*time.Millisecond)},
		Answer:         Latency{Base: r.Duration(100*time.Microsecond, time.Millisecond), Tail: r.Duration(0, 5*time.Millisecond)},
		LandAfterDeath: r.Float64(),
		TimeoutChance:  timeoutChance(r),
	}
}

// timeoutChance: in half the worlds some calls run out of time, up to one
// in twenty.
func timeoutChance(r *Rand) float64 {
	if !r.Chance(0.5) {
		return 0
	}
	return r.Float64() / 20
}
