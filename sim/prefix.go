package sim

import (
	"errors"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// A prefix source (SourceSpec.Prefix) is the real objects source
// (sources/objects, supplied by cmd/simulate through Config.Prefix) run
// in the world: an outside producer drops objects under
// landing/{name}/ in the world's store (prefix_objects.go) — at its own
// pace, crashes or not — and the source lists the prefix (with the
// store's listing lag and faults), reads the objects (ranged GETs) and
// ingests them, a unit per chunk of text or span of row groups,
// resuming after every crash from the recovered offsets; the world maps
// every unit back to the rows it must hold (prefix_units.go).
//
// The source's code is blocking (production runs it on goroutines: its
// Run, and a task per object in flight), so the world runs each as a
// coroutine (iter.Pull): each call one makes of the Blocking port
// suspends it, the world carries the call out in simulated time and
// resumes that coroutine with the answer. Only one of them, or the
// world, ever runs, so the run stays deterministic.

// landingRoot is where the world's outside producer drops objects.
const landingRoot = "landing/"

// Blocking is what a prefix source may call; each call returns once the
// world answered it.
type Blocking interface {
	// List lists a page of the objects under prefix whose keys sort after
	// prefix+after; next is where the next page starts ("": none).
	List(prefix, after string) (page []engine.ObjectInfo, next string, err error)
	// Get reads n bytes of key from off; n < 0 reads to the end.
	Get(key string, off, n int64) ([]byte, error)
	// Ingest hands a unit to the host and returns its answer.
	Ingest(u engine.Unit) error
	// Sleep waits d of simulated time.
	Sleep(d time.Duration)
	// Go starts fn as a task: a coroutine of its own.
	Go(fn func())
	// Wait returns once a task started by Go has ended; each ended task
	// answers one Wait.
	Wait()
	// Now is the world's time (a date: the Unix epoch plus the time
	// since the world began).
	Now() time.Time
}

// PrefixRunner is one run of a prefix source, built for one engine
// incarnation.
type PrefixRunner interface {
	// Run runs the source over b until it fails (its error) or is
	// stopped; offsets are the host's recovered offsets.
	Run(b Blocking, offsets segment.Offsets) error
	// Skipped is how many objects this run skipped as unreadable
	// (on_error "skip"; sources/objects Stats.ObjectsSkipped).
	Skipped() uint64
}

// PrefixOptions configure the objects source of a prefix source.
type PrefixOptions struct {
	Name      string // the source's name, part of its offset keys
	Prefix    string // the store prefix it reads
	Namespace string
	Sink      string
	// ChunkBytes bounds a unit's text or row groups (SourceSpec.
	// ChunkBytes); 0: the source's default.
	ChunkBytes int64
	// Skip: an object that cannot be ingested is skipped and counted
	// (on_error "skip"); otherwise it stops the source.
	Skip bool
	// OrderKeys: the source keeps a floor (order "keys", settle Settle);
	// InFlight: objects it ingests at once (0: its default).
	OrderKeys bool
	Settle    time.Duration
	InFlight  int
	// Once: the source lists once, ingests that listing and returns
	// (sources/objects Config.Once); a listing or read error of the store
	// then ends the run wrapped in ErrPrefixOnceStore (prefix_once.go).
	Once bool
}

// PrefixFactory builds a run of the prefix source opt describes; the
// source reads every object by its extension (format "auto").
type PrefixFactory func(opt PrefixOptions) PrefixRunner

// errUnwound stops a prefix source's coroutine from inside a call.
var errUnwound = errors.New("sim: prefix source stopped")

// call is one suspended call of a prefix source.
type call struct {
	kind   string // "list", "get", "ingest", "sleep", "go", "wait"
	key    string // list: the prefix; get: the key
	after  string // list
	off, n int64
	unit   engine.Unit
	d      time.Duration
	fn     func() // go
	// the answer
	listed []engine.ObjectInfo
	next   string
	body   []byte
	err    error
}

// blocking is the Blocking port of a run: a call suspends the coroutine
// running now.
type blocking struct{ r *prefixRun }

func (b blocking) do(c *call) *call {
	if !b.r.cur.yield(c) {
		panic(errUnwound)
	}
	return c
}

func (b blocking) List(prefix, after string) ([]engine.ObjectInfo, string, error) {
	c := b.do(&call{kind: "list", key: prefix, after: after})
	return c.listed, c.next, c.err
}

func (b blocking) Get(key string, off, n int64) ([]byte, error) {
	c := b.do(&call{kind: "get", key: key, off: off, n: n})
	return c.body, c.err
}

func (b blocking) Ingest(u engine.Unit) error { return b.do(&call{kind: "ingest", unit: u}).err }

func (b blocking) Sleep(d time.Duration) { b.do(&call{kind: "sleep", d: d}) }

func (b blocking) Go(fn func()) { b.do(&call{kind: "go", fn: fn}) }

func (b blocking) Wait() { b.do(&call{kind: "wait"}) }

func (b blocking) Now() time.Time { return time.Unix(0, 0).Add(b.r.s.w.sched.Now()) }

// coro is one coroutine of a run: the source's Run, or a task.
type coro struct {
	next  func() (*call, bool)
	stop  func()
	yield func(*call) bool
}

// prefixRun is one run of a prefix source: one engine incarnation's.
type prefixRun struct {
	s      *source
	gen    uint64
	runner PrefixRunner
	main   *coro   // the source's Run
	coros  []*coro // main and every task, to unwind them all
	cur    *coro   // the coroutine running now
	ended  int     // tasks ended that no Wait has answered
	waiter *coro   // a coroutine suspended in Wait, if any
	err    error
	// inFlight: ingest calls with the engine.
	inFlight int
	// pos is what the run's source holds of its offsets: the recovered
	// ones it started from, advanced by every unit answered nil — where
	// each object's next unit must start (prefix_units.go).
	pos map[string]uint64
	// acked: the offset keys this run advanced (a unit that starts mid-
	// object at a key it did not advance resumes after a crash).
	acked   map[string]bool
	skipped uint64 // the runner's Skipped when last seen
	floor   string // the greatest floor mark its units carried
	// listed: the offset keys of the objects its listings showed
	// (SourceSpec.Once: its one listing, prefix_once.go).
	listed []string
}

// startPrefix starts the source's run against the current engine.
func (s *source) startPrefix(offsets segment.Offsets) {
	s.stopPrefix()
	runner := s.w.cfg.Prefix(PrefixOptions{Name: s.spec.Name, Prefix: landingRoot + s.spec.Name + "/", Namespace: s.spec.Name,
		Sink: s.spec.sinkRef(), ChunkBytes: s.spec.ChunkBytes, Skip: s.spec.CorruptPermille > 0,
		OrderKeys: s.spec.OrderKeys, Settle: s.settle(), InFlight: s.spec.InFlight, Once: s.spec.Once})
	r := &prefixRun{s: s, gen: s.gen, runner: runner, pos: ownOffsets(offsets, s.spec.Name), acked: map[string]bool{}}
	if slices.ContainsFunc(offsets, func(o segment.Offset) bool {
		return strings.HasPrefix(o.Key, segment.FloorKey("objects/"+s.spec.Name+"/", ""))
	}) {
		s.w.mark(MarkPrefixFloorRecovered)
	}
	r.main = r.spawn(func() { r.err = runner.Run(blocking{r}, offsets) })
	s.run = r
	r.resume(r.main)
}

// settle is the Settle the source runs with: the drawn one, but at least
// the store's listing lag. Order "keys" promises nothing for an object
// that appears more than Settle after a higher one, and the world's
// producer drops objects in name order — only the listing lag makes one
// appear late; a world with more lag than Settle would break the
// contract it tests (its oracle finds the objects under the floor lost).
func (s *source) settle() time.Duration {
	if !s.spec.OrderKeys {
		return s.spec.Settle
	}
	return max(s.spec.Settle, s.w.storeCfg.ListLagMax+time.Second)
}

// spawn makes fn a coroutine of the run, not started.
func (r *prefixRun) spawn(fn func()) *coro {
	co := &coro{}
	co.next, co.stop = iter.Pull(func(yield func(*call) bool) {
		defer func() {
			if p := recover(); p != nil && p != errUnwound { //nolint:errorlint // a sentinel value
				panic(p)
			}
		}()
		co.yield = yield
		fn()
	})
	r.coros = append(r.coros, co)
	return co
}

// stopPrefix unwinds the running source, if any (a crash or a restart).
func (s *source) stopPrefix() {
	if s.run != nil {
		for _, co := range s.run.coros {
			co.stop()
		}
		s.run = nil
	}
}

// live reports whether r is still its source's run.
func (r *prefixRun) live() bool { return r.gen == r.s.gen && r.s.run == r }

// resume runs co until its next call, and carries that out.
func (r *prefixRun) resume(co *coro) {
	r.cur = co
	c, ok := co.next()
	r.cur = nil
	r.checkSkipped()
	if !ok {
		r.ended1(co)
		return
	}
	w := r.s.w
	answer := func() {
		if r.live() {
			r.resume(co)
		}
	}
	switch c.kind {
	case "sleep":
		w.sched.After(c.d, answer)
	case "list":
		r.list(c, answer)
	case "get":
		r.get(c, answer)
	case "ingest":
		r.ingest(c, answer)
	case "go":
		task := r.spawn(c.fn)
		w.sched.After(0, func() {
			if r.live() {
				r.resume(task)
			}
		})
		w.sched.After(0, answer)
	case "wait":
		if r.waiter != nil {
			r.s.w.oracle.fail("prefix source %s: two coroutines wait for tasks at once", r.s.spec.Name)
			return
		}
		r.waiter = co
		r.wake()
	default:
		panic("sim: prefix source call " + c.kind)
	}
}

// ended1 acts on a coroutine that returned: the Run (its error fails the
// world: a source stops only on an object it cannot ingest, and the
// world's source skips those), or a task (it answers a Wait).
func (r *prefixRun) ended1(co *coro) {
	switch {
	case co == r.main && r.s.spec.Once:
		r.onceEnded()
		return
	case co == r.main:
		if r.err != nil {
			r.s.w.oracle.fail("prefix source %s stopped: %v", r.s.spec.Name, r.err)
		}
		return
	}
	r.ended++
	r.wake()
}

// wake answers the coroutine waiting for a task, once one has ended.
func (r *prefixRun) wake() {
	if r.waiter == nil || r.ended == 0 {
		return
	}
	co := r.waiter
	r.waiter, r.ended = nil, r.ended-1
	r.s.w.sched.After(0, func() {
		if r.live() {
			r.resume(co)
		}
	})
}

// list lists one page of c's prefix after c.after.
func (r *prefixRun) list(c *call, answer func()) {
	w := r.s.w
	token := ""
	if c.after != "" {
		token = c.key + c.after
	}
	w.store.Client(w.inc).ListObjects(c.key, token, func(page engine.ListPage, err error) {
		c.listed, c.err = page.Objects, err
		if r.s.spec.Once {
			r.noteListed(c.key, page.Objects)
		}
		if page.NextToken != "" {
			c.next = strings.TrimPrefix(page.NextToken, c.key)
		}
		answer()
	})
}

// get reads c's range of c.key.
func (r *prefixRun) get(c *call, answer func()) {
	w := r.s.w
	in := engine.GetObjectInput{Key: c.key, Limit: 1 << 30}
	if c.off > 0 || c.n >= 0 {
		size := c.n
		if size < 0 {
			size = 1 << 30
		}
		in.Range = &engine.ByteRange{Start: c.off, Length: size}
	}
	w.store.Client(w.inc).GetObject(in, func(body []byte, _ engine.ObjectInfo, err error) {
		c.body, c.err = body, err
		answer()
	})
}
