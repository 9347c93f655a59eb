package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

type options struct {
	seed       uint64
	seeds      int
	iters      uint64
	profile    string
	verbose    bool
	trace      string
	save       bool
	cpuprof    string
	memprof    string
	coverage   bool
	replay     string // a seed file to replay
	schedule   string // a schedule to replay in the seed's drawn world
	shrink     bool
	shrinkTime time.Duration
	twice      bool   // -check-determinism (diverge.go)
	failfast   bool   // stop at the first failing seed (failfast.go)
	timeline   string // write the run as an HTML page here (timeline.go)
}

// gcPercent: simulate is a batch tool whose worlds allocate a lot of
// short-lived garbage; collecting less often trades memory (a few times
// the live heap, bounded by gcMemoryLimit) for time.
const (
	gcPercent     = 400
	gcMemoryLimit = 8 << 30
)

func main() {
	debug.SetGCPercent(gcPercent)
	debug.SetMemoryLimit(gcMemoryLimit)
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(2)
	}
	if opts.cpuprof != "" {
		f, err := os.Create(opts.cpuprof)
		if err != nil {
			fmt.Fprintln(os.Stderr, "simulate:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "simulate:", err)
			os.Exit(2)
		}
	}
	var ok bool
	if opts.twice {
		ok, err = checkDeterminism(opts, os.Stdout)
	} else {
		ok, err = run(opts)
	}
	if opts.cpuprof != "" {
		pprof.StopCPUProfile()
	}
	if opts.memprof != "" {
		writeHeapProfile(opts.memprof)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	var o options
	var iters string
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the world (with -seeds: the first seed)")
	fs.IntVar(&o.seeds, "seeds", 1, "number of seeds to run, from -seed upward, in parallel on all cores")
	fs.StringVar(&iters, "iters", "1e5", "steps (events) per world; accepts 1e6")
	fs.StringVar(&o.profile, "faults", "swarm", "fault profile: "+faults.ProfileNames)
	fs.BoolVar(&o.verbose, "v", false, "print every run's summary, not only failures")
	fs.StringVar(&o.trace, "trace", "", "write a human-readable event trace to this file (single seed)")
	fs.BoolVar(&o.twice, "check-determinism", false, "run the seed twice and compare trace hashes; if they differ, print the first step and event where the runs diverge, and exit 1")
	fs.BoolVar(&o.save, "save", false, "write a seeds/ file (the shrunk world and schedule) for every failing seed")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&o.memprof, "memprofile", "", "write a heap profile at the end of the run to this file")
	fs.BoolVar(&o.coverage, "coverage", false, "print each coverage mark with the number of worlds that reached it")
	fs.StringVar(&o.replay, "replay", "", "replay a seed file: its recorded world and fault schedule")
	fs.StringVar(&o.schedule, "schedule", "", "replay this fault schedule (kind@n …) in the seed's world instead of drawing faults")
	fs.BoolVar(&o.shrink, "shrink", true, "on a failure, search for a smaller fault schedule and a shorter run that still fail")
	fs.DurationVar(&o.shrinkTime, "shrink-time", 2*time.Minute, "how long shrinking may search, per failing seed")
	fs.StringVar(&o.timeline, "timeline", "", "write the run (single seed or -replay) as one self-contained HTML page to this file: a lane per engine process, the store, the disk and each sink; crashes, faults, commits, ACKs, applies, reclaims and any violation over simulated time")
	fs.BoolVar(&o.failfast, "failfast", false, "stop starting seeds after the first failure (a panic counts as one); no shrinking")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	f, err := strconv.ParseFloat(iters, 64)
	if err != nil || f < 1 || f > 1e12 {
		return o, fmt.Errorf("-iters %q: want a positive number like 1e6", iters)
	}
	o.iters = uint64(f)
	switch {
	case o.seeds < 1:
		return o, fmt.Errorf("-seeds %d: want at least 1", o.seeds)
	case o.trace != "" && o.seeds > 1:
		return o, fmt.Errorf("-trace needs a single seed")
	case (o.replay != "" || o.schedule != "") && o.seeds > 1:
		return o, fmt.Errorf("-replay and -schedule run a single seed")
	case o.timeline != "" && (o.seeds > 1 || o.twice):
		return o, fmt.Errorf("-timeline draws one run: drop -seeds and -check-determinism")
	case o.replay != "" && o.schedule != "":
		return o, fmt.Errorf("-replay and -schedule exclude each other")
	}
	if err := checkTwiceArgs(o); err != nil {
		return o, err
	}
	if _, err := faults.Named(o.profile, sim.NewRand(0)); err != nil {
		return o, err
	}
	return o, nil
}

