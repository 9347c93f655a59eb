package faults

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// Plan is which faults one world injects and how often, with the
// parameters of the kinds that need them. Rates are probabilities per
// decision: per request for store kinds, per step for Crash and Zombie,
// per apply for sink kinds, per resume for SourceRewind. 0 disables a
// kind. Window kinds (SinkOutage, StoreOutage, StoreRefused) fire on every decision
// that falls inside one of their windows.
type Plan struct {
	Name          string
	Rate          [NumKinds]float64
	ListLagMax    time.Duration // new keys invisible for up to this long
	ListLingerMax time.Duration // deleted keys listed for up to this long
	SpikeMax      time.Duration // extra latency of a spike
	// Windows: down for Length every Period, starting at Phase.
	SinkOutage, StoreOutage Window
	StoreRefused            Window        // writes refused (ErrRefused) inside it
	PauseMax                time.Duration // how long a zombie stays paused, at most
	RewindMax               uint64        // how many units a rewinding source replays, at most
}

// Window is a periodic outage.
type Window struct {
	Period, Length, Phase time.Duration
}

// In reports whether now falls inside the window.
func (w Window) In(now time.Duration) bool {
	return w.Period > 0 && (now+w.Phase)%w.Period < w.Length
}

// Bounds of the swarm's draws.
const (
	rateMin      = 0.001
	rateMax      = 0.08
	crashRateMin = 2e-5
	crashRateMax = 5e-4
	// per compaction or upload step (several per segment)
	crashPointRateMin = 1e-4
	crashPointRateMax = 5e-3
	// per log fsync error, a few a world: most of them
	fsyncKillRateMin = 0.1
	fsyncKillRateMax = 0.9
	// A delayed kill after an fsync error lands after the sources'
	// retry backoff (20–300 ms) and before the roll's generation is
	// likely to flush.
	fsyncKillDelayMin = 10 * time.Millisecond
	fsyncKillDelayMax = 500 * time.Millisecond
	// a swarm's disk-WAL world crashes at points at least this often
	diskCrashPointRate = 1e-3
	// per segment commit of a disk-WAL world: a few power losses a world
	// between a commit and its durable flushed record
	commitPowerLossRate = 0.02
	// each halts a lane for good, so fires once a world: corrupt-at-rest is
	// asked at each restart with live segments (tens a world), sink-refuse
	// at each sink apply (thousands)
	atRestRateMin = 0.05
	atRestRateMax = 0.5
	refuseRateMin = 2e-4
	refuseRateMax = 2e-3
	// per resume of a replayable partition
	rewindRateMin = 0.05
	rewindRateMax = 0.5
	// per multipart request: a world makes few, so a swarm raises their
	// rates for the rare branches (a part retried, a Complete settled by
	// HEAD, an upload lost and aborted) to happen at all
	mpuRateMin = 0.01
	mpuRateMax = 0.25
	// one Complete per upload, a handful a world: higher still
	completeRateMin = 0.05
	completeRateMax = 0.5
	// per GET: wire damage is rare, and a readable object must not fail
	// AttemptsMax reads in a row by chance (0.02⁵ ≈ 3e-9)
	corruptRateMin = 0.0005
	corruptRateMax = 0.02
	// listing lag: in some seeds longer than the sim's orphan grace (10 s)
	listLagCap   = 30 * time.Second
	spikeCap     = 8 * time.Second
	pauseCap     = 2 * time.Minute
	enableChance = 0.5
	// corrupt-at-rest and sink-refuse halt a lane for good: fewer
	// worlds enable them
	atRestChance  = 0.25
	swarmAttempts = 8
)

// None injects nothing.
func None() Plan { return Plan{Name: "none"} }

// Swarm draws a plan: every kind is enabled with probability 1/2 (a few
// rarer), at a rate drawn log-uniformly, so that across seeds faults meet
// in every combination and at every intensity (swarm testing). A plan
// with nothing enabled is redrawn a few times.
func Swarm(r *sim.Rand) Plan {
	for range swarmAttempts {
		p := Plan{Name: "swarm"}
		for k := range NumKinds {
			if k == CommitPowerLoss {
				continue // every disk-WAL world has it (Restrict)
			}
			chance := enableChance
			if haltingKind(k) {
				chance = atRestChance
			}
			if r.Chance(chance) {
				lo, hi := rateBounds(k)
				p.Rate[k] = logUniform(r, lo, hi)
			}
		}
		p.drawParams(r)
		if p.enabled() > 0 {
			return p
		}
	}
	return Plan{Name: "swarm", Rate: [NumKinds]float64{Crash: crashRateMax}}
}

