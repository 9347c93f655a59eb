package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

// runSeed draws seed's world and plan under profile and runs it.
func runSeed(t *testing.T, profile string, iters, seed uint64) outcome {
	t.Helper()
	j, err := drawJob(seed, iters, profile)
	if err != nil {
		t.Fatal(err)
	}
	return j.run()
}

// Same seed twice ⇒ the same trace hash; another seed ⇒ another hash.
func TestDeterminism(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	a, b := runSeed(t, "swarm", 20000, 7), runSeed(t, "swarm", 20000, 7)
	if a.res.Hash != b.res.Hash || a.res.Steps != b.res.Steps || a.res.Acks != b.res.Acks {
		t.Fatalf("seed 7 twice: hash %016x vs %016x, steps %d vs %d", a.res.Hash, b.res.Hash, a.res.Steps, b.res.Steps)
	}
	if c := runSeed(t, "swarm", 20000, 8); c.res.Hash == a.res.Hash {
		t.Fatalf("seeds 7 and 8 gave the same hash %016x", a.res.Hash)
	}
	if a.res.Err() != nil {
		t.Fatal(a.res.Err())
	}
}

// A recorded run replayed from its schedule is the same run, event for
// event — what makes a seed file or a shrunk schedule reproduce.
func TestReplayReproducesTheRun(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	rec := runSeed(t, "all", 20000, 11)
	if len(rec.schedule) == 0 {
		t.Fatal("the all profile injected nothing")
	}
	j := rec.job
	j.schedule, j.replay = rec.schedule, true
	rep := j.run()
	if rep.res.Hash != rec.res.Hash {
		t.Fatalf("replaying %d recorded faults gave hash %016x, the run had %016x", len(rec.schedule), rep.res.Hash, rec.res.Hash)
	}
	j.schedule = nil // no faults at all: another run
	if quiet := j.run(); quiet.res.Hash == rec.res.Hash {
		t.Fatal("a replay without faults gave the faulty run's hash")
	}
}

// TestSweep is the swarm sweep `make test` runs: every world must pass,
// and together they must reach every required coverage mark (a mark no
// world reaches is a path the simulator does not test; the optional ones
// are listed in optionalMarks with the engine test that reaches them). A
// failure names the seed; `go run ./cmd/simulate -seed N -iters I -faults
// swarm` reproduces it.
//
// A third of the drawn worlds run the disk WAL: too few of 24 for the
// log's rarer branches (a torn tail, a superseded batch), so the sweep
// goes on past seed 24 with the disk-WAL worlds only, until it ran
// sweepDiskWorlds of them.
//
// make test runs each world for sweepIters steps; make soak for
// SKIPPR_SWEEP_ITERS (100,000, the steps of the sweep before a change).
// The required marks are checked either way: a shorter sweep that
// stopped reaching one fails.
func TestSweep(t *testing.T) {
	seeds, iters, diskWorlds := uint64(24), uint64(sweepIters), sweepDiskWorlds
	if v := os.Getenv("SKIPPR_SWEEP_ITERS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("SKIPPR_SWEEP_ITERS=%q: want a positive number of steps", v)
		}
		iters = n
	}
	if testing.Short() {
		seeds, iters, diskWorlds = 4, 20_000, 0
	}
	var jobs []job
	disk := 0
	for seed := uint64(1); seed <= seeds || disk < diskWorlds; seed++ {
		j, err := drawJob(seed, iters, "swarm")
		if err != nil {
			t.Fatal(err)
		}
		if j.spec.Engine.Disk != nil {
			disk++
		} else if seed > seeds {
			continue
		}
		jobs = append(jobs, j)
	}
	outs := runAll(jobs, &failFast{})
	for _, out := range outs {
		if out.res.Err() != nil {
			t.Errorf("%s\n%s\nreproduce: %s", summary(out.res), strings.Join(out.res.Violations, "\n"), out.job.command(""))
		}
	}
	if testing.Short() {
		return
	}
	c := coverageOf(outs)
	if missed := c.unreached(true); len(missed) > 0 {
		t.Errorf("no world of seeds 1..%d (and disk-WAL worlds up to %d) reached the required marks %v: a path the simulator no longer tests",
			seeds, jobs[len(jobs)-1].seed, missed)
	}
	if missed := c.destUnreached(true); len(missed) > 0 {
		t.Errorf("no world of seeds 1..%d reached the required destination marks %v: a path of a sink the simulator no longer tests",
			seeds, missed)
	}
	if missed := c.world.unreached(true); len(missed) > 0 {
		t.Errorf("no world of seeds 1..%d reached the required source marks %v: a path of a source the simulator no longer tests",
			seeds, missed)
	}
}

// sweepDiskWorlds is how many disk-WAL worlds TestSweep runs: with 28,
// 8 reached a torn tail and 5 a superseded batch when it was set.
const sweepDiskWorlds = 28

// sweepIters is TestSweep's steps per world in make test.
const sweepIters = 60_000

