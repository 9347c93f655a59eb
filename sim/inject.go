package sim

import (
	"slices"
	"strings"
	"time"
)

// Composable fault injection for tests, in the spirit of Pebble's errorfs:
// a test states which requests fail and how — by operation, by key or
// path, by the index of the matching request — as rules, instead of
// writing a closure that counts for itself.
//
//	marker := sim.StoreFault(sim.AmbiguousApplied, sim.OpPut).Suffix(".seg.commit").Nth(1)
//	r.faults = sim.StoreRules(marker)
//	…
//	if marker.Fired() != 1 { … }
//
// The rules of one injector are asked in order; the first that matches a
// request decides it, and a request no rule takes succeeds. A rule counts
// the requests it matched (Seen) and those it decided (Fired), so that a
// test can assert its fault was reached: a fault that never fired proves
// nothing.

// Rule is one fault: the outcome it injects and the requests it takes.
type Rule[O comparable, Out any] struct {
	out    Out
	ops    []O
	keys   []func(string) bool
	nth    int     // only the nth matching request (1-based); 0: every one from `from`
	from   int     // with nth == 0: the matching requests from this one on (1-based)
	every  int     // with nth == 0: every nth from `from` (0 and 1: each one)
	times  int     // at most this many fire; 0: no limit
	on     *bool   // fire only while *on
	chance float64 // fire with this probability (0: always), drawn from rnd
	rnd    *Rand   // the chance's stream; nil: the injector's
	delay  time.Duration
	seen   int
	fired  int
}

// StoreFault is a rule over object-store requests: out for the given
// operations (every operation if none).
func StoreFault(out Outcome, ops ...Op) *Rule[Op, Outcome] {
	return &Rule[Op, Outcome]{out: out, ops: ops}
}

// DiskFault is a rule over disk calls: out for the given operations
// (every operation if none).
func DiskFault(out DiskOutcome, ops ...DiskOp) *Rule[DiskOp, DiskOutcome] {
	return &Rule[DiskOp, DiskOutcome]{out: out, ops: ops}
}

// Key narrows the rule to keys (or paths) for which match holds; several
// Key calls must all hold.
func (r *Rule[O, Out]) Key(match func(string) bool) *Rule[O, Out] {
	r.keys = append(r.keys, match)
	return r
}

// Suffix narrows the rule to keys ending in s.
func (r *Rule[O, Out]) Suffix(s string) *Rule[O, Out] {
	return r.Key(func(k string) bool { return strings.HasSuffix(k, s) })
}

// Prefix narrows the rule to keys starting with s.
func (r *Rule[O, Out]) Prefix(s string) *Rule[O, Out] {
	return r.Key(func(k string) bool { return strings.HasPrefix(k, s) })
}

// Contains narrows the rule to keys holding s.
func (r *Rule[O, Out]) Contains(s string) *Rule[O, Out] {
	return r.Key(func(k string) bool { return strings.Contains(k, s) })
}

// Nth fires on the nth matching request only (1-based).
func (r *Rule[O, Out]) Nth(n int) *Rule[O, Out] {
	if n < 1 {
		panic("sim: Rule.Nth counts from 1")
	}
	r.nth = n
	return r
}

// From fires on every matching request from the nth on (1-based).
func (r *Rule[O, Out]) From(n int) *Rule[O, Out] {
	if n < 1 {
		panic("sim: Rule.From counts from 1")
	}
	r.from = n
	return r
}

// Every fires on every nth matching request: the first (or From's),
// then each nth after it.
func (r *Rule[O, Out]) Every(n int) *Rule[O, Out] {
	if n < 1 {
		panic("sim: Rule.Every counts from 1")
	}
	r.every = n
	return r
}

// Chance fires on a matching request with probability p, drawn from rnd
// (nil: the Rand the injector is handed; StoreRules, handed none,
// panics on such a rule). Requests it does not fire on are still seen.
func (r *Rule[O, Out]) Chance(p float64, rnd *Rand) *Rule[O, Out] {
	if p <= 0 || p > 1 {
		panic("sim: Rule.Chance takes a probability in (0, 1]")
	}
	r.chance, r.rnd = p, rnd
	return r
}

