package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

// A seed file (seeds/*.txt) records one world that once broke an oracle,
// so that `make test` replays that very world and those very faults
// whatever the world generator has become since:
//
//	seed: 74                       the world's seed (latencies, lags, order)
//	iters: 100000                  steps of the run
//	faults: all                    the profile it was drawn from (a label)
//	found: one line on what it caught, and the fix
//	world: {…}                     the WorldSpec, one line of JSON
//	plan: {…}                      the fault plan, one line of JSON
//	schedule: crash@123 …          every fault injected (may repeat: lines join)
//
// Reading is strict: an unknown key, a missing one, a world spec of
// another version or an unknown fault kind is an error that names the
// file — a seed that cannot be replayed as recorded must fail loudly, not
// silently replay something else.
type seedFile struct {
	job
	found string
}

var seedKeys = []string{"seed", "iters", "faults", "found", "world", "plan", "schedule"}

func readSeedFile(path string) (seedFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return seedFile{}, err
	}
	sf, err := parseSeedFile(b)
	if err != nil {
		return seedFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return sf, nil
}

func parseSeedFile(b []byte) (seedFile, error) {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		k, v, ok := strings.Cut(text, ":")
		k = strings.TrimSpace(k)
		if !ok || !knownSeedKey(k) {
			return seedFile{}, fmt.Errorf("line %d: want one of %s followed by a colon, got %q", line, strings.Join(seedKeys, ", "), truncate(text))
		}
		if k == "schedule" {
			fields[k] += " " + v
		} else if _, dup := fields[k]; dup {
			return seedFile{}, fmt.Errorf("line %d: %s given twice", line, k)
		} else {
			fields[k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return seedFile{}, err
	}
	return seedFromFields(fields)
}

func seedFromFields(f map[string]string) (seedFile, error) {
	for _, k := range seedKeys {
		if _, ok := f[k]; !ok && k != "schedule" {
			return seedFile{}, fmt.Errorf("no %q line", k)
		}
	}
	var sf seedFile
	var err error
	if sf.seed, err = strconv.ParseUint(f["seed"], 10, 64); err != nil {
		return seedFile{}, fmt.Errorf("seed: %w", err)
	}
	iters, err := strconv.ParseFloat(f["iters"], 64)
	if err != nil || iters < 1 {
		return seedFile{}, fmt.Errorf("iters %q: want a positive number", f["iters"])
	}
	sf.iters, sf.profile, sf.found, sf.replay = uint64(iters), f["faults"], f["found"], true
	if sf.spec, err = sim.UnmarshalSpec([]byte(f["world"])); err != nil {
		return seedFile{}, err
	}
	if err := json.Unmarshal([]byte(f["plan"]), &sf.plan); err != nil {
		return seedFile{}, err
	}
	if sf.schedule, err = faults.ParseSchedule(f["schedule"]); err != nil {
		return seedFile{}, err
	}
	return sf, nil
}

func knownSeedKey(k string) bool {
	for _, s := range seedKeys {
		if s == k {
			return true
		}
	}
	return false
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// format renders a seed file; the schedule is wrapped at about 100
// characters a line.
func (sf seedFile) format() ([]byte, error) {
	world, err := sim.MarshalSpec(sf.spec)
	if err != nil {
		return nil, err
	}
	plan, err := json.Marshal(sf.plan)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "seed: %d\niters: %d\nfaults: %s\nfound: %s\nworld: %s\nplan: %s\n",
		sf.seed, sf.iters, sf.profile, oneLine(sf.found), world, plan)
	line := ""
	for _, e := range strings.Fields(sf.schedule.String()) {
		if len(line)+len(e) > 100 {
			fmt.Fprintf(&b, "schedule: %s\n", line)
			line = ""
		}
		line = strings.TrimSpace(line + " " + e)
	}
	if line != "" || len(sf.schedule) == 0 {
		fmt.Fprintf(&b, "schedule: %s\n", line)
	}
	return b.Bytes(), nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