// haltingKind: a fault after which the engine must halt a lane and
// alert, ending the run early (as it should).
func haltingKind(k Kind) bool { return k == CorruptAtRest || k == SinkRefuse }

func rateBounds(k Kind) (lo, hi float64) {
	switch k {
	case Crash, Restart, Zombie:
		return crashRateMin, crashRateMax
	case CrashPoint:
		return crashPointRateMin, crashPointRateMax
	case CorruptAtRest:
		return atRestRateMin, atRestRateMax
	case SinkRefuse:
		return refuseRateMin, refuseRateMax
	case SourceRewind:
		return rewindRateMin, rewindRateMax
	case CorruptRead:
		return corruptRateMin, corruptRateMax
	case MultipartPart, MultipartAbort, UploadLost:
		return mpuRateMin, mpuRateMax
	case MultipartComplete:
		return completeRateMin, completeRateMax
	case FsyncErrorKill:
		return fsyncKillRateMin, fsyncKillRateMax
	case SinkOutage, StoreOutage, StoreRefused:
		return 1, 1 // every decision inside a window
	}
	return rateMin, rateMax
}

func (p *Plan) drawParams(r *sim.Rand) {
	if p.Rate[ListLag] > 0 {
		p.ListLagMax = r.Duration(10*time.Millisecond, listLagCap)
		p.ListLingerMax = r.Duration(10*time.Millisecond, listLagCap)
	}
	if p.Rate[LatencySpike] > 0 {
		p.SpikeMax = r.Duration(100*time.Millisecond, spikeCap)
	}
	if p.Rate[SinkOutage] > 0 {
		p.SinkOutage = drawWindow(r, time.Second)
	}
	if p.Rate[StoreOutage] > 0 {
		// Long enough, in some seeds, that every retry of a step runs out.
		p.StoreOutage = drawWindow(r, 5*time.Second)
	}
	if p.Rate[StoreRefused] > 0 {
		p.StoreRefused = drawWindow(r, 2*time.Second)
	}
	if p.Rate[Zombie] > 0 {
		p.PauseMax = r.Duration(time.Second, pauseCap)
	}
	if p.Rate[SourceRewind] > 0 {
		p.RewindMax = 1 + r.Uint64n(20)
	}
}

// ProfileNames lists the profiles Named knows.
const ProfileNames = "none, swarm, crash, flaky, all, multipart, rot, fsync"

func drawWindow(r *sim.Rand, lengthMin time.Duration) Window {
	period := r.Duration(30*time.Second, 4*time.Minute)
	return Window{Period: period, Length: r.Duration(lengthMin, period/3), Phase: r.Duration(0, period)}
}

// Named returns a named profile: none, swarm, crash (crashes only),
// flaky (every store fault, no crashes), all (everything at once), or one
// aimed at a rare combination a swarm meets in few worlds: multipart
// (uploads that fail, are aborted under their writer, and Completes that
// answer an error after or without doing the work) or rot (crashes and
// corruption at rest while sinks fail, so bitmaps of half-applied
// segments rot too) or fsync (a disk-WAL world whose fsyncs fail, now
// and then slowly, and whose process dies after some of those failures,
// at once or once a retry of the failed batch is acked).
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
			SinkOutage:   Window{Period: time.Minute, Length: 10 * time.Second},
			StoreOutage:  Window{Period: 3 * time.Minute, Length: 15 * time.Second, Phase: time.Minute},
			StoreRefused: Window{Period: 4 * time.Minute, Length: 10 * time.Second, Phase: 2 * time.Minute},
			PauseMax:     30 * time.Second, RewindMax: 8}
		for k := range NumKinds {
			p.Rate[k] = 0.02
		}
		p.Rate[SinkOutage], p.Rate[StoreOutage], p.Rate[StoreRefused], p.Rate[SourceRewind] = 1, 1, 1, 0.2
		p.Rate[Crash], p.Rate[CrashPoint], p.Rate[Restart], p.Rate[Zombie], p.Rate[CorruptAtRest], p.Rate[SinkRefuse] = 0, 0, 0, 0, 0, 0
		if name == "all" {
			p.Rate[Crash], p.Rate[CrashPoint], p.Rate[Restart], p.Rate[Zombie] = 1e-4, 0.01, 1e-4, 1e-4
			p.Rate[CorruptAtRest], p.Rate[SinkRefuse] = 0.02, 2e-4
		}
		return p, nil
	case "multipart":
		p := Plan{Name: name}
		p.Rate[Crash], p.Rate[PutError] = crashRateMax, 0.02
		p.Rate[MultipartPart], p.Rate[MultipartComplete], p.Rate[MultipartAbort], p.Rate[UploadLost] = 0.1, 0.5, 0.2, 0.25
		return p, nil
	case "fsync":
		p := Plan{Name: name}
		p.Rate[Crash], p.Rate[CrashPoint] = crashRateMax, diskCrashPointRate
		p.Rate[FsyncError], p.Rate[SlowIO], p.Rate[FsyncErrorKill] = 0.01, 0.01, 0.5
		p.Rate[CommitPowerLoss] = commitPowerLossRate
		return p, nil
	case "rot":
		p := Plan{Name: name}
		p.Rate[Crash], p.Rate[CrashPoint], p.Rate[SinkError] = crashRateMax, 0.01, 0.1
		p.Rate[CorruptAtRest] = atRestRateMax
		return p, nil
	}
	return Plan{}, fmt.Errorf("faults: unknown profile %q (%s)", name, ProfileNames)
}