// Delay makes the requests the rule decides d slower (with DiskOK or
// OK, a slow request that succeeds).
func (r *Rule[O, Out]) Delay(d time.Duration) *Rule[O, Out] {
	r.delay = d
	return r
}

// Times fires at most n times.
func (r *Rule[O, Out]) Times(n int) *Rule[O, Out] {
	r.times = n
	return r
}

// While fires only while *on is true (a test turns the fault off by
// setting it false). Requests while off are not counted as seen.
func (r *Rule[O, Out]) While(on *bool) *Rule[O, Out] {
	r.on = on
	return r
}

// Seen is how many requests matched the rule's operations and keys.
func (r *Rule[O, Out]) Seen() int { return r.seen }

// Fired is how many requests the rule decided.
func (r *Rule[O, Out]) Fired() int { return r.fired }

// decide reports whether the rule takes this request, counting it; rnd
// is the injector's stream, for a Chance without its own.
func (r *Rule[O, Out]) decide(op O, key string, rnd *Rand) bool {
	if len(r.ops) > 0 && !slices.Contains(r.ops, op) {
		return false
	}
	for _, k := range r.keys {
		if !k(key) {
			return false
		}
	}
	if r.on != nil && !*r.on {
		return false
	}
	r.seen++
	switch {
	case r.times > 0 && r.fired >= r.times:
		return false
	case r.nth > 0 && r.seen != r.nth:
		return false
	case r.nth == 0 && r.seen < max(r.from, 1):
		return false
	case r.nth == 0 && r.every > 1 && (r.seen-max(r.from, 1))%r.every != 0:
		return false
	case r.chance > 0 && !r.draw(rnd):
		return false
	}
	r.fired++
	return true
}

// draw is the rule's chance, from its own stream or else rnd.
func (r *Rule[O, Out]) draw(rnd *Rand) bool {
	if r.rnd != nil {
		rnd = r.rnd
	}
	if rnd == nil {
		panic("sim: a Rule with a Chance and no Rand of its own needs an injector handed one (StoreRulesFaults, DiskRules)")
	}
	return rnd.Chance(r.chance)
}

// StoreRules is an injector of store faults over the rules, first match
// wins; a request no rule takes is OK.
func StoreRules(rules ...*Rule[Op, Outcome]) func(op Op, key string) Outcome {
	return func(op Op, key string) Outcome {
		out, _ := decideAll(rules, op, key, nil, OK)
		return out
	}
}

// StoreRulesFaults is StoreRules as a StoreFaults: a rule's Delay is the
// request's extra latency, and a Chance without a Rand of its own draws
// from the one the store hands it.
func StoreRulesFaults(rules ...*Rule[Op, Outcome]) StoreFaultsFunc {
	return func(op Op, key string, rnd *Rand) (Outcome, time.Duration) {
		return decideAll(rules, op, key, rnd, OK)
	}
}

// decideAll asks rules in order; the first that takes the request
// decides it, else it is ok.
func decideAll[O comparable, Out any](rules []*Rule[O, Out], op O, key string, rnd *Rand, ok Out) (Out, time.Duration) {
	for _, r := range rules {
		if r.decide(op, key, rnd) {
			return r.out, r.delay
		}
	}
	return ok, 0
}

// DiskRules is an injector of disk faults over the rules, first match
// wins; a call no rule takes is DiskOK.
func DiskRules(rules ...*Rule[DiskOp, DiskOutcome]) DiskFaultsFunc {
	return func(op DiskOp, path string, rnd *Rand) (DiskOutcome, time.Duration) {
		return decideAll(rules, op, path, rnd, DiskOK)
	}
}

// MutatingOps are the operations that change the store (Op.Mutates).
func MutatingOps() []Op {
	var out []Op
	for op := range NumOps {
		if op.Mutates() {
			out = append(out, op)
		}
	}
	return out
}
