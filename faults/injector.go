package faults

import (
	"fmt"
	"strings"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// Injector carries out a plan inside one simulated world: the world asks
// it at every decision point (a store request, a step, a sink apply, …)
// whether a fault fires. It implements sim.Faults.
//
// Two modes. Recording (NewInjector) draws each decision from the
// injector's own stream — never from the world's, so the world's
// latencies, lags and sources are the same whatever the injector draws —
// and records every decision that fired. Replaying (NewReplay) draws
// nothing and fires exactly the decisions of a Schedule. A recorded run's
// Schedule replayed in the same world reproduces it event for event.
//
// Decision points are numbered per kind in the order the world reaches
// them; every point where a kind could fire counts, whether or not it
// does, and a store request asks every kind that applies to it (then the
// most severe one that fired wins). So removing one decision from a
// schedule never renumbers the points of another kind on the same path.
//
// Heal turns every fault off (the quiet phase in which the run must
// converge).
type Injector struct {
	plan      Plan
	rand      *sim.Rand // nil when replaying
	replay    Schedule  // in (kind, n) order, when replaying
	replaying bool
	start     [NumKinds]int // index of each kind's first decision in replay
	next      [NumKinds]int // replay cursor per kind, from start
	healed    bool
	points    [NumKinds]uint64 // decision points reached, by kind
	counts    [NumKinds]uint64 // decisions fired, by kind
	fired     Schedule
}

// NewInjector returns a recording injector for p, drawing from r (give it
// a stream of its own, split from the root seed).
func NewInjector(p Plan, r *sim.Rand) *Injector { return &Injector{plan: p, rand: r} }

// NewReplay returns an injector that fires exactly the decisions of s.
// p supplies the parameters the world reads (listing lag, spike bound,
// outage windows); its rates are ignored.
func NewReplay(p Plan, s Schedule) *Injector {
	in := &Injector{plan: p, replay: s.sorted(), replaying: true}
	for k := range NumKinds {
		in.start[k] = len(in.replay) // a kind without decisions: past the end
	}
	for i := len(in.replay) - 1; i >= 0; i-- {
		in.start[in.replay[i].Kind] = i
	}
	return in
}

// Plan returns the plan being carried out.
func (in *Injector) Plan() Plan { return in.plan }

// Schedule returns every decision that fired so far.
func (in *Injector) Schedule() Schedule { return in.fired.sorted() }

// Heal stops all faults.
func (in *Injector) Heal() { in.healed = true }

// Healed reports whether Heal was called.
func (in *Injector) Healed() bool { return in.healed }

// Counts returns how many faults of each kind fired.
func (in *Injector) Counts() [NumKinds]uint64 { return in.counts }

// decide is one decision point of kind k: it counts the point and
// reports whether the kind fires there, with its parameter. Recording, a
// window kind fires at every point inside its window and any other kind
// with the plan's rate; draw (nil: no parameter) draws the parameter.
// Replaying, it fires iff the schedule holds (k, point).
func (in *Injector) decide(k Kind, inWindow bool, draw func(r *sim.Rand) int64) (int64, bool) {
	n := in.points[k]
	in.points[k]++
	if in.healed {
		return 0, false
	}
	var param int64
	if in.replaying {
		d, ok := in.scheduled(k, n)
		if !ok {
			return 0, false
		}
		param = d.Param
	} else {
		rate := in.plan.Rate[k]
		if k == SinkOutage || k == StoreOutage || k == StoreRefused {
			if rate == 0 || !inWindow {
				return 0, false
			}
		} else if rate == 0 || !in.rand.Chance(rate) {
			return 0, false
		}
		if draw != nil {
			param = draw(in.rand)
		}
	}
	in.fired = append(in.fired, Decision{Kind: k, N: n, Param: param})
	in.counts[k]++
	return param, true
}

// scheduled finds (k, n) in the replay schedule. Points of one kind come
// in increasing n, so a cursor per kind makes it O(1).
func (in *Injector) scheduled(k Kind, n uint64) (Decision, bool) {
	for {
		j := in.start[k] + in.next[k]
		if j >= len(in.replay) || in.replay[j].Kind != k || in.replay[j].N > n {
			return Decision{}, false
		}
		in.next[k]++
		if in.replay[j].N == n {
			return in.replay[j], true
		}
	}
}

func (in *Injector) fires(k Kind) bool {
	_, ok := in.decide(k, false, nil)
	return ok
}

// CrashNow decides whether the engine is killed at this step.
func (in *Injector) CrashNow() bool { return in.fires(Crash) }

// RestartNow decides whether the engine is stopped gracefully at this step.
func (in *Injector) RestartNow() bool { return in.fires(Restart) }

// CrashAtPoint decides a crash right after a compaction or upload step.
func (in *Injector) CrashAtPoint() bool { return in.fires(CrashPoint) }

// PowerLossAfterCommit decides, at a disk-WAL world's segment commit (a
// marker PUT answered), whether the machine loses power right then.
func (in *Injector) PowerLossAfterCommit() bool { return in.fires(CommitPowerLoss) }

// KillAfterFsyncError decides, at a failed fsync of the log, whether the
// process dies (the machine stays up), and when: in half the decisions
// at once, before the log rolled past the failed batch; in the other
// half after a delay in which sources retry into the next segment (a
// schedule recorded before delays existed replays as "at once").
func (in *Injector) KillAfterFsyncError() (time.Duration, bool) {
	p, ok := in.decide(FsyncErrorKill, false, func(r *sim.Rand) int64 {
		if r.Chance(0.5) {
			return 0
		}
		return int64(r.Duration(fsyncKillDelayMin, fsyncKillDelayMax))
	})
	return time.Duration(p), ok
}

// ZombieNow decides whether the engine pauses at this step (and a new
// one takes over), and for how long.
func (in *Injector) ZombieNow() (time.Duration, bool) {
	p, ok := in.decide(Zombie, false, func(r *sim.Rand) int64 {
		return int64(r.Duration(100*time.Millisecond, max(in.plan.PauseMax, 100*time.Millisecond)))
	})
	return time.Duration(p), ok
}

// MemoryChange decides a new memory hint, as eighths of the world's base
// hint: from a pool too small to cache one body to a roomy one.
func (in *Injector) MemoryChange() (int64, bool) {
	return in.decide(MemoryHint, false, func(r *sim.Rand) int64 { return memoryEighths[r.Intn(len(memoryEighths))] })
}

var memoryEighths = []int64{1, 4, 8, 32}

// Rewind decides whether a replayable partition resumes from earlier
// offsets than recovered, and by how many units.
func (in *Injector) Rewind() (uint64, bool) {
	p, ok := in.decide(SourceRewind, false, func(r *sim.Rand) int64 {
		return int64(1 + r.Uint64n(max(in.plan.RewindMax, 1)))
	})
	return uint64(p), ok
}

// CorruptAtRest decides, as an engine process starts, whether a live
// segment's body or bitmap changes in the store (the parameter picks
// which, sim.World). At most once per world.
func (in *Injector) CorruptAtRest() (int64, bool) { return in.once(CorruptAtRest) }

// once decides a halting kind, which fires at most once per world.
func (in *Injector) once(k Kind) (int64, bool) {
	if !in.replaying && in.counts[k] > 0 {
		in.points[k]++
		return 0, false
	}
	return in.decide(k, false, randomParam)
}

// CorruptRead decides whether a GET's answer is corrupted on the way
// back; the parameter says how (sim.CorruptBytes).
func (in *Injector) CorruptRead(string) (int64, bool) {
	return in.decide(CorruptRead, false, randomParam)
}

func randomParam(r *sim.Rand) int64 { return int64(r.Uint64() >> 1) }

// DecideSink implements sim.SinkFaults.
func (in *Injector) DecideSink(now time.Duration) sim.SinkOutcome {
	_, down := in.decide(SinkOutage, in.plan.SinkOutage.In(now), nil)
	fail := in.fires(SinkError)
	amb := in.fires(SinkAmbiguous)
	_, refuse := in.once(SinkRefuse)
	switch {
	case down || fail:
		return sim.SinkFail
	case refuse:
		return sim.SinkRefuse
	case amb:
		return sim.SinkAmbiguous
	}
	return sim.SinkOK
}

// ConfigureStore applies the plan's listing lag to a store config.
func (in *Injector) ConfigureStore(c sim.StoreConfig) sim.StoreConfig { return in.plan.StoreConfig(c) }

// MaxExtraLatency is the longest delay the plan adds to one request.
func (in *Injector) MaxExtraLatency() time.Duration { return in.plan.MaxExtraLatency() }

// Describe is the plan, for the first line of a run.
func (in *Injector) Describe() string { return in.plan.String() }

// Injected lists the faults injected so far, e.g. "crash=3 throttle=41".
func (in *Injector) Injected() string {
	var parts []string
	for k := range NumKinds {
		if in.counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, in.counts[k]))
		}
	}
	return strings.Join(parts, " ")
}

var _ sim.Faults = (*Injector)(nil)
