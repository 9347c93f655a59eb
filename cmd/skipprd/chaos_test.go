package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/generator"
)

// The judge sees each way a lake can betray what was acked — a missing
// record and a foreign one in the same namespace do not cancel out.
func TestChaosJudge(t *testing.T) {
	acked := map[string][]string{"events": {"a", "b", "c"}}
	for _, c := range []struct {
		name string
		lake map[string]map[string]uint64
		want verdict
	}{
		{"exact", map[string]map[string]uint64{"events": {"a": 1, "b": 1, "c": 1}}, verdict{Acked: 3, FoundOnce: 3}},
		{"duplicate", map[string]map[string]uint64{"events": {"a": 1, "b": 3, "c": 1}}, verdict{Acked: 3, FoundOnce: 3, Duplicates: 2}},
		{"missing", map[string]map[string]uint64{"events": {"a": 1, "b": 1}}, verdict{Acked: 3, FoundOnce: 2, Missing: 1}},
		{"unexpected", map[string]map[string]uint64{"events": {"a": 1, "b": 1, "c": 1, "d": 2}}, verdict{Acked: 3, FoundOnce: 3, Unexpected: 2}},
		{"missing and foreign", map[string]map[string]uint64{"events": {"a": 1, "b": 1, "z": 1}}, verdict{Acked: 3, FoundOnce: 2, Missing: 1, Unexpected: 1}},
		{"another namespace", map[string]map[string]uint64{"events": {"a": 1, "b": 1, "c": 1}, "stray": {"a": 1}}, verdict{Acked: 3, FoundOnce: 3, Unexpected: 1}},
		{"in the wrong namespace", map[string]map[string]uint64{"orders": {"a": 1, "b": 1, "c": 1}}, verdict{Acked: 3, Missing: 3, Unexpected: 3}},
	} {
		v := judge(acked, c.lake)
		if v != c.want || v.clean() != (c.name == "exact") {
			t.Errorf("%s: %v (clean %t), want %+v", c.name, v, v.clean(), c.want)
		}
	}
}

// The acked ids are the generator's records below each committed offset,
// and only the generator's offsets count.
func TestChaosAckedIDs(t *testing.T) {
	gen := generator.New(generator.Config{})
	offsets := segment.Offsets{{Key: gen.OffsetKey("events", 1), Value: 3}, {Key: "other/x", Value: 9}}
	got, err := ackedIDs(offsets)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := gen.Records("events", 1, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want := map[string]uint64{}
	if err := addIDs(rec.Column(0), want); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got["events"]) != 3 {
		t.Fatalf("acked ids %v, want the 3 of events/1", got)
	}
	for _, id := range got["events"] {
		if want[id] != 1 {
			t.Errorf("id %s is not one of records 0..2 of events/1 (%v)", id, want)
		}
	}
}

// Chaos mode refuses a bad value, and a pipeline file, naming the
// variable; both exit 2.
func TestChaosInvalidEnvironment(t *testing.T) {
	for _, env := range []map[string]string{
		{envChaosMode: "maybe"},
		{envChaosMode: "yes", envChaosKills: "0"},
		{envChaosMode: "yes", envPipelineFile: "skipprd.yaml"},
		{envChaosChild: "kill=soon"},
	} {
		code, logs := runPipelineEnv(t, env)
		if code != 2 || !strings.Contains(logs, "SKIPPR_CHAOS") {
			t.Errorf("%v: exit %d, logs:\n%s", env, code, logs)
		}
	}
}

// SKIPPR_CHAOS_MODE=yes on the embedded store: the daemon SIGKILLs itself
// mid-ingest three times, then judges the lake — every acked record
// exactly once — and exits 0.
func TestChaosModeEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the daemon three times on the embedded store (about 40 s)")
	}
	if runtime.GOOS == "windows" {
		t.Skip("chaos mode kills with SIGKILL")
	}
	t.Parallel()
	bin := buildDaemon(t)
	cmd := exec.Command(bin)
	cmd.Env = append(cleanEnv(), envDataDir+"="+t.TempDir(), envWALStorage+"=embedded",
		envChaosMode+"=yes", envChaosKills+"=3", envChaosSeed+"=42")
	out, err := cmd.Output()
	stdout := string(out)
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chaos run: %v\nstdout tail: %s\nstderr:\n%s", err, last(strings.Split(stdout, "\n")), stderr)
	}
	line := findLine(strings.Split(stdout, "\n"), "chaos verdict:")
	if !strings.Contains(line, "CLEAN") || strings.Contains(line, "NOT CLEAN") || !strings.Contains(line, "duplicates=0 missing=0 unexpected=0") || strings.Contains(line, "acked=0 ") {
		t.Fatalf("verdict %q", line)
	}
	t.Log(line)
}
