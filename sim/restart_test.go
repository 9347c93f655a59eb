package sim

import (
	"testing"
	"time"
)

// restartFaults restarts whenever asked, and injects nothing else.
type restartFaults struct {
	noFaults
	yes bool
}

func (f *restartFaults) RestartNow() bool { return f.yes }

// restartWorld is a world with an engine ready, a graceful close just
// begun, and the fault plan quiet again.
func restartWorld(t *testing.T) *World {
	t.Helper()
	f := &restartFaults{}
	spec := SmallSpec("")
	w := NewWorld(Config{Seed: 3, Iters: 1, Faults: f, World: &spec})
	w.startIncarnation()
	stepUntil(t, w, func() bool { return w.eng != nil && w.eng.Ready() }, "recovery")
	f.yes = true
	w.maybeRestart()
	f.yes = false
	if !w.closing || w.res.Restarts != 1 {
		t.Fatalf("no graceful close began (closing %v, restarts %d)", w.closing, w.res.Restarts)
	}
	return w
}

func stepUntil(t *testing.T, w *World, cond func() bool, what string) {
	t.Helper()
	for range 100_000 {
		if cond() {
			return
		}
		w.sched.Step()
	}
	t.Fatalf("%s never happened", what)
}

// A graceful restart closes the engine, then a new process recovers.
func TestRestartClosesThenRecovers(t *testing.T) {
	w := restartWorld(t)
	first := w.inc
	stepUntil(t, w, func() bool { return w.eng != nil && w.eng.Ready() && w.inc != first }, "the next process")
	wantClean(t, w)
}

// The oracle catches a close that answers while a unit submitted to it
// is still unanswered.
func TestRestartOracleUnansweredUnit(t *testing.T) {
	w := restartWorld(t)
	w.awaiting++ // a unit the engine never answers
	stepUntil(t, w, func() bool { return !w.closing }, "the close")
	wantViolation(t, w, "units unanswered")
}

// The oracle catches a close that does not answer within closeBound.
func TestRestartOracleCloseHangs(t *testing.T) {
	w := restartWorld(t)
	w.closeStart = w.sched.Now() - closeBound - time.Second
	w.maybeRestart()
	wantViolation(t, w, "has not answered")
}
