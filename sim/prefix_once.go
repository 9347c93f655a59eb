package sim

import (
	"errors"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// A once prefix source (SourceSpec.Once) runs the objects source as
// skipprd run --once does, again and again, as a cron would: each run
// lists the prefix once, ingests what that listing shows, and returns;
// the world starts the next run OnceEvery after one ended (a crash in
// between starts one at recovery, as a restarted job would). A run that
// a listing or read error of the store ended (ErrPrefixOnceStore) is a
// job that exited 1: the next one goes on from the acked offsets.
//
// The oracle of a run that returned nil: nothing of it is in flight,
// and every object its listing showed — those it can ingest — is done in
// the offsets the run holds (every piece acked, by it or before it).
// Across runs the world's oracles hold as for any prefix source: every
// piece committed exactly once, and at convergence every object done.

// ErrPrefixOnceStore wraps the store error that ended a once run (the
// runner's answer); the world starts the next run.
var ErrPrefixOnceStore = errors.New("sim: a once run of a prefix source ended on a store error")

// drawPrefixOnce makes some prefix sources once sources, each with its
// interval between runs (its own stream: the other draws keep their
// values).
func drawPrefixOnce(r *Rand, spec *SourceSpec) {
	if !r.Chance(0.3) {
		return
	}
	spec.Once = true
	spec.OnceEvery = time.Duration(logUniform(r, float64(50*time.Millisecond), float64(5*time.Second)))
}

// noteListed records the offset keys of a page listed under prefix.
func (r *prefixRun) noteListed(prefix string, page []engine.ObjectInfo) {
	for _, o := range page {
		r.listed = append(r.listed, "objects/"+r.s.spec.Name+"/"+strings.TrimPrefix(o.Key, prefix))
	}
}

// onceEnded acts on a once run's end: its oracle, then the next run.
func (r *prefixRun) onceEnded() {
	s, w := r.s, r.s.w
	switch {
	case r.err == nil:
		r.checkOnce()
		w.mark(MarkPrefixOnce)
	case errors.Is(r.err, ErrPrefixOnceStore):
		w.mark(MarkPrefixOnceStoreFailed)
	default:
		w.oracle.fail("prefix source %s stopped: %v", s.spec.Name, r.err)
		return
	}
	w.sched.After(s.spec.OnceEvery, func() {
		if r.live() && w.eng != nil && w.eng.Ready() {
			s.startPrefix(w.eng.Offsets())
		}
	})
}

// checkOnce: a once run that returned nil left nothing in flight, and
// every object its listing showed that it can ingest is done.
func (r *prefixRun) checkOnce() {
	s, w := r.s, r.s.w
	if r.inFlight != 0 {
		w.oracle.fail("prefix source %s: a once run returned with %d units in flight", s.spec.Name, r.inFlight)
		return
	}
	for _, key := range r.listed {
		i, known := s.objKeys[key]
		if !known || s.objects[i].corrupt != "" {
			continue // a temporary name, or an object it skips
		}
		obj := s.objects[i]
		if first := obj.firstUncovered(r.pos[key]); first < len(obj.pieces) {
			w.oracle.fail("prefix source %s: a once run returned with object %s of its listing not done: offset %s=%d covers %d of its %d pieces",
				s.spec.Name, obj.name, key, r.pos[key], first, len(obj.pieces))
			return
		}
	}
}
