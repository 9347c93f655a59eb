package sim

import (
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// checkTroubles: once the world converged — recovery done, every unit
// committed, every job applied — no trouble of recovery, of the persist
// or of a sink lane may still be reported: each of those operations has
// since succeeded, and a success clears its trouble (engine/trouble.go).
// A trouble that outlives its failure would have an operator chase a
// problem that is gone.
func (o *Oracle) checkTroubles(troubles []engine.Trouble) {
	for _, t := range troubles {
		if t.Op == "recovery" || t.Op == "persist" || strings.HasPrefix(t.Op, "sink ") {
			o.fail("trouble %q still reported after convergence (%d attempts since %v, last: %v)", t.Op, t.Attempts, t.Since, t.Err)
		}
	}
}
