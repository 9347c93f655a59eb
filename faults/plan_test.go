package faults

import (
	"strings"
	"testing"

	"github.com/skipprd/skipprd/sim"
)

func TestSwarmIsSeededAndVaried(t *testing.T) {
	a, b := Swarm(sim.NewRand(5)), Swarm(sim.NewRand(5))
	if a.String() != b.String() {
		t.Fatalf("same seed, different plans: %s vs %s", a, b)
	}
	seen := map[Kind]int{}
	distinct := map[string]bool{}
	for seed := range uint64(200) {
		p := Swarm(sim.NewRand(seed))
		distinct[p.String()] = true
		if p.enabled() == 0 {
			t.Fatalf("seed %d: empty plan", seed)
		}
		for k := range NumKinds {
			if r := p.Rate[k]; r > 0 {
				seen[k]++
				if r > rateMax || (k == Crash && r > crashRateMax) {
					t.Fatalf("seed %d: %s rate %g out of range", seed, k, r)
				}
			}
		}
	}
	for k := range NumKinds {
		if seen[k] < 50 || seen[k] > 150 {
			t.Errorf("%s enabled in %d of 200 plans; swarm enables each about half the time", k, seen[k])
		}
	}
	if len(distinct) < 190 {
		t.Errorf("only %d distinct plans in 200 seeds", len(distinct))
	}
}

func TestInjectorHealsAndCounts(t *testing.T) {
	p, _ := Named("flaky", sim.NewRand(1))
	in := NewInjector(p)
	r := sim.NewRand(2)
	faulty := 0
	for range 2000 {
		if o, _ := in.Decide(sim.OpPut, "k", r); o != sim.OK {
			faulty++
		}
	}
	if faulty == 0 || in.Injected() == "" {
		t.Fatalf("flaky plan injected nothing (%d)", faulty)
	}
	in.Heal()
	for range 2000 {
		if o, extra := in.Decide(sim.OpComplete, "k", r); o != sim.OK || extra != 0 {
			t.Fatalf("fault after Heal: %s %v", o, extra)
		}
		if in.CrashNow(r) {
			t.Fatal("crash after Heal")
		}
	}
}

func TestNamedProfiles(t *testing.T) {
	for _, name := range []string{"none", "swarm", "crash", "flaky", "all"} {
		p, err := Named(name, sim.NewRand(1))
		if err != nil || !strings.HasPrefix(p.String(), name+"[") {
			t.Errorf("%s: %v %s", name, err, p)
		}
	}
	if p, _ := Named("crash", sim.NewRand(1)); p.enabled() != 1 || p.Rate[Crash] == 0 {
		t.Errorf("crash profile: %s", p)
	}
	if _, err := Named("typo", sim.NewRand(1)); err == nil {
		t.Error("unknown profile accepted")
	}
}
