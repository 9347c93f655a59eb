package main

import (
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sources/objects"
)

// onceWorld is prefixWorld with its prefix source run once, again and
// again (sim.SourceSpec.Once).
func onceWorld(t *testing.T, profile string, iters uint64) job {
	t.Helper()
	j := prefixWorld(t, profile, iters, false)
	for i := range j.spec.Sources {
		if s := &j.spec.Sources[i]; s.Prefix {
			s.Once, s.OnceEvery = true, 200*time.Millisecond
		}
	}
	return j
}

// Once runs of the real objects source pass the world's oracles —
// every object a run listed done when it returns, every piece committed
// once, everything done at convergence — through crashes, and through
// store errors that end a run (the next goes on).
func TestPrefixOnceWorld(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	for _, c := range []struct{ profile, mark string }{
		{"crash", sim.MarkPrefixOnce},
		{"flaky", sim.MarkPrefixOnceStoreFailed},
	} {
		res := runPrefixWorld(onceWorld(t, c.profile, 60000), prefixSource)
		if res.Err() != nil {
			t.Fatalf("%s: %v", c.profile, res.Err())
		}
		if res.WorldMarks[sim.MarkPrefixOnce] == 0 || res.WorldMarks[c.mark] == 0 {
			t.Errorf("%s: marks %v; want %s and %s", c.profile, res.WorldMarks, sim.MarkPrefixOnce, c.mark)
		}
	}
}

// The world catches a once run that returns without ingesting an object
// its listing showed.
func TestPrefixOnceOracle(t *testing.T) {
	t.Parallel()
	res := runPrefixWorld(onceWorld(t, "none", 60000),
		over(func(s objects.Store) objects.Store { return hiding{s, "0000000003."} }, nil, nil))
	if want := "a once run returned with object 0000000003."; !strings.Contains(strings.Join(res.Violations, "\n"), want) {
		t.Fatalf("violations %q, want one saying %q", res.Violations, want)
	}
}
