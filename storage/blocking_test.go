package storage

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Workers run at most n calls at once, answer each on the loop with its
// error, and take more calls than n without blocking the caller.
func TestWorkersBoundAndAnswerOnTheLoop(t *testing.T) {
	l := startLoop(t)
	loopID := loopGoroutine(t, l)
	const n, calls = 3, 20
	w := NewWorkers(l, n, time.Minute)
	var running, peak atomic.Int32
	answers := make(chan error, calls)
	wantErr := errors.New("call 7 failed")
	for i := range calls {
		l.Post(func() {
			w.Do(func(context.Context) error {
				now := running.Add(1)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				running.Add(-1)
				if i == 7 {
					return wantErr
				}
				return nil
			}, func(err error) {
				if id := goroutineID(); id != loopID {
					t.Errorf("done ran on goroutine %d, the loop is %d", id, loopID)
				}
				answers <- err
			})
		})
	}
	failed := 0
	for range calls {
		select {
		case err := <-answers:
			if err != nil {
				if !errors.Is(err, wantErr) {
					t.Fatalf("answer %v", err)
				}
				failed++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("not every call was answered")
		}
	}
	if p := peak.Load(); p > n || p < 2 {
		t.Fatalf("peak %d calls at once with %d workers", p, n)
	}
	if failed != 1 {
		t.Fatalf("%d failed answers, want 1", failed)
	}
}

// A call's ctx ends at the per-call limit, and when the loop stops; an
// answer after the stop is never delivered.
func TestWorkersLimitAndStop(t *testing.T) {
	l := startLoop(t)
	w := NewWorkers(l, 1, 20*time.Millisecond)
	got := make(chan error, 1)
	l.Post(func() {
		w.Do(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, func(err error) { got <- err })
	})
	select {
	case err := <-got:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("answer %v, want the deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the limit did not end the call")
	}

	l2 := NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() { defer close(exited); _ = l2.Run(ctx) }()
	w2 := NewWorkers(l2, 1, time.Minute)
	started, ended := make(chan struct{}), make(chan error, 1)
	var answered atomic.Bool
	l2.Post(func() {
		w2.Do(func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			ended <- ctx.Err()
			return ctx.Err()
		}, func(error) { answered.Store(true) })
	})
	<-started
	cancel()
	<-exited
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("work saw %v, want its ctx cancelled by the stop", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stopping the loop did not end the call's ctx")
	}
	time.Sleep(20 * time.Millisecond)
	if answered.Load() {
		t.Fatal("a call was answered after its loop stopped")
	}
}
