// Command simulate runs the engine inside seeded simulated worlds and
// checks its guarantees. A failing run prints what broke, the seed and the
// exact command that reproduces it, and exits 1.
//
//	simulate -seed 42 -iters 1e6
//	simulate -seeds 200 -iters 1e5 -faults swarm
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

type options struct {
	seed    uint64
	seeds   int
	iters   uint64
	profile string
	verbose bool
	trace   string
	save    bool
	cpuprof string

	failfast bool // stop at the first failing seed (failfast.go)
}

func main() {
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
		pprof.StartCPUProfile(f)
	}
	ok := run(opts)
	if opts.cpuprof != "" {
		pprof.StopCPUProfile()
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
	fs.StringVar(&o.profile, "faults", "swarm", "fault profile: none, swarm, crash, flaky, all")
	fs.BoolVar(&o.verbose, "v", false, "print every run's summary, not only failures")
	fs.StringVar(&o.trace, "trace", "", "write a human-readable event trace to this file (single seed)")
	fs.BoolVar(&o.save, "save", false, "write a seeds/ file for every failing seed")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&o.failfast, "failfast", false, "stop starting seeds after the first failure (a panic counts as one)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	f, err := strconv.ParseFloat(iters, 64)
	if err != nil || f < 1 || f > 1e12 {
		return o, fmt.Errorf("-iters %q: want a positive number like 1e6", iters)
	}
	o.iters = uint64(f)
	if o.seeds < 1 {
		return o, fmt.Errorf("-seeds %d: want at least 1", o.seeds)
	}
	if o.trace != "" && o.seeds > 1 {
		return o, fmt.Errorf("-trace needs a single seed")
	}
	if _, err := faults.Named(o.profile, sim.NewRand(0)); err != nil {
		return o, err
	}
	return o, nil
}

// run runs every seed and prints summaries; it reports whether all passed.
func run(o options) bool {
	results := make([]sim.Result, o.seeds)
	var wg sync.WaitGroup
	ff := &failFast{on: o.failfast}
	work := make(chan int)
	for range min(runtime.GOMAXPROCS(0), o.seeds) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = ff.run(o, o.seed+uint64(i))
			}
		}()
	}
	sent := 0
	for ; sent < o.seeds && !ff.stopped(); sent++ {
		work <- sent
	}
	close(work)
	wg.Wait()
	if sent < o.seeds {
		fmt.Printf("failfast: stopped after a failure; seeds %d..%d not run\n", o.seed+uint64(sent), o.seed+uint64(o.seeds)-1)
		o.seeds, results = sent, results[:sent]
	}
	return report(o, results)
}

func runSeed(o options, seed uint64) sim.Result {
	plan, _ := faults.Named(o.profile, sim.NewRand(seed).Split("faults"))
	if o.seeds == 1 || o.verbose {
		fmt.Printf("start seed=%d iters=%d plan=%s\n", seed, o.iters, plan)
	}
	cfg := sim.Config{Seed: seed, Iters: o.iters, Faults: faults.NewInjector(plan), Destinations: destinations}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			fmt.Fprintln(os.Stderr, "simulate:", err)
			os.Exit(2)
		}
		defer f.Close()
		cfg.Trace = f
	}
	return sim.NewWorld(cfg).Run(time.Now)
}

func report(o options, results []sim.Result) bool {
	ok := true
	var steps uint64
	var wall time.Duration
	for _, r := range results {
		steps += r.Steps
		wall += r.Wall
		if r.Err() == nil {
			if o.verbose || o.seeds == 1 {
				fmt.Println(summary(r))
			}
			continue
		}
		ok = false
		fmt.Println(summary(r))
		for _, v := range r.Violations {
			fmt.Println("  violation:", v)
		}
		fmt.Printf("  reproduce: go run ./cmd/simulate -seed %d -iters %d -faults %s\n", r.Seed, o.iters, o.profile)
		if o.save {
			saveSeed(o, r)
		}
	}
	if o.seeds == 1 {
		// Last, on its own line: what a determinism check compares.
		fmt.Printf("trace hash=%016x\n", results[0].Hash)
	}
	if o.seeds > 1 {
		failed := 0
		for _, r := range results {
			if r.Err() != nil {
				failed++
			}
		}
		fmt.Printf("seeds %d..%d: %d passed, %d failed; %d steps in %v of world time\n",
			o.seed, o.seed+uint64(o.seeds)-1, o.seeds-failed, failed, steps, wall.Round(time.Millisecond))
	}
	return ok
}

func summary(r sim.Result) string {
	status := "ok"
	if r.Err() != nil {
		status = "FAIL"
	}
	rate := 0.0
	if r.Wall > 0 {
		rate = float64(r.Steps) / r.Wall.Seconds()
	}
	return fmt.Sprintf("%s seed=%d plan=%s steps=%d sim=%v wall=%v steps/s=%.0f acks=%d crashes=%d restarts=%d faults={%s} segments=%d sink=%s applied=%d max_live=%d orphans_swept=%d worst_recovery={ops=%d time=%v} hash=%016x",
		status, r.Seed, r.Plan, r.Steps, r.SimTime.Round(time.Millisecond), r.Wall.Round(time.Millisecond), rate,
		r.Acks, r.Crashes, r.Restarts, r.Faults, r.Segments, r.Destination, r.Applied, r.MaxLive, r.OrphansSwept, r.WorstRecOps, r.WorstRecTime.Round(time.Millisecond), r.Hash)
}

func saveSeed(o options, r sim.Result) {
	path := fmt.Sprintf("seeds/seed-%d.txt", r.Seed)
	body := fmt.Sprintf("seed: %d\niters: %d\nfaults: %s\nfound: %s\n", r.Seed, o.iters, o.profile, r.Violations[0])
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "simulate: save:", err)
	}
}
