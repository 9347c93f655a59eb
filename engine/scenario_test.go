package engine_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
)

// Scenario tests: the engine's behaviour under a fault or a crash as a
// script with its expected output (testdata/scenarios), one world per
// file. Rewrite the expected output after a deliberate change with
//
//	go test ./engine -run TestScenarios -rewrite
//
// and read the diff: it is the change in behaviour.
//
// Commands:
//
//	disk partitions=2              the local-disk WAL (before the first start)
//	start                          a new incarnation (killing any), run until recovered
//	submit ns=a values=1,2|1..3000 [key=k] [offset=src:5]
//	                               submit a unit; it is named #n in order
//	fault op=put suffix=.seg.commit outcome=ambiguous-applied [nth=1|from=2|times=1]
//	                               add an object-store fault rule (first match wins)
//	clear-faults                   drop every rule
//	run [for=10s] [until=answered|applied=put:.seg]
//	                               step the world; print the answers that came
//	disk-fault op=sync suffix=.wal outcome=io-error [nth=2]
//	                               add a disk fault rule
//	crash [power-loss]             kill the incarnation where it stands (and
//	                               lose what the disk had not made durable)
//	close                          close gracefully (flush, apply, reclaim)
//	print wal|log|committed|stats|faults
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		s := &scenario{t: t}
		s.use(newRig(t, sim.StoreConfig{}))
		datadriven.RunTest(t, path, s.do)
	})
}

// use makes r the scenario's world, its faults the scenario's rules.
func (s *scenario) use(r *rig) {
	s.r = r
	r.store.OnApply = s.applied
	r.faults = func(op sim.Op, key string) sim.Outcome { return sim.StoreRules(s.rules...)(op, key) }
	if r.disk != nil {
		r.disk.SetFaults(sim.DiskFaultsFunc(func(op sim.DiskOp, path string, rnd *sim.Rand) (sim.DiskOutcome, time.Duration) {
			return sim.DiskRules(s.diskRules...)(op, path, rnd)
		}))
	}
}

type scenario struct {
	t         *testing.T
	r         *rig
	rules     []*sim.Rule[sim.Op, sim.Outcome]
	diskRules []*sim.Rule[sim.DiskOp, sim.DiskOutcome]
	subs      []*result
	printed   []bool // per submission: its answer (or its loss) printed
	// mutations are the store mutations applied, as "op key", for run
	// until=applied=…
	mutations []string
}

func (s *scenario) applied(op sim.Op, key string) {
	s.mutations = append(s.mutations, op.String()+" "+key)
}

func (s *scenario) do(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "disk":
		var n int
		d.ScanArgs(t, "partitions", &n)
		if s.r.inc != nil {
			d.Fatalf(t, "disk comes before the first start")
		}
		s.use(newDiskRig(t, n))
		return ""
	case "disk-fault":
		return s.diskFault(t, d)
	case "close":
		if err := s.r.closeEngine(); err != nil {
			return fmt.Sprintf("closed: %v\n", err)
		}
		return "closed\n"
	case "start":
		eng := s.r.start()
		st := eng.Stats()
		return fmt.Sprintf("recovered: epoch %d, %d live segments, %d requests\n", eng.Epoch(), st.LiveSegments, st.RecoveryOps)
	case "submit":
		return s.submit(t, d)
	case "fault":
		return s.fault(t, d)
	case "clear-faults":
		s.rules = nil
		return ""
	case "run":
		return s.run(t, d)
	case "crash":
		s.r.inc.Kill()
		s.r.inc = nil
		out := fmt.Sprintf("crashed at %v\n", s.r.sched.Now().Round(time.Millisecond))
		if d.HasArg("power-loss") {
			s.r.disk.Crash(s.r.root.Split("crash"))
			out = "power lost: " + out
		}
		for i, r := range s.subs {
			if !r.done && !s.printed[i] {
				s.printed[i] = true // its answer died with the incarnation
				out += fmt.Sprintf("#%d: never answered\n", i+1)
			}
		}
		return out
	case "print":
		return s.print(t, d)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (s *scenario) submit(t *testing.T, d *datadriven.TestData) string {
	var ns, values string
	d.ScanArgs(t, "ns", &ns)
	d.ScanArgs(t, "values", &values)
	u := unit(ns, s.values(t, d, values)...)
	if d.HasArg("key") {
		d.ScanArgs(t, "key", &u.IdempotencyKey)
	}
	if d.HasArg("offset") {
		var o string
		d.ScanArgs(t, "offset", &o)
		k, v, _ := strings.Cut(o, ":")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "offset %q: %v", o, err)
		}
		u = withOffset(u, k, n)
	}
	s.subs = append(s.subs, s.r.submit(u))
	s.printed = append(s.printed, false)
	return fmt.Sprintf("#%d submitted\n", len(s.subs))
}

// values parses "1,2,5" or a range "1..3000".
func (s *scenario) values(t *testing.T, d *datadriven.TestData, text string) []int64 {
	parse := func(v string) int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "values %q: %v", text, err)
		}
		return n
	}
	if lo, hi, ok := strings.Cut(text, ".."); ok {
		var vals []int64
		for v := parse(lo); v <= parse(hi); v++ {
			vals = append(vals, v)
		}
		return vals
	}
	var vals []int64
	for _, v := range strings.Split(text, ",") {
		vals = append(vals, parse(v))
	}
	return vals
}

var outcomes = map[string]sim.Outcome{
	"fail": sim.Fail, "throttle": sim.Throttle, "ambiguous-applied": sim.AmbiguousApplied,
	"ambiguous-lost": sim.AmbiguousLost, "refused": sim.Refused,
}

var diskOutcomes = map[string]sim.DiskOutcome{"io-error": sim.DiskIOError, "no-space": sim.DiskNoSpace, "bit-flip": sim.DiskBitFlip}

