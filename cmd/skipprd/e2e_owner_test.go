package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// End to end, the real daemon on the local-disk WAL: a DATA_DIR changes
// pipeline. Pipeline a acks rows over HTTP while its sink cannot apply
// them (a file is in the way of the lake's events folder) and is
// SIGKILLed with segments committed and unapplied. Started as b, the
// daemon refuses, naming a, b and what is left, and changes nothing in
// DATA_DIR. Started as b with SKIPPR_DRAIN_PIPELINE=a and the sink
// working, it applies a's rows first, then runs b, whose rows land too:
// every acked row exactly once. Started as b again: no complaint. Then b,
// stopped gracefully, left nothing, and c takes over DATA_DIR without a
// word of complaint.
func TestDaemonOwnerDrain(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs it five times (about 10 s)")
	t.Parallel()
	bin, dataDir, as := ownerWorld(t, "{kind: parquet-dir, path: lake}")
	start := func(env []string) (*proc, string) {
		p := startDaemon(t, bin, dataDir, env...)
		p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
		return p, listenAddr(p.stderrLines())
	}
	events := filepath.Join(dataDir, lakeDir, "events")
	if err := os.MkdirAll(filepath.Dir(events), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, events, "in the way")

	// Pipeline a: rows acked, segments committed, none applied; a crash.
	p, addr := start(as("a"))
	var acked []string
	for i := 0; ; i++ {
		acked = append(acked, postRows(t, addr, "a", i)...)
		if pr, _ := parseProgress(lastProgress(p.stdoutLines())); pr["live_segments"] >= 3 {
			break
		}
		if i > 2000 {
			t.Fatalf("no three live segments after %d requests: %s", i, lastProgress(p.stdoutLines()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.kill(t)
	before := snapshotDir(t, dataDir)

	// b refuses, naming both pipelines, DATA_DIR and what is left.
	p = startDaemon(t, bin, dataDir, as("b")...)
	code := exitCode(t, p)
	logs := strings.Join(p.stderrLines(), "\n")
	refusal := findLine(p.stderrLines(), "start-up failed")
	for _, says := range []string{`pipeline \"a\"`, `pipeline \"b\"`, dataDir, "committed segments not yet applied",
		"oldest snapshot", "SKIPPR_PIPELINE=a", "SKIPPR_DRAIN_PIPELINE=a"} {
		if !strings.Contains(refusal, says) {
			t.Fatalf("exit %d; the refusal should say %s:\n%s", code, says, logs)
		}
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, logs)
	}
	t.Logf("b refused: %s", refusal)
	if after := snapshotDir(t, dataDir); after != before {
		t.Fatalf("the refused start changed DATA_DIR: %s", lineDiff(before, after))
	}
	// Draining another pipeline than the owner is refused too.
	p = startDaemon(t, bin, dataDir, as("b", envDrainPipeline+"=z")...)
	if code := exitCode(t, p); code != 1 || !strings.Contains(findLine(p.stderrLines(), "start-up failed"), `not of \"z\"`) {
		t.Fatalf("drain of z: exit %d:\n%s", code, strings.Join(p.stderrLines(), "\n"))
	}

	// b drains a with the sink working again, then runs.
	if err := os.Remove(events); err != nil {
		t.Fatal(err)
	}
	p, addr = start(as("b", envDrainPipeline+"=a"))
	if findLine(p.stderrLines(), `msg="drained:`) == "" {
		t.Fatalf("b listens before a is drained:\n%s", strings.Join(p.stderrLines(), "\n"))
	}
	if got := lakeIDs(t, filepath.Join(dataDir, lakeDir))["events"]; len(got) != len(acked) {
		t.Fatalf("after the drain the lake holds %d rows, a acked %d", len(got), len(acked))
	}
	for i := range 20 {
		acked = append(acked, postRows(t, addr, "b", i)...)
	}
	p.stop(t)
	slices.Sort(acked)
	if got := lakeIDs(t, filepath.Join(dataDir, lakeDir))["events"]; !slices.Equal(got, acked) {
		t.Fatalf("the lake holds %d rows, a and b acked %d: %s", len(got), len(acked), firstDiff(got, acked))
	}

	// b again: DATA_DIR is b's.
	p, _ = start(as("b"))
	p.waitStderr(t, "ready", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	p.stop(t)
	for _, l := range p.stderrLines() {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "DATA_DIR") {
			t.Fatalf("b's restart complained: %s", l)
		}
	}

	// c: b left nothing, so the rename just happens.
	p, _ = start(as("c"))
	p.waitStderr(t, "ready", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	p.stop(t)
	if findLine(p.stderrLines(), "the old one left nothing unapplied") == "" || findLine(p.stderrLines(), "level=ERROR") != "" {
		t.Fatalf("c's start:\n%s", strings.Join(p.stderrLines(), "\n"))
	}
	if b, _ := os.ReadFile(filepath.Join(dataDir, ownerFile)); !strings.Contains(string(b), "\npipeline c\n") {
		t.Fatalf("the record after c:\n%s", b)
	}
}

// A pipeline killed with its lanes open — rows committed in segments
// whose jobs wait for their file to fill (flush_interval 1h), nothing
// left in the log to replay — is drained at once: the drain writes
// nothing, so no segment of its own would come to cut those lanes; its
// sinks take a job per segment (drainLanes), and the engine cuts an open
// job of such a sink as soon as recovery registers it. Every acked row
// reaches the lake once.
func TestDaemonOwnerDrainOpenLanes(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs it three times")
	t.Parallel()
	bin, dataDir, as := ownerWorld(t, "{kind: parquet-dir, path: lake, flush_interval: 1h}")
	p := startDaemon(t, bin, dataDir, as("a")...)
	p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	addr := listenAddr(p.stderrLines())
	var acked []string
	for i := range 30 {
		acked = append(acked, postRows(t, addr, "a", i)...)
	}
	// The memtable's generations become segments within a flush delay
	// (at most 500 ms) and the log forgets them: wait well past it.
	p.waitStdout(t, "the rows in live segments", func(lines []string) bool {
		pr, ok := parseProgress(last(lines))
		return ok && pr["acked"] == uint64(len(acked)) && pr["live_segments"] > 0
	})
	time.Sleep(3 * time.Second)
	p.kill(t)
	if got := lakeIDs(t, filepath.Join(dataDir, lakeDir))["events"]; len(got) != 0 {
		t.Fatalf("the lake holds %d rows before the drain: the lanes were cut", len(got))
	}

	p = startDaemon(t, bin, dataDir, as("b", envDrainPipeline+"=a")...)
	p.waitStderr(t, "the drain", func(lines []string) bool { return findLine(lines, `msg="drained:`) != "" })
	done := findLine(p.stderrLines(), "done=true")
	if !strings.Contains(done, "replayed_units=0") {
		t.Fatalf("the drain replayed units from the log (their segment would cut the lanes, so this proves nothing): %s", done)
	}
	p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	p.stop(t)
	slices.Sort(acked)
	if got := lakeIDs(t, filepath.Join(dataDir, lakeDir))["events"]; !slices.Equal(got, acked) {
		t.Fatalf("the lake holds %d rows, a acked %d: %s", len(got), len(acked), firstDiff(got, acked))
	}
}

// exitCode waits for p to exit and returns its code.
func exitCode(t *testing.T, p *proc) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(e2eWait):
		t.Fatalf("the daemon still ran after %v:\n%s", e2eWait, strings.Join(p.stderrLines(), "\n"))
		return 0
	}
}

// postRows posts request i of pipeline tag — a few rows with ids
// tag-i-r — to the daemon at addr and requires a 200; it returns the ids.
func postRows(t *testing.T, addr, tag string, i int) []string {
	t.Helper()
	r := ingestRequest{ns: "events", key: fmt.Sprintf("%s-%d", tag, i)}
	var body bytes.Buffer
	for n := range 1 + i%5 {
		r.ids = append(r.ids, fmt.Sprintf("%s-%04d-%d", tag, i, n))
		fmt.Fprintf(&body, `{"id":%q,"n":%d}`+"\n", r.ids[n], n)
	}
	r.body = body.Bytes()
	var a atomic.Value
	a.Store(addr)
	if !postAcked(t, &a, r) {
		t.FailNow()
	}
	return r.ids
}

// ownerWorld builds the daemon and a DATA_DIR for the owner tests, with
// a pipeline file of an HTTP source into sink lake (sink: its flow
// mapping); as gives the environment of a start as pipeline name.
func ownerWorld(t *testing.T, sink string) (bin, dataDir string, as func(name string, env ...string) []string) {
	t.Helper()
	bin, dataDir = buildDaemon(t), t.TempDir()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: "+sink+"\n"+
		"sources:\n  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\"}\n")
	as = func(name string, env ...string) []string {
		return append([]string{envPipelineFile + "=" + pipeline, envPipeline + "=" + name}, env...)
	}
	return bin, dataDir, as
}
