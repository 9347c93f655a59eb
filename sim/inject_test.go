package sim

import (
	"testing"
	"time"
)

// TestInjectRules: each combinator takes exactly the requests it names.
func TestInjectRules(t *testing.T) {
	type req struct {
		op  Op
		key string
	}
	reqs := []req{
		{OpPut, "a.seg"}, {OpPut, "a.seg.commit"}, {OpGet, "a.seg.commit"},
		{OpPut, "b.seg.commit"}, {OpPut, "c.seg.commit"}, {OpDelete, "a.seg"},
	}
	on := true
	cases := []struct {
		name string
		rule *Rule[Op, Outcome]
		want []Outcome // per request
	}{
		{"every op", StoreFault(Fail), []Outcome{Fail, Fail, Fail, Fail, Fail, Fail}},
		{"by op", StoreFault(Fail, OpPut), []Outcome{Fail, Fail, OK, Fail, Fail, OK}},
		{"by op and suffix", StoreFault(Fail, OpPut).Suffix(".commit"), []Outcome{OK, Fail, OK, Fail, Fail, OK}},
		{"contains", StoreFault(Fail).Contains("a."), []Outcome{Fail, Fail, Fail, OK, OK, Fail}},
		{"nth", StoreFault(AmbiguousApplied, OpPut).Suffix(".commit").Nth(2), []Outcome{OK, OK, OK, AmbiguousApplied, OK, OK}},
		{"from", StoreFault(Fail, OpPut).From(3), []Outcome{OK, OK, OK, Fail, Fail, OK}},
		{"times", StoreFault(Throttle).Times(2), []Outcome{Throttle, Throttle, OK, OK, OK, OK}},
		{"prefix", StoreFault(Fail).Prefix("a."), []Outcome{Fail, Fail, Fail, OK, OK, Fail}},
		{"every", StoreFault(Fail).Every(2), []Outcome{Fail, OK, Fail, OK, Fail, OK}},
		{"every from", StoreFault(Fail).From(2).Every(3), []Outcome{OK, Fail, OK, OK, Fail, OK}},
		{"while off", StoreFault(Fail).While(&on), []Outcome{OK, OK, OK, OK, OK, OK}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			on = c.name != "while off"
			decide := StoreRules(c.rule)
			fired := 0
			for i, r := range reqs {
				got := decide(r.op, r.key)
				if got != c.want[i] {
					t.Fatalf("request %d (%s %s): %s, want %s", i, r.op, r.key, got, c.want[i])
				}
				if got != OK {
					fired++
				}
			}
			if c.rule.Fired() != fired {
				t.Fatalf("Fired() = %d, %d fired", c.rule.Fired(), fired)
			}
		})
	}
}

// TestInjectFirstRuleWins: rules are asked in order; a rule that does not
// take a request leaves it to the next.
func TestInjectFirstRuleWins(t *testing.T) {
	first := StoreFault(AmbiguousLost, OpPut).Nth(1)
	rest := StoreFault(Fail, OpPut)
	decide := StoreRules(first, rest)
	got := []Outcome{decide(OpPut, "k"), decide(OpPut, "k"), decide(OpGet, "k")}
	if want := []Outcome{AmbiguousLost, Fail, OK}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("%v, want %v", got, want)
	}
	if first.Seen() != 2 || first.Fired() != 1 || rest.Seen() != 1 || rest.Fired() != 1 {
		t.Fatalf("first seen %d fired %d, rest seen %d fired %d", first.Seen(), first.Fired(), rest.Seen(), rest.Fired())
	}
}

func TestInjectDisk(t *testing.T) {
	sync := DiskFault(DiskIOError, DiskSync).Suffix(".wal").Nth(2)
	f := DiskRules(sync)
	var got []DiskOutcome
	for _, p := range []string{"a.wal", "b.dat", "a.wal", "a.wal"} {
		o, _ := f(DiskSync, p, nil)
		got = append(got, o)
	}
	if got[0] != DiskOK || got[1] != DiskOK || got[2] != DiskIOError || got[3] != DiskOK || sync.Fired() != 1 {
		t.Fatalf("%v, fired %d; want the second .wal sync only", got, sync.Fired())
	}
}

// A Delay is the decided request's extra latency, for store and disk
// alike; a request no rule takes has none.
func TestInjectDelay(t *testing.T) {
	slow := StoreFault(OK, OpGet).Delay(time.Second)
	f := StoreRulesFaults(slow)
	if o, d := f(OpGet, "k", nil); o != OK || d != time.Second {
		t.Fatalf("GET: %s after %v, want OK after 1s", o, d)
	}
	if o, d := f(OpPut, "k", nil); o != OK || d != 0 {
		t.Fatalf("PUT: %s after %v, want OK at once", o, d)
	}
	hang := DiskFault(DiskOK, DiskSync).Prefix("wal/partition-0/").Delay(time.Hour)
	g := DiskRules(hang)
	if o, d := g(DiskSync, "wal/partition-0/1", nil); o != DiskOK || d != time.Hour {
		t.Fatalf("partition 0's sync: %v after %v, want ok after an hour", o, d)
	}
	if _, d := g(DiskSync, "wal/partition-1/1", nil); d != 0 || hang.Fired() != 1 {
		t.Fatalf("partition 1's sync delayed %v (fired %d), want none", d, hang.Fired())
	}
}

// A Chance fires at about its rate, from the rule's own stream or the
// one the injector is handed, and only among the requests it matches;
// the same stream gives the same choices.
func TestInjectChance(t *testing.T) {
	choices := func(rule *Rule[DiskOp, DiskOutcome], handed *Rand) []bool {
		f := DiskRules(rule)
		var out []bool
		for range 1000 {
			o, _ := f(DiskSync, "a.wal", handed)
			out = append(out, o == DiskIOError)
			f(DiskWrite, "a.wal", handed) // not matched: never fires, not seen
		}
		return out
	}
	own := DiskFault(DiskIOError, DiskSync).Chance(0.2, NewRand(7))
	a := choices(own, nil)
	if own.Seen() != 1000 || own.Fired() < 150 || own.Fired() > 250 {
		t.Fatalf("seen %d, fired %d of 1000 at 20%%", own.Seen(), own.Fired())
	}
	b := choices(DiskFault(DiskIOError, DiskSync).Chance(0.2, nil), NewRand(7))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("choice %d differs between the rule's own stream and the same one handed in", i)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a Chance with no stream at all did not panic")
		}
	}()
	StoreRules(StoreFault(Fail).Chance(0.5, nil))(OpPut, "k")
}
