package sim

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

func newSched(seed uint64) *Scheduler {
	return NewScheduler(NewRand(seed), NewTrace(), SchedulerConfig{})
}

// Events run in time order, including events scheduled by events, and the
// clock follows them; events due at the same instant run in a seeded
// order that is not always scheduling order, and the same seed gives the
// same order. Catches a heap that is not a heap, FIFO ties, or ties that
// do not come from the seed.
func TestSchedulerOrder(t *testing.T) {
	a, b := runOrder(t, 1), runOrder(t, 1)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different same-instant order")
	}
	if c := runOrder(t, 2); slices.Equal(a, c) {
		t.Fatal("seeds 1 and 2 ordered every tie alike")
	}
}

type stamp struct {
	at time.Duration
	id int
}

func runOrder(t *testing.T, seed uint64) []stamp {
	s := newSched(seed)
	r := NewRand(99)
	var ran []stamp
	id := 0
	var add func(depth int)
	add = func(depth int) {
		at := s.Now() + time.Duration(r.Intn(5))*time.Millisecond // many ties
		me := id
		id++
		s.At(at, func() {
			if s.Now() != at {
				t.Fatalf("event for %v ran at %v", at, s.Now())
			}
			ran = append(ran, stamp{at, me})
			if depth < 3 {
				add(depth + 1)
				add(depth + 1)
			}
		})
	}
	for range 50 {
		add(0)
	}
	s.Run(1 << 20)
	if len(ran) != 50*15 || s.Steps() != uint64(len(ran)) {
		t.Fatalf("ran %d events, steps %d", len(ran), s.Steps())
	}
	if !slices.IsSortedFunc(ran, func(a, b stamp) int { return int(a.at - b.at) }) {
		t.Fatal("events not in time order")
	}
	// Ids are assigned in scheduling order: some ties must run out of it.
	if slices.IsSortedFunc(ran, func(a, b stamp) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.id - b.id
	}) {
		t.Fatal("every same-instant tie ran in scheduling order (FIFO)")
	}
	return ran
}

// Events of a killed incarnation never run and do not move the clock;
// world events and other incarnations' events still run.
func TestSchedulerKilledIncarnation(t *testing.T) {
	s := newSched(2)
	a, b := s.NewIncarnation(), s.NewIncarnation()
	var ran []string
	a.After(time.Second, func() { ran = append(ran, "a") })
	a.After(time.Hour, func() { ran = append(ran, "a-late") })
	b.After(2*time.Second, func() { ran = append(ran, "b") })
	s.After(3*time.Second, func() { ran = append(ran, "world") })
	a.Kill()
	a.Kill() // idempotent
	s.Run(100)
	if !slices.Equal(ran, []string{"b", "world"}) || s.Dropped() != 2 || s.Steps() != 2 {
		t.Fatalf("ran %v dropped %d steps %d", ran, s.Dropped(), s.Steps())
	}
	if s.Now() != 3*time.Second {
		t.Fatalf("a dropped event moved the clock to %v", s.Now())
	}
	if a.Alive() || !b.Alive() || a.ID() != 1 || b.ID() != 2 {
		t.Fatal("incarnation state")
	}
}

// Timer cancel: once cancel returned, fn never runs and the clock never
// jumps to the cancelled deadline; cancel after firing or twice is a
// no-op; a dead incarnation's timers never fire.
func TestTimerCancel(t *testing.T) {
	s := newSched(3)
	inc := s.NewIncarnation()
	tm := inc.Timers()
	fired := map[string]time.Duration{}
	mark := func(name string) func() { return func() { fired[name] = s.Now() } }

	cancelA := tm.AfterFunc(time.Hour, mark("a"))
	cancelB := tm.AfterFunc(time.Second, mark("b"))
	tm.AfterFunc(2*time.Second, func() {
		mark("c")()
		cancelA() // cancelling from inside another timer's callback
	})
	s.Run(100)
	if _, ok := fired["a"]; ok {
		t.Fatal("a cancelled timer fired")
	}
	if fired["b"] != time.Second || fired["c"] != 2*time.Second {
		t.Fatalf("fired %v", fired)
	}
	if s.Now() != 2*time.Second {
		t.Fatalf("the clock advanced to a cancelled timer's deadline: %v", s.Now())
	}
	cancelB() // after it fired
	cancelA() // twice
	d := tm.AfterFunc(time.Second, mark("d"))
	inc.Kill()
	s.Run(100)
	d()
	if _, ok := fired["d"]; ok {
		t.Fatal("a dead incarnation's timer fired")
	}
}

