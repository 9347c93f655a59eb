package sim

import (
	"errors"
	"iter"
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
// The source's code is blocking (production runs it on a goroutine), so
// the world runs it as a coroutine (iter.Pull): each call it makes of
// the Blocking port suspends it, the world carries the call out in
// simulated time and resumes it with the answer. Only one of the two
// ever runs, so the run stays deterministic.

// landingRoot is where the world's outside producer drops objects.
const landingRoot = "landing/"

// Blocking is what a prefix source may call; each call returns once the
// world answered it.
type Blocking interface {
	// List lists every object under prefix, all pages.
	List(prefix string) ([]engine.ObjectInfo, error)
	// Get reads n bytes of key from off; n < 0 reads to the end.
	Get(key string, off, n int64) ([]byte, error)
	// Ingest hands a unit to the host and returns its answer.
	Ingest(u engine.Unit) error
	// Sleep waits d of simulated time.
	Sleep(d time.Duration)
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
}

// PrefixFactory builds a run of the prefix source opt describes; the
// source reads every object by its extension (format "auto").
type PrefixFactory func(opt PrefixOptions) PrefixRunner

// errUnwound stops a prefix source's coroutine from inside a call.
var errUnwound = errors.New("sim: prefix source stopped")

// call is one suspended call of a prefix source.
type call struct {
	kind   string // "list", "get", "ingest", "sleep"
	key    string // list: the prefix
	off, n int64
	unit   engine.Unit
	d      time.Duration
	// the answer
	listed []engine.ObjectInfo
	body   []byte
	err    error
}

type blocking struct{ yield func(*call) bool }

func (b blocking) do(c *call) *call {
	if !b.yield(c) {
		panic(errUnwound)
	}
	return c
}

func (b blocking) List(prefix string) ([]engine.ObjectInfo, error) {
	c := b.do(&call{kind: "list", key: prefix})
	return c.listed, c.err
}

func (b blocking) Get(key string, off, n int64) ([]byte, error) {
	c := b.do(&call{kind: "get", key: key, off: off, n: n})
	return c.body, c.err
}

func (b blocking) Ingest(u engine.Unit) error { return b.do(&call{kind: "ingest", unit: u}).err }

func (b blocking) Sleep(d time.Duration) { b.do(&call{kind: "sleep", d: d}) }

// prefixRun is one run of a prefix source: one engine incarnation's.
type prefixRun struct {
	s        *source
	gen      uint64
	runner   PrefixRunner
	next     func() (*call, bool)
	stop     func()
	err      error
	inFlight bool // an ingest call is with the engine
	// pos is what the run's source holds of its offsets: the recovered
	// ones it started from, advanced by every unit answered nil — where
	// each object's next unit must start (prefix_units.go).
	pos map[string]uint64
	// acked: the offset keys this run advanced (a unit that starts mid-
	// object at a key it did not advance resumes after a crash).
	acked   map[string]bool
	skipped uint64 // the runner's Skipped when last seen
}

// startPrefix starts the source's run against the current engine.
func (s *source) startPrefix(offsets segment.Offsets) {
	s.stopPrefix()
	runner := s.w.cfg.Prefix(PrefixOptions{Name: s.spec.Name, Prefix: landingRoot + s.spec.Name + "/", Namespace: s.spec.Name,
		Sink: s.spec.sinkRef(), ChunkBytes: s.spec.ChunkBytes, Skip: s.spec.CorruptPermille > 0})
	r := &prefixRun{s: s, gen: s.gen, runner: runner, pos: ownOffsets(offsets, s.spec.Name), acked: map[string]bool{}}
	r.next, r.stop = iter.Pull(func(yield func(*call) bool) {
		defer func() {
			if p := recover(); p != nil && p != errUnwound { //nolint:errorlint // a sentinel value
				panic(p)
			}
		}()
		r.err = runner.Run(blocking{yield}, offsets)
	})
	s.run = r
	r.resume()
}

// stopPrefix unwinds the running source, if any (a crash or a restart).
func (s *source) stopPrefix() {
	if s.run != nil {
		s.run.stop()
		s.run = nil
	}
}

// resume runs the source until its next call, and carries that out.
func (r *prefixRun) resume() {
	c, ok := r.next()
	r.checkSkipped()
	if !ok {
		if r.err != nil {
			r.s.w.oracle.fail("prefix source %s stopped: %v", r.s.spec.Name, r.err)
		}
		return
	}
	w := r.s.w
	answer := func() {
		if r.gen == r.s.gen && r.s.run == r {
			r.resume()
		}
	}
	switch c.kind {
	case "sleep":
		w.sched.After(c.d, answer)
	case "list":
		w.listAll(w.store.Client(w.inc), c.key, "", nil, func(l []engine.ObjectInfo, err error) {
			c.listed, c.err = l, err
			answer()
		})
	case "get":
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
	case "ingest":
		r.ingest(c, answer)
	default:
		panic("sim: prefix source call " + c.kind)
	}
}

// listAll lists every page under prefix.
func (w *World) listAll(c engine.ObjectStore, prefix, token string, acc []engine.ObjectInfo, done func([]engine.ObjectInfo, error)) {
	c.ListObjects(prefix, token, func(page engine.ListPage, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		acc = append(acc, page.Objects...)
		if page.NextToken == "" {
			done(acc, nil)
			return
		}
		w.listAll(c, prefix, page.NextToken, acc, done)
	})
}