// jobs builds the worlds to run.
func (o options) jobs() ([]job, error) {
	if o.replay != "" {
		sf, err := readSeedFile(o.replay)
		if err != nil {
			return nil, err
		}
		return []job{sf.job}, nil
	}
	var out []job
	for i := range o.seeds {
		j, err := drawJob(o.seed+uint64(i), o.iters, o.profile)
		if err != nil {
			return nil, err
		}
		if o.schedule != "" {
			if j.schedule, err = faults.ParseSchedule(o.schedule); err != nil {
				return nil, err
			}
			j.replay = true
		}
		out = append(out, j)
	}
	return out, nil
}

// run runs every job, prints summaries, shrinks failures; it reports
// whether all passed.
func run(o options) (bool, error) {
	jobs, err := o.jobs()
	if err != nil {
		return false, err
	}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			return false, err
		}
		defer f.Close()
		jobs[0].trace = f
	}
	if o.timeline != "" {
		jobs[0].tap = newTimeline(jobs[0].spec)
	}
	if len(jobs) == 1 || o.verbose {
		for _, j := range jobs {
			fmt.Printf("start seed=%d iters=%d plan=%s\n  world: %s\n", j.seed, j.iters, j.plan, j.spec.Summary())
		}
	}
	outs := runAll(jobs, &failFast{on: o.failfast})
	ok := report(o, outs)
	if o.timeline != "" && len(outs) == 1 {
		if err := writeTimeline(o.timeline, outs[0], jobs[0].tap); err != nil {
			return ok, err
		}
		outs[0].job.tap = nil // shrinking's runs are not drawn
	}
	if o.coverage {
		printCoverage(outs)
	}
	for _, out := range outs {
		if out.res.Err() != nil && !o.failfast {
			if err := o.afterFailure(out); err != nil {
				return ok, err
			}
		}
	}
	return ok, nil
}

// runAll runs the jobs on all cores (stopping early under -failfast).
func runAll(jobs []job, ff *failFast) []outcome {
	outs := make([]outcome, len(jobs))
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				outs[i] = ff.run(jobs[i])
			}
		}()
	}
	sent := 0
	for ; sent < len(jobs) && !ff.stopped(); sent++ {
		work <- sent
	}
	close(work)
	wg.Wait()
	if sent < len(jobs) {
		fmt.Printf("failfast: stopped after a failure; seeds %d..%d not run\n", jobs[sent].seed, jobs[len(jobs)-1].seed)
		outs = outs[:sent]
	}
	return outs
}

// afterFailure shrinks a failing run and, with -save, writes its seed
// file.
func (o options) afterFailure(out outcome) error {
	if o.shrink {
		out = shrinkFailure(out, o.shrinkTime, os.Stdout)
	}
	if !o.save {
		return nil
	}
	path, err := saveSeed(out)
	if err != nil {
		return err
	}
	fmt.Printf("  saved %s; replay: %s\n", path, out.job.command(path))
	return nil
}

func report(o options, outs []outcome) bool {
	ok := true
	var steps uint64
	var wall time.Duration
	failed := 0
	for _, out := range outs {
		r := out.res
		steps += r.Steps
		wall += r.Wall
		if r.Err() == nil {
			if o.verbose || len(outs) == 1 {
				fmt.Println(summary(r))
			}
			continue
		}
		ok = false
		failed++
		fmt.Println(summary(r))
		if r.Halted != "" {
			fmt.Println("  halted:", r.Halted)
		}
		for _, v := range r.Violations {
			fmt.Println("  violation:", v)
		}
		fmt.Printf("  reproduce: %s\n", out.job.command(o.replay))
	}
	if len(outs) == 1 {
		// Last, on its own line: what a determinism check compares.
		fmt.Printf("trace hash=%016x\n", outs[0].res.Hash)
	} else {
		fmt.Printf("seeds %d..%d: %d passed, %d failed; %d steps in %v of world time\n",
			outs[0].job.seed, outs[len(outs)-1].job.seed, len(outs)-failed, failed, steps, wall.Round(time.Millisecond))
		fmt.Println(diskSummary(outs))
	}
	return ok
}

