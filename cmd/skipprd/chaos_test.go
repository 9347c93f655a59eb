package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// The judge sees each way a lake can betray what was acked.
func TestChaosJudge(t *testing.T) {
	acked := ackedByNamespace(segment.Offsets{
		{Key: "generator/events/0", Value: 2}, {Key: "generator/events/1", Value: 1}, {Key: "other/x", Value: 9},
	})
	if acked["events"] != 3 || len(acked) != 1 {
		t.Fatalf("acked %v, want events=3 only", acked)
	}
	for _, c := range []struct {
		name  string
		lake  map[string]uint64
		want  verdict
		clean bool
	}{
		{"exact", map[string]uint64{"a": 1, "b": 1, "c": 1}, verdict{Acked: 3, FoundOnce: 3}, true},
		{"duplicate", map[string]uint64{"a": 1, "b": 2, "c": 1}, verdict{Acked: 3, FoundOnce: 2, Duplicates: 1}, false},
		{"missing", map[string]uint64{"a": 1, "b": 1}, verdict{Acked: 3, FoundOnce: 2, Missing: 1}, false},
		{"unexpected", map[string]uint64{"a": 1, "b": 1, "c": 1, "d": 1}, verdict{Acked: 3, FoundOnce: 4, Unexpected: 1}, false},
	} {
		v := judge(acked, map[string]map[string]uint64{"events": c.lake})
		if v != c.want || v.clean() != c.clean {
			t.Errorf("%s: %v (clean %t), want %+v (clean %t)", c.name, v, v.clean(), c.want, c.clean)
		}
	}
	if v := judge(acked, map[string]map[string]uint64{"events": {"a": 1, "b": 1, "c": 1}, "stray": {"z": 1}}); v.clean() {
		t.Errorf("a namespace nobody acked judged clean: %v", v)
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
