package faults

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/sim"
)

func TestSwarmIsSeededAndVaried(t *testing.T) {
	a, b := Swarm(sim.NewRand(5)), Swarm(sim.NewRand(5))
	if a.String() != b.String() {
		t.Fatalf("same seed, different plans: %s vs %s", a, b)
	}
	seen := map[Kind]int{}
	distinct := map[string]bool{}
	for seed := range uint64(400) {
		p := Swarm(sim.NewRand(seed))
		distinct[p.String()] = true
		if p.enabled() == 0 {
			t.Fatalf("seed %d: empty plan", seed)
		}
		for k := range NumKinds {
			if r := p.Rate[k]; r > 0 {
				seen[k]++
				if lo, hi := rateBounds(k); r < lo || r > hi {
					t.Fatalf("seed %d: %s rate %g outside [%g, %g]", seed, k, r, lo, hi)
				}
			}
		}
	}
	for k := range NumKinds {
		if k == CommitPowerLoss {
			if seen[k] != 0 {
				t.Errorf("%s drawn in %d plans: only Restrict sets it, for disk-WAL worlds", k, seen[k])
			}
			continue
		}
		lo, hi := 100, 300 // about half of 400
		if haltingKind(k) {
			lo, hi = 60, 140 // atRestChance (1/4) of 400
		}
		if seen[k] < lo || seen[k] > hi {
			t.Errorf("%s enabled in %d of 400 plans, want %d..%d", k, seen[k], lo, hi)
		}
	}
	if len(distinct) < 390 {
		t.Errorf("only %d distinct plans in 400 seeds", len(distinct))
	}
}

func TestInjectorHealsAndCounts(t *testing.T) {
	p, _ := Named("flaky", sim.NewRand(1))
	in := NewInjector(p, sim.NewRand(2))
	faulty := 0
	for range 2000 {
		if o, _ := in.Decide(sim.OpPut, "k", 0, nil); o != sim.OK {
			faulty++
		}
	}
	if faulty == 0 || in.Injected() == "" {
		t.Fatalf("flaky plan injected nothing (%d)", faulty)
	}
	in.Heal()
	for range 2000 {
		if o, extra := in.Decide(sim.OpComplete, "k", 0, nil); o != sim.OK || extra != 0 {
			t.Fatalf("fault after Heal: %s %v", o, extra)
		}
		if in.CrashNow() {
			t.Fatal("crash after Heal")
		}
	}
}

