package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// blockingRun is what a test saw of one call.
type blockingRun struct {
	ran, done   bool
	ranAt       time.Duration
	doneAt      time.Duration
	ctxEnded    bool
	doneErr     error
	runningThen int // the port's started calls when this work ran
}

// doCalls issues n calls on b and records what happens to each.
func doCalls(s *Scheduler, b *blockingPort, n int) []*blockingRun {
	runs := make([]*blockingRun, n)
	for i := range runs {
		r := &blockingRun{}
		runs[i] = r
		b.Do(func(ctx context.Context) error {
			r.ran, r.ranAt, r.ctxEnded, r.runningThen = true, s.Now(), ctx.Err() != nil, b.running
			if i%2 == 1 {
				return errors.New("odd call fails")
			}
			return nil
		}, func(err error) {
			r.done, r.doneAt, r.doneErr = true, s.Now(), err
		})
	}
	return runs
}

func newBlocking(inc *Incarnation, cfg BlockingConfig) *blockingPort {
	return inc.Blocking(NewRand(7), cfg).(*blockingPort)
}

// Work runs later than Do and done later still, on the loop, with work's
// error; never more calls at once than the pool's workers; calls start
// in the order they were made.
func TestBlockingRunsLaterWithinItsWorkers(t *testing.T) {
	s := newSched(1)
	inc := s.NewIncarnation()
	b := newBlocking(inc, BlockingConfig{Workers: 2})
	runs := doCalls(s, b, 6)
	if runs[0].ran || runs[0].done {
		t.Fatal("work or done ran inside Do")
	}
	s.Run(1 << 10)
	for i, r := range runs {
		switch {
		case !r.ran || !r.done:
			t.Fatalf("call %d: ran %v done %v", i, r.ran, r.done)
		case r.ranAt <= 0 || r.doneAt <= r.ranAt:
			t.Fatalf("call %d ran at %v, done at %v", i, r.ranAt, r.doneAt)
		case (r.doneErr != nil) != (i%2 == 1):
			t.Fatalf("call %d answered %v", i, r.doneErr)
		case r.runningThen < 1 || r.runningThen > 2:
			t.Fatalf("call %d ran with %d calls started, with 2 workers", i, r.runningThen)
		case r.ctxEnded:
			t.Fatalf("call %d ran with its ctx ended in a live process", i)
		}
	}
	if !runs[0].done || runs[2].ranAt < min(runs[0].doneAt, runs[1].doneAt) {
		t.Fatalf("the third call ran at %v, before a worker was free (%v, %v)", runs[2].ranAt, runs[0].doneAt, runs[1].doneAt)
	}
	if b.running != 0 || len(b.queue) != 0 {
		t.Fatalf("idle port: %d running, %d queued", b.running, len(b.queue))
	}
}

// A crash: queued calls never run, done never runs, and a started call
// runs after the death (with its ctx ended) exactly when the seed says
// it lands — always with LandAfterDeath 1, never with 0.
func TestBlockingCrash(t *testing.T) {
	for _, c := range []struct {
		name  string
		lands float64
	}{{"lands", 1}, {"vanishes", 0}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSched(2)
			inc := s.NewIncarnation()
			b := newBlocking(inc, BlockingConfig{Workers: 2, LandAfterDeath: c.lands})
			runs := doCalls(s, b, 5)
			inc.Kill()
			b.Do(func(context.Context) error { t.Fatal("a dead process's call ran"); return nil }, func(error) {})
			s.Run(1 << 10)
			for i, r := range runs {
				started := i < 2
				switch {
				case r.done:
					t.Fatalf("call %d: done ran after the crash", i)
				case r.ran != (started && c.lands == 1):
					t.Fatalf("call %d (started %v): ran %v with LandAfterDeath %v", i, started, r.ran, c.lands)
				case r.ran && !r.ctxEnded:
					t.Fatalf("call %d ran after its process died with a live ctx", i)
				}
			}
		})
	}
}

// A paused process's work runs (its request was sent); its done waits
// for Resume.
func TestBlockingPause(t *testing.T) {
	s := newSched(3)
	inc := s.NewIncarnation()
	b := newBlocking(inc, BlockingConfig{Workers: 1})
	runs := doCalls(s, b, 1)
	inc.Pause()
	s.RunUntil(time.Hour)
	if !runs[0].ran || runs[0].done {
		t.Fatalf("paused: ran %v done %v", runs[0].ran, runs[0].done)
	}
	inc.Resume()
	s.Run(1 << 10)
	if !runs[0].done || runs[0].doneAt < time.Hour {
		t.Fatalf("resumed: done %v at %v", runs[0].done, runs[0].doneAt)
	}
}

// Same seed, same times; another seed, other times.
func TestBlockingDeterministic(t *testing.T) {
	times := func(seed uint64) []time.Duration {
		s := newSched(seed)
		inc := s.NewIncarnation()
		b := inc.Blocking(NewRand(seed), BlockingConfig{Workers: 3}).(*blockingPort)
		runs := doCalls(s, b, 20)
		s.Run(1 << 12)
		var out []time.Duration
		for _, r := range runs {
			out = append(out, r.ranAt, r.doneAt)
		}
		return out
	}
	if a, b := times(4), times(4); !slices.Equal(a, b) {
		t.Fatal("same seed, different times")
	}
	if a, c := times(4), times(5); slices.Equal(a, c) {
		t.Fatal("seeds 4 and 5 drew the same times")
	}
}

// A call that runs out of its time limit: done gets the deadline, never
// work's own answer, and the work landed (with its ctx ended) exactly
// when the seed says — always with LandAfterDeath 1, never with 0.
func TestBlockingTimeout(t *testing.T) {
	for _, c := range []struct {
		name  string
		lands float64
	}{{"lands", 1}, {"vanishes", 0}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSched(3)
			inc := s.NewIncarnation()
			b := newBlocking(inc, BlockingConfig{Workers: 2, LandAfterDeath: c.lands, TimeoutChance: 1})
			runs := doCalls(s, b, 4)
			s.Run(1 << 10)
			for i, r := range runs {
				switch {
				case !r.done || !errors.Is(r.doneErr, context.DeadlineExceeded):
					t.Fatalf("call %d: done %v with %v, want the deadline", i, r.done, r.doneErr)
				case r.ran != (c.lands == 1):
					t.Fatalf("call %d: ran %v with LandAfterDeath %v", i, r.ran, c.lands)
				case r.ran && !r.ctxEnded:
					t.Fatalf("call %d ran past its time limit with a live ctx", i)
				}
			}
			if b.running != 0 || len(b.queue) != 0 {
				t.Fatalf("idle port: %d running, %d queued", b.running, len(b.queue))
			}
		})
	}
}