func (s *scenario) fault(t *testing.T, d *datadriven.TestData) string {
	op, out := parseFault(t, d, sim.NumOps, outcomes)
	s.rules = append(s.rules, narrow(t, d, sim.StoreFault(out, op)))
	return ""
}

func (s *scenario) diskFault(t *testing.T, d *datadriven.TestData) string {
	op, out := parseFault(t, d, sim.NumDiskOps, diskOutcomes)
	s.diskRules = append(s.diskRules, narrow(t, d, sim.DiskFault(out, op)))
	return ""
}

// parseFault reads op= (one of the n operations, by name) and outcome=.
func parseFault[O interface {
	~uint8
	String() string
}, Out any](t *testing.T, d *datadriven.TestData, n O, names map[string]Out) (O, Out) {
	var opName, outName string
	d.ScanArgs(t, "op", &opName)
	d.ScanArgs(t, "outcome", &outName)
	out, ok := names[outName]
	if !ok {
		d.Fatalf(t, "outcome %q: one of %v", outName, slices.Sorted(maps.Keys(names)))
	}
	for o := range n {
		if o.String() == opName {
			return o, out
		}
	}
	d.Fatalf(t, "op %q is not an operation of this kind", opName)
	return n, out
}

// narrow applies the optional suffix=, nth=, from= and times= to r.
func narrow[O comparable, Out any](t *testing.T, d *datadriven.TestData, r *sim.Rule[O, Out]) *sim.Rule[O, Out] {
	var n int
	var text string
	if d.MaybeScanArgs(t, "suffix", &text) {
		r.Suffix(text)
	}
	if d.MaybeScanArgs(t, "nth", &n) {
		r.Nth(n)
	}
	if d.MaybeScanArgs(t, "from", &n) {
		r.From(n)
	}
	if d.MaybeScanArgs(t, "times", &n) {
		r.Times(n)
	}
	return r
}

// run steps the world: for a simulated duration (default 10s), until
// every submission is answered, or until a mutation was applied.
func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	var until string
	d.MaybeScanArgs(t, "until", &until)
	switch {
	case until == "answered":
		s.r.until(func() bool {
			for i, r := range s.subs {
				if !r.done && !s.printed[i] {
					return false
				}
			}
			return true
		}, "every answer")
	case strings.HasPrefix(until, "applied="):
		op, suffix, _ := strings.Cut(strings.TrimPrefix(until, "applied="), ":")
		from := len(s.mutations)
		s.r.until(func() bool {
			return slices.ContainsFunc(s.mutations[from:], func(a string) bool {
				k, ok := strings.CutPrefix(a, op+" ")
				return ok && strings.HasSuffix(k, suffix)
			})
		}, until)
	case until != "":
		d.Fatalf(t, "until %q: answered or applied=op:suffix", until)
	default:
		dur := 10 * time.Second
		var text string
		if d.MaybeScanArgs(t, "for", &text) {
			var err error
			if dur, err = time.ParseDuration(text); err != nil {
				d.Fatalf(t, "for: %v", err)
			}
		}
		s.r.sched.RunUntil(s.r.sched.Now() + dur)
	}
	return s.answers()
}

// answers prints the answers that came since the last print, in
// submission order.
func (s *scenario) answers() string {
	var b strings.Builder
	for i, r := range s.subs {
		if !r.done || s.printed[i] {
			continue
		}
		s.printed[i] = true
		fmt.Fprintf(&b, "#%d: %s\n", i+1, answerName(r.err))
	}
	if b.Len() == 0 {
		return "no answers\n"
	}
	return b.String()
}

func answerName(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{engine.ErrUnknownOutcome, "unknown outcome"}, {engine.ErrClosed, "closed"},
		{engine.ErrResourceExhausted, "resource exhausted"}, {engine.ErrFenced, "fenced"},
	} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return "acked"
}

func (s *scenario) print(t *testing.T, d *datadriven.TestData) string {
	var what string
	if len(d.CmdArgs) == 1 {
		what = d.CmdArgs[0].Key
	}
	var b strings.Builder
	switch what {
	case "wal":
		for _, k := range s.r.store.Keys("wal/") {
			body, _ := s.r.store.Object(k)
			fmt.Fprintf(&b, "%s (%d bytes)\n", k, len(body))
		}
	case "committed":
		vals := s.r.committedValues()
		for _, ns := range slices.Sorted(maps.Keys(vals)) {
			fmt.Fprintf(&b, "%s: %v\n", ns, vals[ns])
		}
	case "stats":
		st := s.r.eng.Stats()
		fmt.Fprintf(&b, "commits %d, persist failures %d, in doubt %d, acked %d, duplicates %d, rejected %d, recovery runs %d, orphans swept %d\n",
			st.Commits, st.PersistFailures, st.InDoubt, st.UnitsAcked, st.UnitsDuplicate, st.UnitsRejected, st.RecoveryRuns, st.OrphansSwept)
	case "faults":
		for i, r := range s.rules {
			fmt.Fprintf(&b, "rule %d: seen %d, fired %d\n", i+1, r.Seen(), r.Fired())
		}
		for i, r := range s.diskRules {
			fmt.Fprintf(&b, "disk rule %d: seen %d, fired %d\n", i+1, r.Seen(), r.Fired())
		}
	case "log":
		for _, p := range s.r.disk.Paths() {
			written, durable := s.r.disk.File(p)
			fmt.Fprintf(&b, "%s (%d bytes written, %d durable)\n", p, len(written), len(durable))
		}
	default:
		d.Fatalf(t, "print %q: wal, log, committed, stats or faults", what)
	}
	if b.Len() == 0 {
		return "(none)\n"
	}
	return b.String()
}
