package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/sim"
)

// A real seed in the real world (swarm faults, a destination) is
// deterministic, and the hash the check reports is the one a plain run
// prints: the recorder changes nothing, and worldConfig builds the world
// runSeed does.
func TestCheckDeterminismReal(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	var out bytes.Buffer
	if !checkJobTwice(drawn(t, 7, 5000), &out, nil) {
		t.Fatalf("seed 7 is not deterministic:\n%s", out.String())
	}
	plain := runSeed(t, "swarm", 5000, 7).res
	want := fmt.Sprintf("deterministic: seed=7 iters=5000 faults=swarm: two runs, the same trace hash=%016x over ", plain.Hash)
	if !strings.HasPrefix(out.String(), want) {
		t.Fatalf("got:\n%s\nwant a line starting %q", out.String(), want)
	}
}

// With every hook armed — fingerprints, comparison, a text window over the
// last records — the real world ends with the hash of a plain run.
func TestRecorderKeepsHash(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	plain := runSeed(t, "swarm", 3000, 12).res
	run := func(rec *sim.Recorder) sim.Result {
		cfg, _ := drawn(t, 12, 3000).config()
		cfg.Recorder = rec
		return sim.NewWorld(cfg).Run(nil)
	}
	keep := sim.NewRecorder(sim.RecorderConfig{})
	kept := run(keep)
	fp := keep.Fingerprints()
	win := sim.Span{Lo: fp.Records - 50, Hi: fp.Records - 1}
	armed := sim.NewRecorder(sim.RecorderConfig{Expect: &fp, Window: &win})
	windowed := run(armed)
	if _, diverged := armed.Diverged(); diverged || len(armed.Window()) != 50 {
		t.Fatalf("window run: diverged %v, %d records captured", diverged, len(armed.Window()))
	}
	if kept.Hash != plain.Hash || windowed.Hash != plain.Hash || fp.Hash != plain.Hash || kept.Steps != plain.Steps {
		t.Fatalf("hash plain %016x, recorded %016x, windowed %016x, fingerprints %016x", plain.Hash, kept.Hash, windowed.Hash, fp.Hash)
	}
}

var (
	divergeHead = regexp.MustCompile(`(?m)^NOT deterministic: seed=7 iters=5000 faults=swarm: the runs diverge at step (\d+), trace event (\d+) \(record \d+, sim time .+\)$`)
	divergeRun  = regexp.MustCompile(`(?m)^    run ([12]): step=(\d+) event=(\d+) +(.*)$`)
	divergeCtx  = regexp.MustCompile(`(?m)^    step=\d+ event=(\d+) +(.*)$`)
	delayField  = regexp.MustCompile(` delay=(\d+)`)
)

// A world whose second run makes one store request 1ns slower diverges
// at that request's store.issue event: the report names the event's index
// (its line in a -trace dump), prints both lines as the dump does, and
// they differ in the delay by 1ns. (sim's TestCheckDeterminismWorld
// checks the step number against an independent count.)
func TestCheckDeterminismSkewed(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	const seed, skew = 7, 500
	dump := traceLines(t, seed, 5000)
	k := -1
	for i, l := range dump {
		if strings.Contains(l, fmt.Sprintf(" store.issue req=%d ", skew)) {
			k = i
		}
	}
	var out bytes.Buffer
	ok := checkJobTwice(drawn(t, seed, 5000), &out, func(second bool, w *sim.World) {
		if second {
			w.SkewStoreRequest(skew)
		}
	})
	t.Logf("report:\n%s", out.String())
	head := divergeHead.FindStringSubmatch(out.String())
	runs := divergeRun.FindAllStringSubmatch(out.String(), -1)
	if ok || k < 0 || head == nil || head[2] != strconv.Itoa(k) || len(runs) != 2 {
		t.Fatalf("want a divergence at event %d", k)
	}
	if runs[0][4] != dump[k] || runs[1][4] != bumpDelay(t, dump[k]) || runs[0][2] != head[1] || runs[1][3] != head[2] {
		t.Fatalf("diverging lines:\n%s\n%s\nwant the first to be\n%s", runs[0][4], runs[1][4], dump[k])
	}
	ctx := divergeCtx.FindAllStringSubmatch(out.String(), -1)
	for _, c := range ctx {
		if e, _ := strconv.Atoi(c[1]); c[2] != dump[e] {
			t.Fatalf("context line %q, dump line %d %q", c[2], e, dump[e])
		}
	}
	if len(ctx) == 0 || !strings.Contains(out.String(), "reproduce: go run ./cmd/simulate -seed 7 -iters 5000 -faults swarm -check-determinism") {
		t.Fatal("no context lines, or no reproduce line")
	}
}

// When only the second run differs and its rerun does not, the report
// says so and prints no events.
func TestCheckDeterminismUnreproduced(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	seconds := 0
	var out bytes.Buffer
	ok := checkJobTwice(drawn(t, 7, 5000), &out, func(second bool, w *sim.World) {
		if second {
			seconds++
			if seconds == 1 {
				w.SkewStoreRequest(500)
			}
		}
	})
	s := out.String()
	t.Logf("report:\n%s", s)
	if ok || seconds != 2 || !strings.Contains(s, "the second run's rerun differs from it by record") ||
		!strings.Contains(s, "none are printed") || strings.Contains(s, "run 1:") {
		t.Fatalf("report:\n%s", s)
	}
}

func TestParseFlagsCheckDeterminism(t *testing.T) {
	o, err := parseFlags([]string{"-seed", "5", "-check-determinism"})
	if err != nil || !o.twice || o.seed != 5 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range [][]string{{"-check-determinism", "-seeds", "2"}, {"-check-determinism", "-trace", "f"}} {
		if _, err := parseFlags(bad); err == nil || !strings.Contains(err.Error(), "-check-determinism") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// traceLines runs seed with a -trace dump and returns its lines.
func traceLines(t *testing.T, seed, iters uint64) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	j := drawn(t, seed, iters)
	j.trace = f
	j.run()
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// bumpDelay returns line with its delay field one nanosecond longer.
func bumpDelay(t *testing.T, line string) string {
	t.Helper()
	m := delayField.FindStringSubmatchIndex(line)
	if m == nil {
		t.Fatalf("no delay field in %q", line)
	}
	d, _ := strconv.ParseUint(line[m[2]:m[3]], 10, 64)
	return line[:m[2]] + strconv.FormatUint(d+1, 10) + line[m[3]:]
}

// drawn is seed's swarm world.
func drawn(t *testing.T, seed, iters uint64) job {
	t.Helper()
	j, err := drawJob(seed, iters, "swarm")
	if err != nil {
		t.Fatal(err)
	}
	return j
}
