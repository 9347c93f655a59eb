package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Same seed twice ⇒ the same trace hash; another seed ⇒ another hash.
func TestDeterminism(t *testing.T) {
	o := options{profile: "swarm", iters: 20000}
	a, b := runSeed(o, 7), runSeed(o, 7)
	if a.Hash != b.Hash || a.Steps != b.Steps || a.Acks != b.Acks {
		t.Fatalf("seed 7 twice: hash %016x vs %016x, steps %d vs %d", a.Hash, b.Hash, a.Steps, b.Steps)
	}
	if c := runSeed(o, 8); c.Hash == a.Hash {
		t.Fatalf("seeds 7 and 8 gave the same hash %016x", a.Hash)
	}
	if a.Err() != nil {
		t.Fatal(a.Err())
	}
}

// TestSweep is the short swarm sweep `make test` runs. A failure names the
// seed; `go run ./cmd/simulate -seed N -iters I -faults swarm` reproduces it.
func TestSweep(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 4
	}
	o := options{profile: "swarm", iters: 20000}
	for i := range seeds {
		seed := uint64(1000 + i)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			if r := runSeed(o, seed); r.Err() != nil {
				t.Fatalf("%s\nreproduce: go run ./cmd/simulate -seed %d -iters %d -faults swarm", summary(r), seed, o.iters)
			}
		})
	}
}

// TestSeeds replays every regression seed under seeds/.
func TestSeeds(t *testing.T) {
	files, err := filepath.Glob("../../seeds/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			o, seed := readSeedFile(t, f)
			if r := runSeed(o, seed); r.Err() != nil {
				t.Fatalf("%s\n%s", summary(r), strings.Join(r.Violations, "\n"))
			}
		})
	}
}

func readSeedFile(t *testing.T, path string) (options, uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	seed, err1 := strconv.ParseUint(fields["seed"], 10, 64)
	iters, err2 := strconv.ParseFloat(fields["iters"], 64)
	if err1 != nil || err2 != nil || fields["faults"] == "" || fields["found"] == "" {
		t.Fatalf("%s: want seed, iters, faults and found lines", path)
	}
	return options{profile: fields["faults"], iters: uint64(iters)}, seed
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-seed", "42", "-iters", "1e6", "-faults", "none"})
	if err != nil || o.seed != 42 || o.iters != 1_000_000 || o.profile != "none" {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range [][]string{{"-iters", "0"}, {"-iters", "x"}, {"-faults", "nope"}, {"-seeds", "2", "-trace", "f"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSummaryLine(t *testing.T) {
	r := runSeed(options{profile: "none", iters: 3000}, 3)
	line := summary(r)
	for _, field := range []string{"seed=3", "plan=none", "steps=", "sim=", "wall=", "steps/s=", "acks=", "crashes=0",
		"faults={", "segments=", "orphans_swept=", "worst_recovery={ops=", "hash="} {
		if !strings.Contains(line, field) {
			t.Errorf("summary lacks %q: %s", field, line)
		}
	}
	if r.Wall <= 0 || r.Wall > time.Minute {
		t.Errorf("wall time %v", r.Wall)
	}
}

func TestTraceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.txt")
	r := runSeed(options{profile: "swarm", iters: 2000, trace: path}, 11)
	plain := runSeed(options{profile: "swarm", iters: 2000}, 11)
	if r.Hash != plain.Hash {
		t.Fatalf("writing a trace changed the run: %016x vs %016x", r.Hash, plain.Hash)
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.Count(string(b), "\n") < 1000 {
		t.Fatalf("trace file: %d bytes, %v", len(b), err)
	}
}