// Restrict returns the plan without the kinds w cannot exercise.
func (p Plan) Restrict(w World) Plan {
	for k := range NumKinds {
		if !w.has(kindNeeds[k]) {
			p.Rate[k] = 0
		}
	}
	if w.DiskWAL {
		if !w.S3WALToo {
			p.Rate[Zombie] = 0
		}
		if p.Name == "swarm" && p.Rate[CrashPoint] == 0 {
			// A power loss between a log write and its fsync is the window
			// the disk WAL exists for (torn tails, superseded batches):
			// every disk world of a swarm has it.
			p.Rate[CrashPoint] = diskCrashPointRate
		}
		if p.Name == "swarm" {
			// So has a power loss between a segment's commit and its
			// durable flushed record: the replay must find the segment
			// owned (or reuse its snapshot id), never commit it twice.
			p.Rate[CommitPowerLoss] = commitPowerLossRate
		}
	}
	return p
}

func logUniform(r *sim.Rand, lo, hi float64) float64 {
	if lo == hi {
		return lo
	}
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

// Enabled reports whether kind k can fire.
func (p Plan) Enabled(k Kind) bool { return p.Rate[k] > 0 }

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

// planJSON is a Plan as seed files hold it: rates by kind name, so that
// adding a kind never changes what an old file means.
type planJSON struct {
	Name          string             `json:"name"`
	Rates         map[string]float64 `json:"rates"`
	ListLagMax    time.Duration      `json:"list_lag_max,omitempty"`
	ListLingerMax time.Duration      `json:"list_linger_max,omitempty"`
	SpikeMax      time.Duration      `json:"spike_max,omitempty"`
	SinkOutage    Window             `json:"sink_outage,omitzero"`
	StoreOutage   Window             `json:"store_outage,omitzero"`
	StoreRefused  Window             `json:"store_refused,omitzero"`
	PauseMax      time.Duration      `json:"pause_max,omitempty"`
	RewindMax     uint64             `json:"rewind_max,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (p Plan) MarshalJSON() ([]byte, error) {
	j := planJSON{Name: p.Name, Rates: map[string]float64{}, ListLagMax: p.ListLagMax, ListLingerMax: p.ListLingerMax,
		SpikeMax: p.SpikeMax, SinkOutage: p.SinkOutage, StoreOutage: p.StoreOutage, StoreRefused: p.StoreRefused, PauseMax: p.PauseMax, RewindMax: p.RewindMax}
	for k := range NumKinds {
		if p.Rate[k] > 0 {
			j.Rates[k.String()] = p.Rate[k]
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler; an unknown kind is an error.
func (p *Plan) UnmarshalJSON(b []byte) error {
	var j planJSON
	if err := strictJSON(b, &j); err != nil {
		return fmt.Errorf("faults: plan: %w", err)
	}
	*p = Plan{Name: j.Name, ListLagMax: j.ListLagMax, ListLingerMax: j.ListLingerMax, SpikeMax: j.SpikeMax,
		SinkOutage: j.SinkOutage, StoreOutage: j.StoreOutage, StoreRefused: j.StoreRefused, PauseMax: j.PauseMax, RewindMax: j.RewindMax}
	names := make([]string, 0, len(j.Rates))
	for n := range j.Rates {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		k, ok := KindByName(n)
		if !ok {
			return fmt.Errorf("faults: plan: unknown fault kind %q", n)
		}
		if r := j.Rates[n]; r < 0 || r > 1 {
			return fmt.Errorf("faults: plan: rate %g of %s outside [0, 1]", r, n)
		}
		p.Rate[k] = j.Rates[n]
	}
	return nil
}
