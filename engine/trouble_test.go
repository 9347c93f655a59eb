package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
)

// ops lists the operations of events, "+op" for a start, "-op" for a clear.
func ops(events []engine.TroubleEvent) []string {
	var out []string
	for _, ev := range events {
		sign := "+"
		if ev.Cleared {
			sign = "-"
		}
		out = append(out, sign+ev.Op)
	}
	return out
}

// A store that refuses writes for a while is a trouble of its PUTs and of
// the persist, from the first failure until a write lands again: listed
// while it lasts (with its last error and attempts), an event when it
// starts and one when it clears, and the unit acked once it is over.
func TestTroubleWhileTheStoreRefusesWrites(t *testing.T) {
	r := newRig(t, sim.StoreConfig{})
	r.start()
	refusing := true
	r.faults = sim.StoreRules(sim.StoreFault(sim.Refused, sim.MutatingOps()...).While(&refusing))
	u := r.submit(unit("events", 1))
	r.sched.RunUntil(r.sched.Now() + 20*time.Second)
	if u.done {
		t.Fatalf("acked while every write is refused: %+v", u)
	}
	now := r.eng.Troubles()
	names := make([]string, len(now))
	for i, tr := range now {
		names[i] = tr.Op
		if tr.Attempts == 0 || !errors.Is(tr.Err, engine.ErrRefused) {
			t.Errorf("trouble %s: %d attempts, error %v", tr.Op, tr.Attempts, tr.Err)
		}
	}
	if !slices.Contains(names, "store put") || !slices.Contains(names, "persist") {
		t.Fatalf("troubles %v, want store put and persist among them", names)
	}
	refusing = false
	r.until(func() bool { return u.done }, "the ack once writes land")
	if u.err != nil {
		t.Fatalf("unit: %v", u.err)
	}
	r.settle()
	if left := r.eng.Troubles(); len(left) != 0 {
		t.Fatalf("troubles after the store healed: %v", left)
	}
	events, dropped := r.eng.TroubleEventsSince(0)
	got := ops(events)
	for _, want := range []string{"+store put", "+persist", "-store put", "-persist"} {
		if !slices.Contains(got, want) {
			t.Errorf("events %v lack %s", got, want)
		}
	}
	if dropped != 0 || slices.Index(got, "+persist") > slices.Index(got, "-persist") {
		t.Errorf("events %v (dropped %d): a trouble must start before it clears", got, dropped)
	}
	for _, ev := range events {
		if ev.Op == "persist" && ev.Cleared && (ev.Attempts < 2 || ev.Lasted < 10*time.Second) {
			t.Errorf("the persist trouble cleared after %d attempts over %v; it lasted some 20 s", ev.Attempts, ev.Lasted)
		}
	}
	if more, _ := r.eng.TroubleEventsSince(events[len(events)-1].Seq); len(more) != 0 {
		t.Errorf("events after the last seen: %v", ops(more))
	}
}

// Recovery refused for good stops at once, naming the refusal; recovery
// that keeps failing stops after Config.RecoveryGiveUp, with every failed
// attempt an event; without a give-up it keeps trying until it succeeds.
func TestRecoveryGivesUp(t *testing.T) {
	for _, c := range []struct {
		name    string
		outcome sim.Outcome
		giveUp  time.Duration
		within  time.Duration // gave up by then
	}{
		{"refused", sim.Refused, 0, 2 * time.Second},
		{"failing", sim.Fail, 10 * time.Second, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, sim.StoreConfig{})
			r.cfg.RecoveryGiveUp = c.giveUp
			r.faults = sim.StoreRules(sim.StoreFault(c.outcome))
			r.inc = r.sched.NewIncarnation()
			eng, err := engine.New(r.cfg, r.ports())
			if err != nil {
				t.Fatal(err)
			}
			var done bool
			var startErr error
			start := r.sched.Now()
			eng.Start(func(err error) { done, startErr = true, err })
			r.sched.RunUntil(start + c.within)
			if !done || !errors.Is(startErr, engine.ErrRecoveryGaveUp) {
				t.Fatalf("after %v: done %t, %v; want ErrRecoveryGaveUp", c.within, done, startErr)
			}
			if c.outcome == sim.Refused && !errors.Is(startErr, engine.ErrRefused) {
				t.Errorf("the give-up does not carry the refusal: %v", startErr)
			}
			events, _ := eng.TroubleEventsSince(0)
			attempts := 0
			for _, ev := range events {
				if ev.Op == "recovery" && !ev.Cleared {
					attempts++
				}
			}
			// Each attempt but the last (the give-up says that one) is an
			// event; refused, the first attempt is the last.
			if c.outcome == sim.Fail && attempts < 2 || c.outcome == sim.Refused && attempts != 0 {
				t.Errorf("%d recovery attempts reported as events before giving up", attempts)
			}
			if !strings.Contains(startErr.Error(), "attempts over") {
				t.Errorf("the give-up does not say how long it tried: %v", startErr)
			}
		})
	}
	t.Run("no give-up", func(t *testing.T) {
		r := newRig(t, sim.StoreConfig{})
		failing := true
		r.faults = sim.StoreRules(sim.StoreFault(sim.Fail).While(&failing))
		r.inc = r.sched.NewIncarnation()
		eng, err := engine.New(r.cfg, r.ports())
		if err != nil {
			t.Fatal(err)
		}
		var done bool
		var startErr error
		eng.Start(func(err error) { done, startErr = true, err })
		r.sched.RunUntil(r.sched.Now() + time.Minute)
		if done {
			t.Fatalf("recovery ended (%v) though it may retry for ever", startErr)
		}
		failing = false
		r.until(func() bool { return done }, "recovery once the store answers")
		if startErr != nil || len(eng.Troubles()) != 0 {
			t.Fatalf("recovery: %v, troubles %v", startErr, eng.Troubles())
		}
	})
}