func TestNamedProfiles(t *testing.T) {
	for _, name := range []string{"none", "swarm", "crash", "flaky", "all", "multipart", "rot"} {
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

// drive asks an injector a fixed mix of decisions, as a world would.
func drive(in *Injector, steps int) {
	keys := []string{"wal/p/x.seg", "wal/p/x.seg.commit", "wal/p/x.seg.scbl", "wal/p/_writer"}
	for i := range steps {
		now := time.Duration(i) * 10 * time.Millisecond
		in.Decide(sim.Op(i%int(sim.NumOps)), keys[i%len(keys)], now, nil)
		in.CrashNow()
		in.ZombieNow()
		in.DecideSink(now)
		if i%7 == 0 {
			in.CorruptRead("k")
			in.Rewind()
			in.MemoryChange()
			in.CorruptAtRest()
		}
	}
}

// A recorded schedule replayed against the same decision points fires
// exactly the same decisions with the same parameters — and with an
// entry removed, exactly the others.
func TestReplayFiresExactlyTheSchedule(t *testing.T) {
	p, _ := Named("all", sim.NewRand(1))
	rec := NewInjector(p, sim.NewRand(9))
	drive(rec, 5000)
	s := rec.Schedule()
	if len(s) < 100 {
		t.Fatalf("only %d decisions fired", len(s))
	}
	rep := NewReplay(p, s)
	drive(rep, 5000)
	if !slices.Equal(rep.Schedule(), s) {
		t.Fatalf("replay fired %d decisions, recorded %d (or others)", len(rep.Schedule()), len(s))
	}
	shrunk := slices.Delete(slices.Clone(s), 10, 11)
	rep = NewReplay(p, shrunk)
	drive(rep, 5000)
	if !slices.Equal(rep.Schedule(), shrunk) {
		t.Fatal("replay of a schedule with one entry removed fired something else")
	}
	quiet := NewReplay(p, nil)
	drive(quiet, 5000)
	if len(quiet.Schedule()) != 0 {
		t.Fatalf("an empty schedule fired %d decisions", len(quiet.Schedule()))
	}
}

func TestScheduleText(t *testing.T) {
	s := Schedule{{Kind: Crash, N: 7}, {Kind: LatencySpike, N: 3, Param: 12345}, {Kind: Crash, N: 2},
		{Kind: SinkOutage, N: 4}, {Kind: SinkOutage, N: 5}, {Kind: SinkOutage, N: 6}, {Kind: SinkOutage, N: 9}}
	text := s.String()
	if text != "crash@2 crash@7 latency-spike@3=12345 sink-outage@4-6 sink-outage@9" {
		t.Fatalf("text form %q", text)
	}
	back, err := ParseSchedule(text + "\n zombie@1=99")
	if err != nil || len(back) != 8 || back[7] != (Decision{Kind: Zombie, N: 1, Param: 99}) || back.String() != text+" zombie@1=99" {
		t.Fatalf("parse: %v %v", back, err)
	}
	for _, bad := range []string{"nope@1", "crash", "crash@x", "crash@1=y", "crash@1 crash@1", "crash@5-3", "crash@1-2000000", "crash@1-x"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPlanJSONRoundTrip(t *testing.T) {
	for seed := range uint64(50) {
		p := Swarm(sim.NewRand(seed))
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Plan
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if back != p {
			t.Fatalf("round trip changed the plan:\n%+v\n%+v", p, back)
		}
	}
	var p Plan
	if err := json.Unmarshal([]byte(`{"name":"x","rates":{"no-such-kind":0.1}}`), &p); err == nil {
		t.Error("an unknown kind was accepted")
	}
	if err := json.Unmarshal([]byte(`{"name":"x","rates":{},"extra":1}`), &p); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// A plan drops the kinds its world cannot exercise.
func TestRestrict(t *testing.T) {
	p, _ := Named("all", sim.NewRand(1))
	r := p.Restrict(World{Sink: true})
	for _, k := range []Kind{FsyncError, DiskFull, BitFlip, MultipartPart, SourceRewind} {
		if r.Enabled(k) {
			t.Errorf("%s kept in a world without what it needs", k)
		}
	}
	for _, k := range []Kind{Crash, SinkError, CorruptAtRest, Zombie} {
		if !r.Enabled(k) {
			t.Errorf("%s dropped", k)
		}
	}
	if strings.Contains(r.String(), "fsync-error") {
		t.Errorf("restricted plan prints %s", r)
	}
	full := p.Restrict(World{Disk: true, Sink: true, Multipart: true, DiskRead: true, Replayable: true})
	if full != p {
		t.Error("a world with everything lost a kind")
	}
	if !p.Restrict(World{Disk: true, Sink: true, DiskRead: true, DiskWAL: true, S3WALToo: true}).Enabled(Zombie) {
		t.Fatal("zombies dropped from a world whose other pipeline runs the S3 WAL")
	}
	if p.Restrict(World{Disk: true, Sink: true, DiskRead: true, DiskWAL: true}).Enabled(Zombie) {
		t.Error("a disk-WAL world kept zombies (one writer per local log)")
	}
	swarm := Swarm(sim.NewRand(7))
	if got := swarm.Restrict(World{Disk: true, Sink: true, DiskRead: true, DiskWAL: true}).Rate[CommitPowerLoss]; got != commitPowerLossRate {
		t.Errorf("a swarm's disk-WAL world loses power after commits at rate %g, want %g", got, commitPowerLossRate)
	}
	if swarm.Restrict(World{Disk: true, Sink: true}).Enabled(CommitPowerLoss) {
		t.Error("a world without a disk WAL kept commit-power-loss")
	}
}
