package faults

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// Kind is one kind of fault.
type Kind uint8

// Fault kinds. The values index rates and counters: append only.
const (
	Crash             Kind = iota // SIGKILL of the engine at a step
	ListLag                       // new keys invisible / deleted keys lingering in LIST
	PutError                      // PutObject fails, no effect
	Ambiguous                     // a mutating request's outcome is unknown (applied or not)
	GetError                      // GetObject / HeadObject fail
	ListError                     // ListObjects / ListMultipartUploads fail
	DeleteError                   // DeleteObject fails
	Throttle                      // 503 SlowDown on any request
	LatencySpike                  // a request takes much longer
	MultipartPart                 // UploadPart fails (sometimes after applying)
	MultipartComplete             // CompleteMultipartUpload fails (sometimes after applying)
	MultipartAbort                // AbortMultipartUpload fails
	FsyncError                    // an fsync fails: the file is poisoned
	DiskWriteError                // a disk write fails (EIO)
	DiskFull                      // an allocating disk operation fails (ENOSPC)
	BitFlip                       // a bit flips on read or in the durable image
	SlowIO                        // a disk operation takes much longer
	SinkError                     // a sink apply fails, nothing applied
	SinkAmbiguous                 // a sink apply lands but reports failure
	SinkOutage                    // the sink is down for a window of time
	CrashPoint                    // SIGKILL right after a compaction step (apply, bitmap write, delete)
	MemoryHint                    // the memory available changes (the pool resizes)
	Restart                       // a graceful stop (Close), then a new process
	NumKinds
)

var kindNames = [NumKinds]string{
	"crash", "list-lag", "put-error", "ambiguous", "get-error", "list-error",
	"delete-error", "throttle", "latency-spike", "mpu-part", "mpu-complete", "mpu-abort",
	"fsync-error", "disk-write-error", "disk-full", "bit-flip", "slow-io",
	"sink-error", "sink-ambiguous", "sink-outage", "crash-point", "memory-hint",
	"restart",
}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "kind?"
}

// Plan is which faults one seed injects and how often. Rates are
// probabilities per request (per step for Crash); 0 disables a kind.
type Plan struct {
	Name          string
	Rate          [NumKinds]float64
	ListLagMax    time.Duration // new keys invisible for up to this long
	ListLingerMax time.Duration // deleted keys listed for up to this long
	SpikeMax      time.Duration // extra latency of a spike
	// Sink outages: down for OutageLength every OutagePeriod (phase
	// OutagePhase), while SinkOutage is enabled.
	OutagePeriod, OutageLength, OutagePhase time.Duration
}

// Memory hints a MemoryHint fault switches between: from a pool too small
// to cache one body (compaction streams) to a roomy one.
var memoryHints = []int64{2 << 20, 8 << 20, 64 << 20, 1 << 30}

// Bounds of the swarm's draws.
const (
	rateMin      = 0.001
	rateMax      = 0.08
	crashRateMin = 2e-5
	crashRateMax = 5e-4
	// per compaction step (several per segment)
	crashPointRateMin = 1e-4
	crashPointRateMax = 5e-3
	listLagCap        = 5 * time.Second
	spikeCap          = 8 * time.Second
	enableChance      = 0.5
	swarmAttempts     = 8
)

// None injects nothing.
func None() Plan { return Plan{Name: "none"} }

// Swarm draws a plan: every kind is enabled with probability 1/2, at a
// rate drawn log-uniformly, so that across seeds faults meet in every
// combination and at every intensity (swarm testing). A plan with nothing
// enabled is redrawn a few times.
func Swarm(r *sim.Rand) Plan {
	for range swarmAttempts {
		p := Plan{Name: "swarm"}
		for k := range Restart {
			if r.Chance(enableChance) {
				p.Rate[k] = logUniform(r, rateMin, rateMax)
			}
		}
		if p.Rate[Crash] > 0 {
			p.Rate[Crash] = logUniform(r, crashRateMin, crashRateMax)
		}
		if p.Rate[CrashPoint] > 0 {
			p.Rate[CrashPoint] = logUniform(r, crashPointRateMin, crashPointRateMax)
		}
		if p.Rate[ListLag] > 0 {
			p.ListLagMax = r.Duration(10*time.Millisecond, listLagCap)
			p.ListLingerMax = r.Duration(10*time.Millisecond, listLagCap)
		}
		if p.Rate[LatencySpike] > 0 {
			p.SpikeMax = r.Duration(100*time.Millisecond, spikeCap)
		}
		if p.Rate[SinkOutage] > 0 {
			p.OutagePeriod = r.Duration(20*time.Second, 3*time.Minute)
			p.OutageLength = r.Duration(time.Second, p.OutagePeriod/3)
			p.OutagePhase = r.Duration(0, p.OutagePeriod)
		}
		// Drawn last, from its own stream: kinds added later must not
		// change the plans (and regression seeds) drawn before them.
		if rr := r.Split("restart"); rr.Chance(enableChance) {
			p.Rate[Restart] = logUniform(rr, crashRateMin, crashRateMax)
		}
		if p.enabled() > 0 {
			return p
		}
	}
	return Plan{Name: "swarm", Rate: [NumKinds]float64{Crash: crashRateMax}}
}

// Named returns a named profile: none, swarm, crash (crashes only),
// flaky (every store fault, no crashes), or all (everything at once).
func Named(name string, r *sim.Rand) (Plan, error) {
	switch name {
	case "none":
		return None(), nil
	case "swarm":
		return Swarm(r), nil
	case "crash":
		return Plan{Name: name, Rate: [NumKinds]float64{Crash: crashRateMax}}, nil
	case "flaky", "all":
		p := Plan{Name: name, ListLagMax: time.Second, ListLingerMax: time.Second, SpikeMax: 2 * time.Second,
			OutagePeriod: time.Minute, OutageLength: 10 * time.Second}
		for k := range NumKinds {
			p.Rate[k] = 0.02
		}
		p.Rate[Crash], p.Rate[CrashPoint], p.Rate[Restart] = 0, 0, 0
		if name == "all" {
			p.Rate[Crash], p.Rate[CrashPoint], p.Rate[Restart] = 1e-4, 0.01, 1e-4
		}
		return p, nil
	}
	return Plan{}, fmt.Errorf("faults: unknown profile %q (none, swarm, crash, flaky, all)", name)
}

func logUniform(r *sim.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

func (p Plan) enabled() (n int) {
	for _, r := range p.Rate {
		if r > 0 {
			n++
		}
	}
	return n
}

// String lists the enabled kinds and rates, e.g. "swarm[crash=3e-04 throttle=0.012]".
func (p Plan) String() string {
	var parts []string
	for k := range NumKinds {
		if p.Rate[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.2g", k, p.Rate[k]))
		}
	}
	return p.Name + "[" + strings.Join(parts, " ") + "]"
}

// StoreConfig applies the plan's listing behaviour to a store config.
func (p Plan) StoreConfig(cfg sim.StoreConfig) sim.StoreConfig {
	if p.Rate[ListLag] > 0 {
		cfg.ListLagMax = p.ListLagMax
		cfg.ListLingerMax = p.ListLingerMax
	}
	return cfg
}

// MaxExtraLatency is the longest delay the plan adds to one request.
func (p Plan) MaxExtraLatency() time.Duration {
	if p.Rate[LatencySpike] > 0 {
		return p.SpikeMax
	}
	return 0
}