// Executor work runs after a delay, immediately before done, never inside
// Go; a dead incarnation's work and done never run.
func TestExecutor(t *testing.T) {
	s := newSched(4)
	inc := s.NewIncarnation()
	var log []string
	inCall := true
	inc.Executor().Go(func() {
		if inCall {
			t.Fatal("work ran inside Go")
		}
		log = append(log, "work")
	}, func() { log = append(log, "done") })
	inCall = false
	if len(log) != 0 {
		t.Fatal("executor ran synchronously")
	}
	s.Run(10)
	if !slices.Equal(log, []string{"work", "done"}) || s.Now() == 0 {
		t.Fatalf("log %v at %v", log, s.Now())
	}
	inc.Executor().Go(func() { log = append(log, "dead-work") }, func() { log = append(log, "dead-done") })
	inc.Kill()
	s.Run(10)
	if len(log) != 2 {
		t.Fatalf("dead incarnation's executor ran: %v", log)
	}
}

// Monotonic is simulated time; wall time is the epoch plus it.
func TestClock(t *testing.T) {
	s := NewScheduler(NewRand(1), NewTrace(), SchedulerConfig{EpochUnixMs: 1_000_000})
	c := s.Clock()
	s.RunUntil(2500 * time.Millisecond)
	if c.Monotonic() != 2500*time.Millisecond || c.WallUnixMs() != 1_002_500 {
		t.Fatalf("clock %v %d", c.Monotonic(), c.WallUnixMs())
	}
	if newSched(1).Clock().WallUnixMs() != 1785542400000 {
		t.Fatal("default epoch is not 2026-08-01T00:00:00Z")
	}
}

// Split streams are independent of each other and of draws on the parent;
// the helpers stay in range. Catches Split deriving from the parent's
// state (adding a subsystem would shift every other stream).
func TestRandSplit(t *testing.T) {
	root := NewRand(7)
	a1 := root.Split("store").Uint64()
	root.Uint64()
	root.Split("disk").Uint64()
	if root.Split("store").Uint64() != a1 {
		t.Fatal("a child stream depends on draws made elsewhere")
	}
	if root.Split("store").Uint64() == root.Split("disk").Uint64() || NewRand(8).Split("store").Uint64() == a1 {
		t.Fatal("distinct labels or seeds give the same stream")
	}
	r := NewRand(1)
	var sum time.Duration
	for range 10000 {
		if v := r.Intn(7); v < 0 || v >= 7 {
			t.Fatalf("Intn out of range: %d", v)
		}
		if d := r.Duration(3, 5); d < 3 || d > 5 {
			t.Fatalf("Duration out of range: %v", d)
		}
		sum += r.Exp(time.Millisecond)
	}
	if mean := sum / 10000; mean < 800*time.Microsecond || mean > 1200*time.Microsecond {
		t.Fatalf("Exp mean %v, want about 1ms", mean)
	}
}

// The determinism oracle: a randomized workload (store, disk, timers,
// executor, faults, kills and crashes) gives the same trace hash and the
// same text trace twice for one seed, and a different hash for another
// seed. Turning the text dump on does not change the hash.
func TestDeterminism(t *testing.T) {
	var text1, text2 bytes.Buffer
	h1, steps := runWorkload(1, 20000, &text1)
	h2, _ := runWorkload(1, 20000, &text2)
	h3, _ := runWorkload(1, 20000, nil)
	h4, _ := runWorkload(2, 20000, nil)
	if h1 != h2 || h1 != h3 {
		t.Fatalf("same seed, different hashes: %x %x %x", h1, h2, h3)
	}
	if !bytes.Equal(text1.Bytes(), text2.Bytes()) {
		t.Fatal("same seed, different text traces")
	}
	if h1 == h4 {
		t.Fatal("different seeds, same hash")
	}
	if steps < 20000 {
		t.Fatalf("the workload went idle after %d steps", steps)
	}
}

func TestTraceText(t *testing.T) {
	var b bytes.Buffer
	tr := NewTrace()
	tr.SetWriter(&b)
	tr.Begin(1500*time.Millisecond+250*time.Microsecond, KindStoreIssue).U("req", 3).S("key", "a/b").I("d", -1).End()
	if got := b.String(); got != "1.500250000 store.issue req=3 key=\"a/b\" d=-1\n" {
		t.Fatalf("line %q", got)
	}
	quiet := NewTrace()
	quiet.Begin(1500*time.Millisecond+250*time.Microsecond, KindStoreIssue).U("other-name", 3).S("k", "a/b").I("x", -1).End()
	if quiet.Hash() != tr.Hash() || quiet.Events() != 1 {
		t.Fatal("field names or the writer changed the hash")
	}
	for _, pair := range [][2][]string{{{"ab", "c"}, {"a", "bc"}}, {{"a"}, {"a\x00"}}, {{"12345678"}, {"12345678\x00"}}} {
		a, b := NewTrace(), NewTrace()
		a.Begin(0, KindStoreIssue)
		for _, v := range pair[0] {
			a.S("k", v)
		}
		a.End()
		b.Begin(0, KindStoreIssue)
		for _, v := range pair[1] {
			b.S("k", v)
		}
		b.End()
		if a.Hash() == b.Hash() {
			t.Fatalf("string fields alias: %q %q", pair[0], pair[1])
		}
	}
}
