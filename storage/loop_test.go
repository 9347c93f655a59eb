package storage

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// startLoop runs a loop for the test and stops it (waiting for Run to
// return) at cleanup.
func startLoop(t testing.TB) *Loop {
	t.Helper()
	l := NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return l
}

// sync waits until everything posted so far has run.
func syncLoop(t *testing.T, l *Loop) {
	t.Helper()
	if _, err := Call(l, func(done func(struct{})) { done(struct{}{}) }); err != nil {
		t.Fatalf("loop: %v", err)
	}
}

// goroutineID parses the current goroutine's id from its stack header
// ("goroutine 17 [running]:"). Test-only: it is how the tests tell the
// loop goroutine from workers.
func goroutineID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	id, err := strconv.ParseUint(string(bytes.Fields(buf[:n])[1]), 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// loopGoroutine returns the id of l's goroutine.
func loopGoroutine(t *testing.T, l *Loop) uint64 {
	t.Helper()
	id, err := Call(l, func(done func(uint64)) { done(goroutineID()) })
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// queued is how many functions wait in l's queue.
func (l *Loop) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue) - l.head
}

func TestLoopRunsPostsFromOneGoroutineInOrder(t *testing.T) {
	l := NewLoop()
	const n = 10000
	var got []int // loop-only
	for i := range n / 2 {
		l.Post(func() { got = append(got, i) }) // queued before Run starts
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = l.Run(ctx) }()
	for i := n / 2; i < n; i++ {
		l.Post(func() { got = append(got, i) })
	}
	syncLoop(t, l)
	if len(got) != n {
		t.Fatalf("ran %d of %d posts", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("post %d ran in position %d", v, i)
		}
	}
}

func TestLoopPostFromTheLoopRunsLaterNotInside(t *testing.T) {
	l := startLoop(t)
	order, err := Call(l, func(done func([]string)) {
		var order []string
		l.Post(func() { order = append(order, "posted"); done(order) })
		order = append(order, "poster returned")
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "poster returned" {
		t.Fatalf("order %q: the posted function ran inside Post", order)
	}
}

func TestLoopStopDiscardsQueuedAndLaterPosts(t *testing.T) {
	l := NewLoop()
	exited := make(chan error)
	go func() { exited <- l.Run(context.Background()) }()
	var ranAfterStop atomic.Bool
	gate := make(chan struct{})
	l.Post(func() {
		<-gate // hold the loop while more is queued behind us
		l.Stop()
	})
	l.Post(func() { ranAfterStop.Store(true) }) // queued before Stop
	close(gate)
	if err := <-exited; err != nil {
		t.Fatalf("Run after Stop: %v, want nil", err)
	}
	// A worker that finishes after the loop died posts into the void.
	worker := make(chan struct{})
	go func() {
		l.Post(func() { ranAfterStop.Store(true) })
		close(worker)
	}()
	<-worker
	if ranAfterStop.Load() {
		t.Fatal("a function ran after Stop")
	}
	if l.queued() != 0 {
		t.Fatalf("%d functions still queued after Stop", l.queued())
	}
}

func TestLoopContextCancelStopsIt(t *testing.T) {
	l := NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan error)
	go func() { exited <- l.Run(ctx) }()
	syncLoop(t, l)
	cancel()
	if err := <-exited; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	ran := false
	l.Post(func() { ran = true })
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Run returned")
	}
	if ran || l.queued() != 0 {
		t.Fatalf("post after cancel: ran=%v queued=%d", ran, l.queued())
	}
}

func TestLoopRunTwicePanics(t *testing.T) {
	l := startLoop(t)
	syncLoop(t, l)
	defer func() {
		if recover() == nil {
			t.Fatal("second Run did not panic")
		}
	}()
	_ = l.Run(context.Background())
}

func TestCallReturnsTheValueOrErrStopped(t *testing.T) {
	l := startLoop(t)
	v, err := Call(l, func(done func(int)) { l.Post(func() { done(42) }) })
	if err != nil || v != 42 {
		t.Fatalf("Call: %d %v, want 42 nil", v, err)
	}
	// A completion that never comes: Stop must release the caller.
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Stop()
	}()
	if _, err := Call(l, func(done func(int)) {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Call on a stopped loop: %v, want ErrStopped", err)
	}
	if _, err := Call(l, func(done func(int)) { done(1) }); !errors.Is(err, ErrStopped) {
		t.Fatalf("Call after Stop: %v, want ErrStopped", err)
	}
}

