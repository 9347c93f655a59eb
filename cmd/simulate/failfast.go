package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/skipprd/skipprd/sim"
)

// failFast is -failfast: a sweep stops dispatching seeds after the first
// failure (the seeds already running finish) and reports what ran. make
// mutants uses it so that a killed mutant costs one failing seed, not a
// whole sweep. With it, a panic inside a world is that seed's failure —
// named with its seed and where it panicked — instead of ending the
// process with no seed to reproduce.
type failFast struct {
	on     bool
	failed atomic.Bool
}

// run runs one job and notes a failure.
func (f *failFast) run(j job) (out outcome) {
	if !f.on {
		return j.run()
	}
	defer func() {
		if p := recover(); p != nil {
			out = outcome{job: j, res: panicResult(j, p, panicSite())}
		}
		if out.res.Err() != nil {
			f.failed.Store(true)
		}
	}()
	return j.run()
}

// stopped reports whether no more seeds should start.
func (f *failFast) stopped() bool { return f.on && f.failed.Load() }

func panicResult(j job, p any, site string) sim.Result {
	v := fmt.Sprintf("panic: %v at %s", p, site)
	return sim.Result{Seed: j.seed, Plan: j.plan.String(), Violations: []string{v}, Classes: []string{"panic"}}
}

// panicSite names the function and line that panicked. It must be called
// from the deferred function that recovered: the frames below it are the
// runtime's panic machinery, then the panicking code.
func panicSite() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // skip Callers, panicSite, the deferred func
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return "an unknown site"
		}
	}
}