// TestSeeds replays every regression seed under seeds/: its recorded
// world and fault schedule. A file that cannot be replayed as recorded
// fails, naming the file.
func TestSeeds(t *testing.T) {
	files, err := filepath.Glob("../../seeds/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no seed files under seeds/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			sf, err := readSeedFile(f)
			if err != nil {
				t.Fatalf("cannot replay %s as recorded: %v", f, err)
			}
			if out := sf.run(); out.res.Err() != nil {
				t.Fatalf("%s (found: %s)\n%s\n%s", f, sf.found, summary(out.res), strings.Join(out.res.Violations, "\n"))
			}
		})
	}
}

// A seed file round-trips, and every way of getting it wrong is refused
// with a message naming what is wrong.
func TestSeedFileFormat(t *testing.T) {
	j, err := drawJob(5, 1000, "all")
	if err != nil {
		t.Fatal(err)
	}
	j.schedule, j.replay = faults.Schedule{{Kind: faults.Crash, N: 3}, {Kind: faults.LatencySpike, N: 9, Param: 77}}, true
	b, err := seedFile{job: j, found: "a test"}.format()
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseSeedFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.seed != 5 || back.iters != 1000 || back.found != "a test" || back.schedule.String() != j.schedule.String() || back.plan != j.plan {
		t.Fatalf("round trip: %+v", back)
	}
	if back.spec.Summary() != j.spec.Summary() {
		t.Fatalf("world changed in the round trip:\n%s\n%s", j.spec.Summary(), back.spec.Summary())
	}
	text := string(b)
	for _, c := range []struct{ edit, want string }{
		{strings.Replace(text, "iters:", "itres:", 1), "want one of"},
		{strings.Replace(text, `"version":1`, `"version":99`, 1), "version 99"},
		{strings.Replace(text, "crash@3", "crash-typo@3", 1), "unknown fault kind"},
		{strings.Replace(text, `"page_size"`, `"page_sizes"`, 1), "unknown field"},
		{strings.Replace(text, "plan:", "# plan:", 1), `no "plan" line`},
	} {
		if _, err := parseSeedFile([]byte(c.edit)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("edited file: error %v, want one containing %q", err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "seed-x.txt")
	if err := os.WriteFile(path, []byte(strings.Replace(text, "plan:", "plan: {", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSeedFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken file's error does not name it: %v", err)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-seed", "42", "-iters", "1e6", "-faults", "none"})
	if err != nil || o.seed != 42 || o.iters != 1_000_000 || o.profile != "none" {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range [][]string{{"-iters", "0"}, {"-iters", "x"}, {"-faults", "nope"}, {"-seeds", "2", "-trace", "f"},
		{"-seeds", "2", "-replay", "f"}, {"-replay", "f", "-schedule", "crash@1"}, {"stray"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSummaryLine(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	out := runSeed(t, "none", 3000, 3)
	line := summary(out.res)
	for _, field := range []string{"seed=3", "plan=none", "steps=", "sim=", "wall=", "steps/s=", "acks=", "crashes=0",
		"zombies=0", "faults={", "segments=", "orphans_swept=", "worst_recovery={ops=", "hash="} {
		if !strings.Contains(line, field) {
			t.Errorf("summary lacks %q: %s", field, line)
		}
	}
	if out.res.Wall <= 0 || out.res.Wall > time.Minute {
		t.Errorf("wall time %v", out.res.Wall)
	}
}

func TestTraceFile(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	path := filepath.Join(t.TempDir(), "trace.txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := drawJob(11, 2000, "swarm")
	j.trace = f
	r := j.run()
	f.Close()
	plain := runSeed(t, "swarm", 2000, 11)
	if r.res.Hash != plain.res.Hash {
		t.Fatalf("writing a trace changed the run: %016x vs %016x", r.res.Hash, plain.res.Hash)
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.Count(string(b), "\n") < 1000 {
		t.Fatalf("trace file: %d bytes, %v", len(b), err)
	}
}

// The coverage check reports a required mark no world reached, and not an
// optional one.
func TestCoverageUnreached(t *testing.T) {
	var all engine.Marks
	for m := range engine.NumMarks {
		all[m] = 1
	}
	missing := all
	missing[engine.MarkPartRetry] = 0
	missing[engine.MarkBackpressureQueue] = 0 // optional
	c := coverageOf([]outcome{{res: sim.Result{Marks: missing}}})
	if got := c.unreached(true); !slices.Equal(got, []engine.Mark{engine.MarkPartRetry}) {
		t.Fatalf("required unreached %v, want [part-retry]", got)
	}
	if got := c.unreached(false); len(got) != 2 {
		t.Fatalf("unreached %v, want part-retry and backpressure-queue", got)
	}
	if got := coverageOf([]outcome{{res: sim.Result{Marks: all}}}).unreached(false); len(got) != 0 {
		t.Fatalf("all reached, yet %v", got)
	}
	for m, why := range optionalMarks {
		if why == "" || m >= engine.NumMarks {
			t.Errorf("optional mark %d without a reason", m)
		}
	}
}

// Destination marks are required of a sweep only when one of its worlds
// ran their kind, and not the optional ones.
func TestCoverageDestMarks(t *testing.T) {
	pg := sim.WorldSpec{Sinks: []sim.SinkSpec{{Ref: "lake", Kind: "postgres"}}}
	all := map[string]uint64{}
	for _, m := range destMarks {
		all[m.name] = 1
	}
	some := map[string]uint64{markPGOutage: 3}
	if got := coverageOf([]outcome{{job: job{spec: sim.SmallSpec("memory")}, res: sim.Result{DestMarks: some}}}).destUnreached(true); len(got) != 0 {
		t.Fatalf("no postgres world, yet required %v", got)
	}
	c := coverageOf([]outcome{{job: job{spec: pg}, res: sim.Result{DestMarks: some}}, {job: job{spec: pg}}})
	req, un := c.destUnreached(true), c.destUnreached(false)
	if slices.Contains(req, markPGOutage) || slices.Contains(req, markPGRefused) || !slices.Contains(req, markPGZombieCommit) {
		t.Fatalf("required unreached %v", req)
	}
	pgMarks := 0
	for _, m := range destMarks {
		if m.kind == "postgres" {
			pgMarks++
		}
	}
	if len(un) != pgMarks-1 || c.destWorlds[markPGOutage] != 1 || c.destHits[markPGOutage] != 3 {
		t.Fatalf("unreached %v, outage in %d worlds %d times", un, c.destWorlds[markPGOutage], c.destHits[markPGOutage])
	}
	if got := coverageOf([]outcome{{job: job{spec: pg}, res: sim.Result{DestMarks: all}}}).destUnreached(false); len(got) != 0 {
		t.Fatalf("all reached, yet %v", got)
	}
	for m, why := range optionalDestMarks {
		if why == "" || !slices.ContainsFunc(destMarks, func(d destMark) bool { return d.name == m }) {
			t.Errorf("optional destination mark %q unknown or without a reason", m)
		}
	}
}

// The sweep summary counts the disk-WAL worlds, the ones halted on a
// damaged log, their crashes that spared the machine, and each disk
// fault kind over the sweep.
func TestDiskSummary(t *testing.T) {
	disk := sim.WorldSpec{Engine: engine.Config{Disk: engine.DefaultDiskWAL()}}
	outs := []outcome{
		{job: job{spec: disk}, res: sim.Result{Faults: "crash=2 fsync-error=3 bit-flip=1 commit-power-loss=2", Halted: "halted as it should on a flipped bit in the log: x"}},
		{job: job{spec: disk}, res: sim.Result{Faults: "fsync-error=4 slow-io=2 fsync-error-kill=1", KillsOnly: 3, Halted: "halted as it should on a gap a hidden fsync error left: y"}},
		{job: job{spec: sim.WorldSpec{}}, res: sim.Result{Faults: "fsync-error=100", KillsOnly: 50}},
	}
	want := "disk-WAL worlds: 2 of 3 (1 halted on a flipped bit in the log, 1 on a gap a hidden fsync error left, as they should); " +
		"crashes that spared the machine: 3; disk faults fired: fsync-error=7 disk-write-error=0 disk-full=0 bit-flip=1 slow-io=2 fsync-error-kill=1 commit-power-loss=2"
	if got := diskSummary(outs); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// World marks are required of a sweep only when one of its worlds has a
// source that can reach them, and not the optional ones.
func TestCoverageWorldMarks(t *testing.T) {
	plain := sim.SmallSpec("memory") // its HTTP source sends Arrow and JSON lines only
	csv := sim.SmallSpec("memory")
	for i := range csv.Sources {
		if !csv.Sources[i].Replayable {
			csv.Sources[i].Encoding = sim.EncodingMixed3
		}
	}
	if got := coverageOf([]outcome{{job: job{spec: plain}}}).world.unreached(false); len(got) != 0 {
		t.Fatalf("no source that can reach them, yet unreached %v", got)
	}
	c := coverageOf([]outcome{{job: job{spec: csv}}, {job: job{spec: plain}, res: sim.Result{WorldMarks: map[string]uint64{sim.MarkHTTPCSV: 2}}}})
	if got := c.world.unreached(false); !slices.Equal(got, []string{sim.MarkHTTPCSVAsJSON}) {
		t.Fatalf("unreached %v, want only the CSV fallback", got)
	}
	if got := c.world.unreached(true); len(got) != 0 {
		t.Fatalf("required unreached %v: the CSV fallback is optional", got)
	}
	if c := coverageOf([]outcome{{job: job{spec: csv}}}); !slices.Contains(c.world.unreached(true), sim.MarkHTTPCSV) {
		t.Fatalf("a CSV world that sent no CSV: required unreached %v", c.world.unreached(true))
	}
	for m, why := range optionalWorldMarks {
		if why == "" || !slices.ContainsFunc(worldMarks, func(w worldMark) bool { return w.name == m }) {
			t.Errorf("optional world mark %q unknown or without a reason", m)
		}
	}
}
