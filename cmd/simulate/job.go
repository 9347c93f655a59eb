package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

// job is one world to run: its seed, its world and fault plan, and —
// when replaying a seed file or a shrunk schedule — the exact faults.
// A job drawn from a seed records its schedule as it runs; a job with a
// schedule replays it and draws no fault.
type job struct {
	seed     uint64
	iters    uint64
	profile  string // the profile name, for messages and seed files
	spec     sim.WorldSpec
	plan     faults.Plan
	schedule faults.Schedule // replayed when replay is set
	replay   bool
	trace    io.Writer
	// tap, if set, watches the run for -timeline (timeline.go); only the
	// first run of a job (not shrinking's) has one.
	tap *timeline
}

// drawJob draws the world and the plan of a seed. The plan keeps only
// the kinds the world can exercise (faults.Plan.Restrict).
func drawJob(seed, iters uint64, profile string) (job, error) {
	root := sim.NewRand(seed)
	spec := sim.DrawWorld(root.Split("world"), destinationKinds())
	plan, err := faults.Named(profile, root.Split("faults"))
	if err != nil {
		return job{}, err
	}
	return job{seed: seed, iters: iters, profile: profile, spec: spec, plan: plan.Restrict(capabilities(spec))}, nil
}

func destinationKinds() []string {
	var out []string
	for k := range destinations {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// capabilities is what a world offers faults: a fault kind the world
// cannot exercise is not in its plan (and not printed).
func capabilities(s sim.WorldSpec) faults.World {
	w := faults.World{Sink: len(s.Sinks) > 0, Multipart: s.Engine.TargetBytes >= s.Engine.PartBytes}
	engines := []engine.Config{s.Engine}
	for _, p := range s.Pipelines {
		engines = append(engines, p.Engine)
	}
	for _, e := range engines {
		w.Multipart = w.Multipart || e.TargetBytes >= e.PartBytes
		if e.Disk != nil {
			// The log is on the simulated disk and read back by recovery.
			w.Disk, w.DiskRead, w.DiskWAL = true, true, true
		}
	}
	// Zombies are writers of an S3 WAL; a world with both kinds of
	// pipelines keeps them (each pipeline draws only its own).
	for _, e := range engines {
		w.S3WALToo = w.S3WALToo || w.DiskWAL && e.Disk == nil
	}
	for _, k := range s.Sinks {
		if k.Kind == "parquet-dir" {
			w.Disk = true
		}
	}
	for _, src := range s.AllSources() {
		if src.Replayable {
			w.Replayable = true
		}
	}
	return w
}

// outcome is a finished job: the world's result and the faults it
// injected (the schedule a seed file records).
type outcome struct {
	job      job
	res      sim.Result
	schedule faults.Schedule
}

// run runs the job's world.
func (j job) run() outcome {
	cfg, inj := j.config()
	res := sim.NewWorld(cfg).Run(time.Now)
	return outcome{job: j, res: res, schedule: inj.Schedule()}
}

// config is the world configuration of the job, with a fresh injector.
func (j job) config() (sim.Config, *faults.Injector) {
	var inj *faults.Injector
	if j.replay {
		inj = faults.NewReplay(j.plan, j.schedule)
	} else {
		inj = faults.NewInjector(j.plan, sim.NewRand(j.seed).Split("faults/decide"))
	}
	spec := j.spec
	cfg := sim.Config{Seed: j.seed, Iters: j.iters, Faults: inj, World: &spec, Destinations: destinations, HTTP: httpEndpoint, Prefix: prefixSource, Codec: brokerCodec, MQTT: mqttCodec, Trace: j.trace}
	if j.tap != nil {
		cfg.Tap, cfg.Faults = j.tap, &tapFaults{Injector: inj, tl: j.tap}
	}
	return cfg, inj
}

// command is the shell command that replays the job.
func (j job) command(seedFile string) string {
	if seedFile != "" {
		return "go run ./cmd/simulate -replay " + seedFile
	}
	return fmt.Sprintf("go run ./cmd/simulate -seed %d -iters %d -faults %s", j.seed, j.iters, j.profile)
}
