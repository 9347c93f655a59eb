package faults

import (
	"fmt"
	"strings"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// Injector carries out a plan inside one simulated world. It implements
// sim.StoreFaults and decides crash points. Heal turns every fault off
// (the quiet phase in which the run must converge).
type Injector struct {
	plan   Plan
	healed bool
	counts [NumKinds]uint64
}

// NewInjector returns an injector for p.
func NewInjector(p Plan) *Injector { return &Injector{plan: p} }

// Plan returns the plan being carried out.
func (in *Injector) Plan() Plan { return in.plan }

// Heal stops all faults.
func (in *Injector) Heal() { in.healed = true }

// Healed reports whether Heal was called.
func (in *Injector) Healed() bool { return in.healed }

// Counts returns how many faults of each kind were injected.
func (in *Injector) Counts() [NumKinds]uint64 { return in.counts }

func (in *Injector) fire(k Kind, r *sim.Rand) bool {
	if in.healed || in.plan.Rate[k] == 0 || !r.Chance(in.plan.Rate[k]) {
		return false
	}
	in.counts[k]++
	return true
}

// CrashNow decides whether the engine is killed at this step.
func (in *Injector) CrashNow(r *sim.Rand) bool { return in.fire(Crash, r) }

// Decide implements sim.StoreFaults.
func (in *Injector) Decide(op sim.Op, key string, r *sim.Rand) (sim.Outcome, time.Duration) {
	var extra time.Duration
	if in.fire(LatencySpike, r) {
		extra = r.Duration(0, in.plan.SpikeMax)
	}
	if in.fire(Throttle, r) {
		return sim.Throttle, extra
	}
	return in.outcome(op, r), extra
}

func (in *Injector) outcome(op sim.Op, r *sim.Rand) sim.Outcome {
	switch op {
	case sim.OpPut:
		if in.fire(PutError, r) {
			return sim.Fail
		}
	case sim.OpGet, sim.OpHead:
		if in.fire(GetError, r) {
			return sim.Fail
		}
	case sim.OpList, sim.OpListUploads:
		if in.fire(ListError, r) {
			return sim.Fail
		}
	case sim.OpDelete:
		if in.fire(DeleteError, r) {
			return sim.Fail
		}
	case sim.OpUploadPart:
		if in.fire(MultipartPart, r) {
			return pick(r, sim.Fail, sim.AmbiguousApplied)
		}
	case sim.OpComplete:
		if in.fire(MultipartComplete, r) {
			return pick(r, sim.Fail, sim.AmbiguousApplied, sim.AmbiguousLost)
		}
	case sim.OpAbort:
		if in.fire(MultipartAbort, r) {
			return pick(r, sim.Fail, sim.AmbiguousApplied)
		}
	}
	if op.Mutates() && in.fire(Ambiguous, r) {
		return pick(r, sim.AmbiguousApplied, sim.AmbiguousLost)
	}
	return sim.OK
}

func pick(r *sim.Rand, outcomes ...sim.Outcome) sim.Outcome {
	return outcomes[r.Intn(len(outcomes))]
}

var _ sim.StoreFaults = (*Injector)(nil)

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

// DiskFaults returns the plan's disk injector.
func (in *Injector) DiskFaults() sim.DiskFaults {
	return sim.DiskFaultsFunc(func(op sim.DiskOp, _ string, r *sim.Rand) (sim.DiskOutcome, time.Duration) {
		var extra time.Duration
		if in.fire(SlowIO, r) {
			extra = r.Duration(0, in.plan.SpikeMax+time.Second)
		}
		switch {
		case op == sim.DiskSync && in.fire(FsyncError, r):
			return sim.DiskIOError, extra
		case op == sim.DiskWrite && in.fire(DiskWriteError, r):
			return sim.DiskIOError, extra
		case (op == sim.DiskWrite || op == sim.DiskOpen || op == sim.DiskMkdirAll) && in.fire(DiskFull, r):
			return sim.DiskNoSpace, extra
		case (op == sim.DiskRead || op == sim.DiskSync) && in.fire(BitFlip, r):
			return sim.DiskBitFlip, extra
		}
		return sim.DiskOK, extra
	})
}

// DecideSink implements sim.SinkFaults.
func (in *Injector) DecideSink(r *sim.Rand) (failBefore, ambiguous bool) {
	if in.fire(SinkError, r) {
		return true, false
	}
	return false, in.fire(SinkAmbiguous, r)
}

// SinkDown implements sim.SinkFaults: the outage windows of the plan.
func (in *Injector) SinkDown(now time.Duration) bool {
	p := in.plan
	if in.healed || p.Rate[SinkOutage] == 0 || p.OutagePeriod <= 0 {
		return false
	}
	return (now+p.OutagePhase)%p.OutagePeriod < p.OutageLength
}

// RestartNow decides whether the engine is stopped gracefully at this step.
func (in *Injector) RestartNow(r *sim.Rand) bool { return in.fire(Restart, r) }

// CrashAtPoint decides a crash right after a compaction step.
func (in *Injector) CrashAtPoint(r *sim.Rand) bool { return in.fire(CrashPoint, r) }

// MemoryChange decides a new memory hint, now and then.
func (in *Injector) MemoryChange(r *sim.Rand) (int64, bool) {
	if !in.fire(MemoryHint, r) {
		return 0, false
	}
	return memoryHints[r.Intn(len(memoryHints))], true
}