// diskFaultKinds are the fault kinds that hit the simulated disk.
var diskFaultKinds = []string{"fsync-error", "disk-write-error", "disk-full", "bit-flip", "slow-io", "fsync-error-kill", "commit-power-loss"}

// diskSummary counts the worlds that ran the local-disk WAL, those that
// ended halted on a damaged log, and how often each disk fault kind
// fired over the sweep (from each run's injected faults).
func diskSummary(outs []outcome) string {
	worlds, halted, gaps, killsOnly := 0, 0, 0, uint64(0)
	fired := map[string]uint64{}
	for _, out := range outs {
		if out.job.spec.Engine.Disk == nil {
			continue
		}
		worlds++
		killsOnly += out.res.KillsOnly
		if strings.Contains(out.res.Halted, "in the log") {
			halted++
		}
		if strings.Contains(out.res.Halted, "a hidden fsync error left") {
			gaps++
		}
		for _, f := range strings.Fields(out.res.Faults) {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseUint(v, 10, 64)
			fired[k] += n
		}
	}
	var parts []string
	for _, k := range diskFaultKinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, fired[k]))
	}
	return fmt.Sprintf("disk-WAL worlds: %d of %d (%d halted on a flipped bit in the log, %d on a gap a hidden fsync error left, as they should); crashes that spared the machine: %d; disk faults fired: %s",
		worlds, len(outs), halted, gaps, killsOnly, strings.Join(parts, " "))
}

func summary(r sim.Result) string {
	status := "ok"
	switch {
	case r.Err() != nil:
		status = "FAIL" // a halted run can fail its safety check too
	case r.Halted != "":
		status = "ok-halted"
	}
	rate := 0.0
	if r.Wall > 0 {
		rate = float64(r.Steps) / r.Wall.Seconds()
	}
	return fmt.Sprintf("%s seed=%d plan=%s steps=%d sim=%v wall=%v steps/s=%.0f acks=%d crashes=%d kills_only=%d restarts=%d zombies=%d faults={%s} segments=%d sinks=%s applied=%d%s max_live=%d orphans_swept=%d worst_recovery={ops=%d time=%v} hash=%016x",
		status, r.Seed, r.Plan, r.Steps, r.SimTime.Round(time.Millisecond), r.Wall.Round(time.Millisecond), rate,
		r.Acks, r.Crashes, r.KillsOnly, r.Restarts, r.Zombies, r.Faults, r.Segments, r.Destination, r.Applied, destMarksSummary(r.DestMarks)+worldMarksSummary(r.WorldMarks),
		r.MaxLive, r.OrphansSwept, r.WorstRecOps, r.WorstRecTime.Round(time.Millisecond), r.Hash)
}

// destMarksSummary lists the destination marks a run passed, in
// destMarks order: " sink_marks={pg-outage=3 …}", or "" if none.
func destMarksSummary(m map[string]uint64) string {
	names := make([]string, len(destMarks))
	for i, d := range destMarks {
		names[i] = d.name
	}
	return marksSummary("sink_marks", names, m)
}

// marksSummary is " label={name=n …}" for the names (in order) that m
// counts above zero, or "" if none.
func marksSummary(label string, names []string, m map[string]uint64) string {
	var parts []string
	for _, name := range names {
		if n := m[name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", name, n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + label + "={" + strings.Join(parts, " ") + "}"
}

// saveSeed writes seeds/seed-N.txt for a failing outcome (its world and
// the schedule that failed). An existing file is not overwritten.
func saveSeed(out outcome) (string, error) {
	j := out.job
	j.schedule, j.replay = out.schedule, true
	found := "FAILED: " + out.res.Violations[0] + " — (describe the cause and the fix here)"
	b, err := seedFile{job: j, found: found}.format()
	if err != nil {
		return "", err
	}
	path := fmt.Sprintf("seeds/seed-%d.txt", j.seed)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		path = fmt.Sprintf("seeds/seed-%d-%d.txt", j.seed, time.Now().Unix())
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("save: %w", err)
	}
	defer f.Close()
	_, err = f.Write(b)
	return path, err
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.WriteHeapProfile(f)
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulate: heap profile:", err)
	}
}
