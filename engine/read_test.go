package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
)

// offsetsReads steers the GETs of the _offsets checkpoint during the
// rig's next start: outcome says each one's fate, damaged whether a
// successful one comes back damaged (n counts them from 0).
func offsetsReads(r *rig, outcome func(n int) sim.Outcome, damaged func(n int) bool) {
	var issued, answered int
	r.faults = func(op sim.Op, key string) sim.Outcome {
		if op != sim.OpGet || !strings.HasSuffix(key, "/_offsets") {
			return sim.OK
		}
		issued++
		return outcome(issued - 1)
	}
	r.corrupt = func(key string) (int64, bool) {
		if !strings.HasSuffix(key, "/_offsets") {
			return 0, false
		}
		answered++
		return 2, damaged(answered - 1) // a flipped bit
	}
}

// ackWithCheckpoint starts an engine with a sink, acks one unit with an
// offset and waits until its segment was reclaimed into the checkpoint.
func ackWithCheckpoint(t *testing.T, r *rig) {
	withSink(r)
	r.start()
	res := r.submit(withOffset(unit("a", 1), "src/a", 7))
	r.until(func() bool { return res.done }, "ack")
	r.settle()
	if _, ok := r.store.Object(r.eng.Layout().CheckpointKey()); !ok || len(r.eng.Segments()) != 0 {
		t.Fatalf("checkpoint written %v, %d segments left: the test needs the offset in the checkpoint only", ok, len(r.eng.Segments()))
	}
}

// A damaged answer after requests that failed for other reasons is not
// corruption: only an object that fails its check on every read is.
// (Seed 308: four GETs of a checkpoint failed in a store outage, the fifth
// came back with a flipped bit, and the engine halted on a good object.)
func TestDamagedAnswerAmongFailedRequestsIsNotCorruption(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	ackWithCheckpoint(t, r)
	offsetsReads(r,
		func(n int) sim.Outcome {
			if n < engine.AttemptsMax-1 {
				return sim.Fail
			}
			return sim.OK
		},
		func(n int) bool { return n == 0 })
	eng := r.start()
	if v, _ := eng.Offsets().Get("src/a"); v != 7 || eng.LastAlert() != nil {
		t.Fatalf("recovered offset %d, alert %v: want 7 and no alert", v, eng.LastAlert())
	}
	if eng.Marks()[engine.MarkReadDamaged] != 1 {
		t.Fatalf("read-damaged marked %d times, want 1", eng.Marks()[engine.MarkReadDamaged])
	}
}

// An object whose every answer fails its check is corrupt: recovery fails
// closed naming it.
func TestEveryAnswerDamagedIsCorruption(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	ackWithCheckpoint(t, r)
	offsetsReads(r, func(int) sim.Outcome { return sim.OK }, func(int) bool { return true })
	r.inc.Kill()
	r.inc = r.sched.NewIncarnation()
	eng, err := engine.New(r.cfg, r.ports())
	if err != nil {
		t.Fatal(err)
	}
	var startErr error
	done := false
	eng.Start(func(err error) { done, startErr = true, err })
	r.until(func() bool { return done }, "recovery")
	if !errors.Is(startErr, engine.ErrCorrupt) || !strings.Contains(startErr.Error(), "_offsets") {
		t.Fatalf("recovery: %v, want ErrCorrupt naming _offsets", startErr)
	}
}
