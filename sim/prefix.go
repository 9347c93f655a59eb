package sim

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// A prefix source (SourceSpec.Prefix) is the real objects source
// (sources/objects, supplied by cmd/simulate through Config.Prefix) run
// in the world: an outside producer drops one Parquet object per unit
// under landing/{name}/ in the world's store — at its own pace, crashes
// or not — and the source lists the prefix (with the store's listing lag
// and faults), reads the objects (ranged GETs) and ingests them, one unit
// per object, resuming after every crash from the recovered offsets.
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

// PrefixRunner runs a prefix source over b until it fails (its error)
// or is stopped; offsets are the host's recovered offsets.
type PrefixRunner func(b Blocking, offsets segment.Offsets) error

// PrefixFactory builds the runner of the prefix source called name that
// reads prefix into namespace ns of sink.
type PrefixFactory func(name, prefix, ns, sink string) PrefixRunner

// prefixOffset is the objects source's offset of a fully ingested object
// of one row group (sources/objects: key "objects/{name}/{object key}",
// value 1<<63 | row groups). The world checks every unit against it, so
// a change of that scheme fails the run loudly.
func prefixOffset(spec SourceSpec, uid UID) (string, uint64) {
	return "objects/" + spec.Name + "/" + objectName(uid), 1<<63 | 1
}

func objectName(uid UID) string { return fmt.Sprintf("%010d.parquet", uid.seq()) }

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
	next     func() (*call, bool)
	stop     func()
	err      error
	inFlight bool // an ingest call is with the engine
}

// startPrefix starts the source's run against the current engine.
func (s *source) startPrefix(offsets segment.Offsets) {
	s.stopPrefix()
	runner := s.w.cfg.Prefix(s.spec.Name, landingRoot+s.spec.Name+"/", s.spec.Name, s.spec.sinkRef())
	r := &prefixRun{s: s, gen: s.gen}
	r.next, r.stop = iter.Pull(func(yield func(*call) bool) {
		defer func() {
			if p := recover(); p != nil && p != errUnwound { //nolint:errorlint // a sentinel value
				panic(p)
			}
		}()
		r.err = runner(blocking{yield}, offsets)
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

// ingest checks a unit against the object it must be — all of one
// object's rows, under its offset — and hands it to the engine.
func (r *prefixRun) ingest(c *call, answer func()) {
	s, w := r.s, r.s.w
	uid, ok := r.uidOf(c.unit)
	if !ok {
		return
	}
	r.inFlight = true
	w.submitUnit(uid, c.unit, true, func(err error) {
		r.inFlight = false
		if err != nil {
			w.sourceError(s, uid, err)
		}
		c.err = err
		answer()
	})
}

// uidOf maps a unit to the object it ingests, failing the run if the
// unit is not exactly that object done.
func (r *prefixRun) uidOf(u engine.Unit) (UID, bool) {
	s, w := r.s, r.s.w
	if len(u.Offsets) != 1 {
		w.oracle.fail("prefix source %s: a unit with offsets %v", s.spec.Name, u.Offsets)
		return 0, false
	}
	o := u.Offsets[0]
	name := strings.TrimPrefix(o.Key, "objects/"+s.spec.Name+"/")
	seq, err := strconv.ParseUint(strings.TrimSuffix(name, ".parquet"), 10, 48)
	if err != nil {
		w.oracle.fail("prefix source %s: a unit with offset key %q", s.spec.Name, o.Key)
		return 0, false
	}
	uid := makeUID(s.idx, 0, seq)
	if key, v := prefixOffset(s.spec, uid); o.Key != key || o.Value != v {
		w.oracle.fail("prefix source %s: object %s ingested with offset %s=%d, want %s=%d", s.spec.Name, name, o.Key, o.Value, key, v)
		return 0, false
	}
	return uid, true
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

// drop puts the prefix source's next object in the store, as an outside
// producer's PUT that landed, and schedules the one after.
func (s *source) drop() {
	if s.exhausted(s.newSeq+1, s.newSeq) {
		return
	}
	s.newSeq++
	uid := makeUID(s.idx, 0, s.newSeq)
	in := s.unit(uid)
	body, err := parquetBody(in.Batches[0])
	in.Batches[0].Release()
	if err != nil {
		s.w.oracle.fail("prefix source %s: writing object %s: %v", s.spec.Name, objectName(uid), err)
		return
	}
	if _, err := s.w.store.put(landingRoot+s.spec.Name+"/"+objectName(uid), body, false, ""); err != nil {
		s.w.oracle.fail("prefix source %s: dropping object %s: %v", s.spec.Name, objectName(uid), err)
		return
	}
	s.w.sched.After(s.rand.Exp(s.spec.Interval), s.drop)
}

// parquetBody is a batch as a Parquet file of one row group.
func parquetBody(b arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(b.NumRows()) + 1))
	w, err := pqarrow.NewFileWriter(b.Schema(), &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(memory.DefaultAllocator)))
	if err != nil {
		return nil, err
	}
	if err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// prefixIdle: every object dropped is done in the engine's offsets (an
// object committed before a crash is done without an ACK the world saw),
// and nothing is with the engine. ackedUpTo walks forward only: the
// offsets view never goes back.
func (s *source) prefixIdle() bool {
	if s.run != nil && s.run.inFlight || s.w.eng == nil || !s.w.eng.Ready() {
		return false
	}
	for s.ackedUpTo < s.newSeq {
		key, want := prefixOffset(s.spec, makeUID(s.idx, 0, s.ackedUpTo+1))
		if v, _ := s.w.eng.Offset(key); v < want {
			break
		}
		s.ackedUpTo++
	}
	return s.ackedUpTo == s.newSeq
}

// offsetOf is where the offsets hold a replayable unit: its key, and the
// value that covers it.
func offsetOf(spec SourceSpec, uid UID) (string, uint64) {
	if spec.Prefix {
		return prefixOffset(spec, uid)
	}
	return offsetKey(spec, uid.partition()), uid.seq()
}
