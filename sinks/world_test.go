package sinks

import (
	"context"
	"fmt"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/storage"
)

// applyChecked calls sink.Apply and checks the loop contract on the way:
// done runs exactly once, never inside Apply itself.
func applyChecked(t tb, sink engine.Sink, job *engine.Job, done func(error)) {
	t.Helper()
	inCall, calls := true, 0
	sink.Apply(job, func(err error) {
		calls++
		if inCall {
			t.Errorf("job %s: done ran synchronously inside Apply", job.ID)
		}
		if calls > 1 {
			t.Errorf("job %s: done ran %d times", job.ID, calls)
			return
		}
		done(err)
	})
	inCall = false
}

// simWorld is a simulated world: one scheduler, a store and a disk that
// outlive incarnations, and the current incarnation.
type simWorld struct {
	t       testing.TB
	root    *sim.Rand
	sched   *sim.Scheduler
	store   *sim.Store
	disk    *sim.Disk
	inc     *sim.Incarnation
	crashes int
}

func newSimWorld(t testing.TB, seed uint64, storeCfg sim.StoreConfig, diskCfg sim.DiskConfig) *simWorld {
	root := sim.NewRand(seed)
	s := sim.NewScheduler(root.Split("sched"), sim.NewTrace(), sim.SchedulerConfig{})
	w := &simWorld{t: t, root: root, sched: s,
		store: sim.NewStore(s, root.Split("store"), storeCfg),
		disk:  sim.NewDisk(s, root.Split("disk"), diskCfg)}
	w.inc = s.NewIncarnation()
	return w
}

// crash is SIGKILL plus power loss: the incarnation dies, the disk comes
// back with what a machine would keep, and a new incarnation starts.
func (w *simWorld) crash() {
	w.inc.Kill()
	w.crashes++
	w.disk.Crash(w.root.Split(fmt.Sprintf("crash/%d", w.crashes)))
	w.inc = w.sched.NewIncarnation()
}

// apply applies job through sink and steps the world until done ran.
func (w *simWorld) apply(sink engine.Sink, job *engine.Job) error {
	w.t.Helper()
	var got error
	finished := false
	applyChecked(w.t, sink, job, func(err error) { got, finished = err, true })
	for !finished {
		if !w.sched.Step() {
			w.t.Fatalf("job %s: the world went idle before Apply answered", job.ID)
		}
	}
	return got
}

// drain steps the world until nothing is pending.
func (w *simWorld) drain() {
	for w.sched.Step() {
	}
}

// startLoop runs a production loop for the test.
func startLoop(t testing.TB) *storage.Loop {
	t.Helper()
	l := storage.NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

// applyOnLoop applies job through sink on l and waits for the answer.
func applyOnLoop(t testing.TB, l *storage.Loop, sink engine.Sink, job *engine.Job) error {
	t.Helper()
	err, stopped := storage.Call(l, func(done func(error)) { applyChecked(t, sink, job, done) })
	if stopped != nil {
		t.Fatalf("loop: %v", stopped)
	}
	return err
}

// tb is what the helpers need of *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// seedsMax is how many seeds a seed loop runs: n, or a quarter of it
// under the race detector (enough to reach every path the loops check
// for; they fail if not).
func seedsMax(n uint64) uint64 {
	if raceEnabled {
		return n / 4
	}
	return n
}
