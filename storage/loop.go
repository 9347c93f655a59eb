package storage

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStopped: the loop stopped (Stop or a cancelled Run context) before a
// Call's completion arrived.
var ErrStopped = errors.New("storage: loop stopped")

// Loop is the engine's event loop. One goroutine, the one inside Run,
// runs posted functions one at a time in the order they were posted, so
// the engine — which is single-threaded by design (docs/DESIGN.md §3) — never sees
// two of its callbacks at once. Worker goroutines never touch engine state;
// they Post a closure and the loop runs it.
//
// Stopping is how a process "dies" here: once Stop has been called or
// Run's context is done, no posted function runs again, including ones
// already queued. Workers that finish later post into the void. That is
// the production analogue of the simulator's crash, and the port contract
// ("when the process dies, pending callbacks never run") depends on it.
//
// The queue is unbounded on purpose. Posting is done by workers whose
// number the engine bounds (requests in flight, timers armed), and a
// bounded queue would make Post block; a function running on the loop that
// posts (Call from a nested helper, a timer firing) could then deadlock the
// loop against itself.
type Loop struct {
	origin time.Time // Clock's origin; carries Go's monotonic reading

	mu sync.Mutex
	// INVARIANT: queue[head:] holds the functions not yet run, in post
	// order; both are reset when the queue drains and when stopped.
	queue   []func()
	head    int
	stopped bool
	running bool // Run has been called

	// background counts Executor.Background work still running: the host
	// waits for it on Kill, so that after Close nothing the engine handed
	// off (a committed set's releases) still holds a batch.
	background sync.WaitGroup

	wake     chan struct{} // capacity 1: "the queue may be non-empty"
	halt     chan struct{} // closed by Stop
	haltOnce sync.Once
}

// NewLoop returns a loop that queues posted functions until Run starts.
func NewLoop() *Loop {
	return &Loop{
		origin: time.Now(),
		wake:   make(chan struct{}, 1),
		halt:   make(chan struct{}),
	}
}

// Post queues fn to run on the loop goroutine after every function posted
// before it. It is safe from any goroutine, never blocks on the loop, and
// never runs fn itself. After Stop, Post drops fn.
func (l *Loop) Post(fn func()) {
	if fn == nil {
		panic("storage: Loop.Post(nil)")
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.queue = append(l.queue, fn)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is already pending; it will see fn
	}
}

// Run runs posted functions until ctx is done or Stop is called, then
// stops the loop for good. It returns ctx.Err() when the context ended it
// and nil after Stop. A loop runs once: a second Run panics.
func (l *Loop) Run(ctx context.Context) error {
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		panic("storage: Loop.Run called twice")
	}
	l.running = true
	l.mu.Unlock()
	defer l.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.halt:
			return nil
		case <-l.wake:
		}
		l.drain(ctx)
	}
}

// drain runs queued functions until the queue is empty. It re-checks stop
// and ctx before each one, so a Stop from inside a function (or from
// another goroutine) takes effect before the next function, not after the
// whole batch.
func (l *Loop) drain(ctx context.Context) {
	for ctx.Err() == nil {
		fn := l.next()
		if fn == nil {
			return
		}
		fn()
	}
}

// next pops the oldest queued function, or returns nil when there is none
// or the loop has stopped.
func (l *Loop) next() func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.head == len(l.queue) {
		l.queue, l.head = l.queue[:0], 0 // reuse the backing array
		return nil
	}
	fn := l.queue[l.head]
	l.queue[l.head] = nil // let the closure be collected
	l.head++
	return fn
}

// Stop stops the loop: queued and later posted functions never run, and
// Run returns. A function already running finishes. Safe from any
// goroutine, including the loop's own; calling it again is a no-op.
func (l *Loop) Stop() {
	l.mu.Lock()
	l.stopped = true
	l.queue, l.head = nil, 0
	l.mu.Unlock()
	l.haltOnce.Do(func() { close(l.halt) })
}

// Done is closed once the loop has stopped.
func (l *Loop) Done() <-chan struct{} { return l.halt }

// Call runs start on the loop and blocks until start's done is called
// (also on the loop), returning the value given to done. It is the bridge
// for goroutines outside the loop — cmd wiring, tests — that need to call
// engine methods, which may only be called on the loop. If the loop stops
// before done runs, Call returns ErrStopped.
//
// REQUIRES: not called on the loop goroutine (it would wait for itself),
// and done is called at most once.
func Call[T any](l *Loop, start func(done func(T))) (T, error) {
	result := make(chan T, 1)
	l.Post(func() {
		start(func(v T) {
			select {
			case result <- v:
			default:
				panic("storage: Call: done called twice")
			}
		})
	})
	select {
	case v := <-result:
		return v, nil
	case <-l.halt:
		select {
		case v := <-result: // done ran just before the stop
			return v, nil
		default:
			var zero T
			return zero, ErrStopped
		}
	}
}