func TestTimerFiresOnTheLoopAfterTheDelay(t *testing.T) {
	l := startLoop(t)
	loopID := loopGoroutine(t, l)
	clock := l.Clock()
	const delay = 20 * time.Millisecond
	type fired struct {
		elapsed time.Duration
		onLoop  bool
	}
	got, err := Call(l, func(done func(fired)) {
		armed := clock.Monotonic()
		Timers{loop: l}.AfterFunc(delay, func() {
			done(fired{clock.Monotonic() - armed, goroutineID() == loopID})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.elapsed < delay || !got.onLoop {
		t.Fatalf("timer fired after %v (want >= %v), on loop: %v", got.elapsed, delay, got.onLoop)
	}
}

// A timer that has fired while the loop was busy has its Post queued;
// a cancel that runs before that Post must still win.
func TestTimerCancelWinsOverAQueuedFire(t *testing.T) {
	l := startLoop(t)
	timers := Timers{loop: l}
	var ran atomic.Bool
	_, err := Call(l, func(done func(struct{})) {
		cancel := timers.AfterFunc(time.Millisecond, func() { ran.Store(true) })
		// Hold the loop until the timer's post is queued behind us.
		deadline := time.Now().Add(5 * time.Second)
		for l.queued() == 0 {
			if time.Now().After(deadline) {
				t.Error("the timer never posted")
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		cancel() // twice is a no-op
		done(struct{}{})
	})
	if err != nil {
		t.Fatal(err)
	}
	syncLoop(t, l) // the queued fire has now been processed
	if ran.Load() {
		t.Fatal("a cancelled timer ran")
	}
}

func TestTimerCancelBeforeFireAndAfterFire(t *testing.T) {
	l := startLoop(t)
	timers := Timers{loop: l}
	var early, late atomic.Int32
	_, err := Call(l, func(done func(struct{})) {
		timers.AfterFunc(30*time.Millisecond, func() { early.Add(1) })()
		var cancel func()
		cancel = timers.AfterFunc(0, func() {
			late.Add(1)
			cancel() // after fn ran: a no-op
			done(struct{}{})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // past the cancelled timer's delay
	syncLoop(t, l)
	if early.Load() != 0 || late.Load() != 1 {
		t.Fatalf("cancelled timer ran %d times (want 0), live timer %d (want 1)", early.Load(), late.Load())
	}
}

// A timer due now is queued on the loop directly: it runs after the
// calling function returns, in post order, and a cancel before then wins.
func TestTimerDueNowRunsLaterInPostOrder(t *testing.T) {
	l := startLoop(t)
	timers := Timers{loop: l}
	got, err := Call(l, func(done func([]string)) {
		var order []string
		timers.AfterFunc(0, func() { order = append(order, "first") })
		timers.AfterFunc(-time.Second, func() { order = append(order, "cancelled") })()
		l.Post(func() { order = append(order, "post") })
		timers.AfterFunc(0, func() { order = append(order, "last"); done(order) })
		order = append(order, "caller")
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"caller", "first", "post", "last"}; !slices.Equal(got, want) {
		t.Fatalf("ran in order %q, want %q", got, want)
	}
}

func TestExecutorRunsWorkOffTheLoopAndDoneOnIt(t *testing.T) {
	l := startLoop(t)
	loopID := loopGoroutine(t, l)
	var workID atomic.Uint64
	release := make(chan struct{})
	type result struct {
		doneOnLoop, returnedFirst bool
	}
	got, err := Call(l, func(finish func(result)) {
		returned := false
		Executor{loop: l}.Go(func() {
			workID.Store(goroutineID())
			<-release // the loop stays free while work blocks
		}, func() {
			finish(result{goroutineID() == loopID, returned})
		})
		returned = true
		l.Post(func() { close(release) }) // runs only if the loop is not blocked by work
	})
	if err != nil {
		t.Fatal(err)
	}
	if workID.Load() == loopID || workID.Load() == 0 {
		t.Fatalf("work ran on goroutine %d, the loop is %d", workID.Load(), loopID)
	}
	if !got.doneOnLoop || !got.returnedFirst {
		t.Fatalf("done on loop: %v; Go returned before done: %v", got.doneOnLoop, got.returnedFirst)
	}
}

func TestClockAndRand(t *testing.T) {
	l := NewLoop()
	c := l.Clock()
	a := c.Monotonic()
	time.Sleep(2 * time.Millisecond)
	if b := c.Monotonic(); b < a+2*time.Millisecond {
		t.Fatalf("monotonic went from %v to %v over a 2ms sleep", a, b)
	}
	if d := time.Now().UnixMilli() - c.WallUnixMs(); d < -1000 || d > 1000 {
		t.Fatalf("wall clock %d ms away from time.Now", d)
	}
	// Two generators seeded from the OS agree on a first draw with
	// probability 2^-64.
	if r1, r2 := NewRand(), NewRand(); r1.Uint64() == r2.Uint64() {
		t.Fatal("two generators drew the same first value: not seeded from entropy?")
	}
	p := l.Ports(nil, nil)
	if p.Clock == nil || p.Rand == nil || p.Timers == nil || p.Exec == nil {
		t.Fatalf("Ports left a loop port unset: %+v", p)
	}
}

// The production executor takes background work (engine.Background),
// which runs off the loop with nothing posted back.
func TestExecutorRunsBackgroundWorkOffTheLoop(t *testing.T) {
	l := startLoop(t)
	loopID := loopGoroutine(t, l)
	var bg engine.Background = Executor{loop: l}
	ran := make(chan uint64, 1)
	bg.Background(func() { ran <- goroutineID() })
	if id := <-ran; id == loopID {
		t.Fatal("background work ran on the loop")
	}
	if n := l.queued(); n != 0 {
		t.Fatalf("%d functions posted to the loop; want none", n)
	}
}
