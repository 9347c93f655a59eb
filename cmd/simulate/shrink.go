package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/skipprd/skipprd/faults"
)

// Shrinking. A failing world is replayed with its recorded fault schedule
// (which reproduces it exactly), then made smaller while it still fails
// the same way — the same oracle, by its message's format: first a
// shorter run (fewer steps before the quiet phase), then fewer faults:
// every decision of one kind at once (an outage window is hundreds of
// decisions), then chunks of the schedule and single decisions (delta
// debugging). A smaller candidate's own schedule is what actually fired,
// so decisions its run never reached drop out too. The search stops after
// the time budget and keeps the smallest failure found.

// shrinkFailure returns the smallest failing outcome it finds within
// budget, printing its progress and the result to w.
func shrinkFailure(out outcome, budget time.Duration, w io.Writer) outcome {
	if len(out.res.Classes) == 0 {
		return out
	}
	s := &shrinker{class: out.res.Classes[0], deadline: time.Now().Add(budget)}
	start := out.job
	start.schedule, start.replay, start.trace = out.schedule, true, nil
	first, ok := s.try(start)
	if !ok {
		fmt.Fprintf(w, "  shrink: replaying the recorded schedule did not fail the same way (%v); not shrinking\n", first.res.Err())
		return out
	}
	best := s.shorten(first)
	best = s.dropKinds(best)
	best = s.dropFaults(best)
	fmt.Fprintf(w, "  shrunk: %d faults over %d steps → %d faults over %d steps (%d runs, %v)\n",
		len(out.schedule), out.job.iters, len(best.schedule), best.job.iters, s.runs, time.Since(s.deadline.Add(-budget)).Round(time.Second))
	if text := best.schedule.String(); len(text) <= 4000 {
		fmt.Fprintf(w, "  smallest failing run: go run ./cmd/simulate -seed %d -iters %d -faults %s -schedule '%s'\n",
			best.job.seed, best.job.iters, best.job.profile, text)
	}
	for _, v := range best.res.Violations {
		fmt.Fprintln(w, "  shrunk violation:", v)
	}
	return best
}

type shrinker struct {
	class    string
	deadline time.Time
	runs     int
	mu       sync.Mutex
}

// try replays j and reports whether it fails the same way.
func (s *shrinker) try(j job) (outcome, bool) {
	out := j.run()
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
	return out, out.res.Err() != nil && slices.Contains(out.res.Classes, s.class)
}

func (s *shrinker) expired() bool { return time.Now().After(s.deadline) }

// shorten halves the run while it fails, then searches between the last
// passing and the first failing length.
func (s *shrinker) shorten(best outcome) outcome {
	lo := uint64(0) // longest length known to pass (0: none tried)
	for !s.expired() && best.job.iters > 1000 {
		mid := (lo + best.job.iters) / 2
		if lo == 0 {
			mid = best.job.iters / 2
		}
		if mid <= lo || best.job.iters-mid < best.job.iters/32 {
			break
		}
		j := best.job
		j.iters = mid
		if out, ok := s.try(j); ok {
			out.job.schedule = out.schedule
			best = out
		} else {
			lo = mid
		}
	}
	return best
}

// dropKinds removes every decision of one kind at a time, while the run
// still fails.
func (s *shrinker) dropKinds(best outcome) outcome {
	for k := range faults.NumKinds {
		if s.expired() {
			break
		}
		if best.schedule.Counts()[k] == 0 {
			continue
		}
		j := best.job
		j.schedule = slices.DeleteFunc(slices.Clone(best.schedule), func(d faults.Decision) bool { return d.Kind == k })
		if out, ok := s.try(j); ok {
			out.job.schedule = out.schedule
			best = out
		}
	}
	return best
}

// dropFaults removes chunks of the schedule while the run still fails,
// halving the chunk size when no chunk can go (ddmin).
func (s *shrinker) dropFaults(best outcome) outcome {
	n := 2
	for len(best.schedule) > 0 && !s.expired() {
		size := max((len(best.schedule)+n-1)/n, 1)
		var cands []job
		for i := 0; i < len(best.schedule); i += size {
			j := best.job
			j.schedule = slices.Concat(best.schedule[:i], best.schedule[min(i+size, len(best.schedule)):])
			cands = append(cands, j)
		}
		if out, ok := s.first(cands); ok {
			out.job.schedule = out.schedule
			best = out
			n = max(n-1, 2)
			continue
		}
		if size == 1 {
			break
		}
		n = min(2*n, len(best.schedule))
	}
	return best
}

// first runs candidates on all cores, a batch at a time, and returns the
// lowest-numbered one that fails the same way.
func (s *shrinker) first(cands []job) (outcome, bool) {
	batch := runtime.GOMAXPROCS(0)
	for i := 0; i < len(cands) && !s.expired(); i += batch {
		part := cands[i:min(i+batch, len(cands))]
		outs := make([]outcome, len(part))
		fails := make([]bool, len(part))
		var wg sync.WaitGroup
		for k := range part {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[k], fails[k] = s.try(part[k])
			}()
		}
		wg.Wait()
		if k := slices.Index(fails, true); k >= 0 {
			return outs[k], true
		}
	}
	return outcome{}, false
}
