package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Workers is engine.Blocking: a fixed pool of goroutines that run blocking
// calls (database transactions) and post each answer back to the loop.
//
// At most n calls run at once; the rest wait in a queue in call order. A
// call's ctx ends after the per-call limit or when the loop stops, and an
// answer that arrives after the loop stopped is dropped by the loop, as a
// crash drops it (engine.Blocking's contract).
type Workers struct {
	loop    *Loop
	limit   time.Duration
	queue   chan blockingCall
	stopped context.Context
}

type blockingCall struct {
	work func(ctx context.Context) error
	done func(error)
}

// NewWorkers starts n workers for loop; each call may run for at most
// limit. They exit when the loop stops.
func NewWorkers(loop *Loop, n int, limit time.Duration) *Workers {
	if n <= 0 || limit <= 0 {
		panic(fmt.Sprintf("storage: NewWorkers(n=%d, limit=%v): both must be positive", n, limit))
	}
	stopped, cancel := context.WithCancel(context.Background())
	w := &Workers{loop: loop, limit: limit, queue: make(chan blockingCall, 4*n), stopped: stopped}
	go func() {
		<-loop.Done()
		cancel()
	}()
	for range n {
		go w.run()
	}
	return w
}

var _ engine.Blocking = (*Workers)(nil)

// Do implements engine.Blocking. It never blocks the loop: when the queue
// is full the call waits on a goroutine of its own.
func (w *Workers) Do(work func(ctx context.Context) error, done func(error)) {
	if work == nil || done == nil {
		panic("storage: Workers.Do with a nil function")
	}
	c := blockingCall{work, done}
	select {
	case w.queue <- c:
	default:
		go func() {
			select {
			case w.queue <- c:
			case <-w.stopped.Done():
			}
		}()
	}
}

func (w *Workers) run() {
	for {
		select {
		case <-w.stopped.Done():
			return
		case c := <-w.queue:
			ctx, cancel := context.WithTimeout(w.stopped, w.limit)
			err := c.work(ctx)
			cancel()
			w.loop.Post(func() { c.done(err) })
		}
	}
}
