package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/logbuf"
	"github.com/skipprd/skipprd/internal/s3proxy"
)

// Failures are loud: what an operator sees when the store or a sink
// fails, in the daemon's own log, for each case of docs/OPERATING.md
// "When things fail".

const loudBucket = "skipprd-loud"

// s3WALEnv points the daemon's S3 WAL at a test endpoint through the
// standard AWS variables, with a short request timeout (and so a short
// recovery fence).
func s3WALEnv(t *testing.T, endpoint string) []string {
	return append(s3Env(t, endpoint), envWALStorage+"=s3", envWALBucket+"="+loudBucket, envS3Timeout+"=2")
}

// runUntilExit runs the daemon with env until it exits or wait passes
// (then the test fails), and returns its exit code and log. A process of
// its own: the AWS SDK reads the real environment.
func runUntilExit(t *testing.T, env []string, wait time.Duration) (int, string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("reads exit codes of a child process")
	}
	d := startDaemon(t, buildDaemon(t), t.TempDir(), env...)
	select {
	case err := <-d.exited:
		d.exited <- err
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, strings.Join(d.stderrLines(), "\n")
	case <-time.After(wait):
		t.Fatalf("the daemon still ran after %v:\n%s", wait, strings.Join(d.stderrLines(), "\n"))
		return 0, ""
	}
}

// A store that refuses every write (credentials without write access):
// recovery cannot even claim the pipeline. It says so and exits 1 at
// once, naming the refusal — not a silent hang.
func TestLoudRecoveryRefusedWrites(t *testing.T) {
	t.Parallel()
	p := s3proxy.Start(t, loudBucket)
	p.Set(s3proxy.RefuseWrite)
	code, logs := runUntilExit(t, s3WALEnv(t, p.URL), 30*time.Second)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, logs)
	}
	for _, want := range []string{`msg="recovery failed"`, "AccessDenied", "recovery gave up", "refused by the store"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

// A store answering 500 to every write: each recovery attempt says why,
// and after SKIPPR_RECOVERY_GIVE_UP_SECONDS the daemon exits 1 with it.
func TestLoudRecoveryGivesUp(t *testing.T) {
	t.Parallel()
	p := s3proxy.Start(t, loudBucket)
	p.Set(s3proxy.FailWrite)
	start := time.Now()
	code, logs := runUntilExit(t, append(s3WALEnv(t, p.URL), envRecoveryGiveUp+"=4"), 60*time.Second)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, logs)
	}
	// Every attempt but the last is logged with its reason; the give-up
	// names the last one and how many there were.
	logged := strings.Count(logs, `msg="recovery failed; retrying"`)
	m := regexp.MustCompile(`recovery gave up after (\d+) attempts`).FindStringSubmatch(logs)
	if m == nil || !strings.Contains(logs, "InternalError") {
		t.Fatalf("no give-up naming the store's error:\n%s", logs)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 || logged != n-1 {
		t.Fatalf("%d attempts, %d logged as retried; want every attempt but the last:\n%s", n, logged, logs)
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("gave up after %v, before the 4 s it was given", took)
	}
}

// A store down for a while during ingest — its listener gone, every
// connection refused — is logged when it starts, reminded while it lasts
// and logged when it clears; ingest resumes within a few seconds of the
// store answering again (retries back off to at most 5 s). Then a store
// that cuts connections mid-request (outcomes unknown) for a few seconds.
// Nothing acked is lost or stored twice.
func TestLoudStoreOutage(t *testing.T) {
	skipShortOrWindows(t, "a 12 s outage of the store under a running daemon")
	t.Parallel()
	p := s3proxy.Start(t, loudBucket)
	dataDir := t.TempDir()
	d := startDaemon(t, buildDaemon(t), dataDir, append(s3WALEnv(t, p.URL), envBufferBytes+"=65536", envMaxDelay+"=0.2", stopGraceLong)...)
	d.waitStdout(t, "rows acked", progressLines("acked", 2))
	p.Stop()
	d.waitStderr(t, "the failure logged", func(lines []string) bool { return findLine(lines, `msg="failing; retrying"`) != "" })
	time.Sleep(12 * time.Second)
	if findLine(d.stderrLines(), `msg="still failing; retrying"`) == "" {
		t.Errorf("no reminder during a 12 s outage:\n%s", strings.Join(d.stderrLines(), "\n"))
	}
	ackedDuring := lastAcked(d.stdoutLines())
	p.Resume(t)
	back := time.Now()
	d.waitStdout(t, "acks again", func(lines []string) bool { return lastAcked(lines) > ackedDuring })
	took := time.Since(back)
	t.Logf("ingest resumed %v after the store answered again", took)
	if took > 7*time.Second {
		t.Errorf("ingest resumed %v after the store answered again; want a few seconds", took)
	}
	d.waitStderr(t, "the recovery logged", func(lines []string) bool { return findLine(lines, `msg=recovered`) != "" })
	p.Set(s3proxy.Cut)
	time.Sleep(3 * time.Second)
	p.Set(s3proxy.Pass)
	acked := lastAcked(d.stdoutLines())
	d.waitStdout(t, "acks after the cuts", func(lines []string) bool { return lastAcked(lines) > acked })
	d.stop(t)
	checkGeneratorLake(t, d, dataDir)
}

// A sink that fails for a while — the data folder of one namespace's
// table is in the way (a file where the folder must be) — is logged,
// reminded and cleared; the segments wait in the WAL, and after the stop
// every acked record is in the lake once.
func TestLoudSinkFailing(t *testing.T) {
	skipShortOrWindows(t, "a sink failing for 12 s under a running daemon")
	t.Parallel()
	dataDir := t.TempDir()
	d := startDaemon(t, buildDaemon(t), dataDir, append([]string{stopGraceLong}, quickLake...)...)
	d.waitStdout(t, "rows applied", progressLines("applied", 2))
	// Rows of any namespace may be the first applied: wait for events'.
	events := filepath.Join(dataDir, "lake", "skipprd", "events", "data")
	d.waitFor(t, "the events table's data folder", func() bool { _, err := os.Stat(events); return err == nil })
	if err := os.Rename(events, events+".aside"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, events, "in the way")
	d.waitStderr(t, "the sink failure logged", func(lines []string) bool {
		return findLine(lines, `op="sink lake/events"`) != ""
	})
	time.Sleep(12 * time.Second)
	if !slices.ContainsFunc(d.stderrLines(), func(l string) bool {
		return strings.Contains(l, `msg="still failing; retrying"`) && strings.Contains(l, "lake/events")
	}) {
		t.Errorf("no reminder while the sink failed")
	}
	if err := os.Remove(events); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(events+".aside", events); err != nil {
		t.Fatal(err)
	}
	d.waitStderr(t, "the sink's recovery logged", func(lines []string) bool {
		return slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, "msg=recovered") && strings.Contains(l, "lake/events")
		})
	})
	d.stop(t)
	checkGeneratorLake(t, d, dataDir)
}

// lastAcked is the acked count of the last progress line.
func lastAcked(lines []string) uint64 {
	p, _ := parseProgress(lastProgress(lines))
	return p["acked"]
}

// checkGeneratorLake: after a graceful stop, the lake under dataDir holds
// exactly the generator records the daemon committed, once each.
func checkGeneratorLake(t *testing.T, d *proc, dataDir string) {
	t.Helper()
	want := generatedIDs(t, d.offsetsLogged(t, "the WAL committed up to"))
	got := lakeIDs(t, filepath.Join(dataDir, "lake"))
	for ns, ids := range want {
		if !slices.Equal(got[ns], ids) {
			t.Errorf("%s: the lake holds %d records, the generator committed %d: %s", ns, len(got[ns]), len(ids), firstDiff(got[ns], ids))
		}
	}
}

// A setting kept within bounds or meaningless with the chosen WAL is
// named at start-up with the value given and the value used.
func TestLoudSettingsAdjusted(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want []adjusted
	}{
		{map[string]string{envBufferBytes: "1", envIngestThreads: "4096"}, []adjusted{
			{Var: envBufferBytes, Given: "1", Used: "4194304"}, {Var: envIngestThreads, Given: "4096", Used: "32"}}},
		// S3_PATH_STYLE addresses the lake's and the sources' S3 clients
		// too: never ignored (a MinIO lake beside a local WAL needs it).
		{map[string]string{envWALStorage: "embedded", envWALBucket: "b", envS3PathStyle: "true"}, []adjusted{
			{Var: envWALBucket, Given: "b", Used: "ignored"}}},
		{map[string]string{envS3PathStyle: "true", envS3Timeout: "5"}, []adjusted{
			{Var: envS3Timeout, Given: "5", Used: "ignored"}}},
		{map[string]string{envWALStorage: "s3", envWALBucket: "b", envWALPartitions: "4"}, []adjusted{
			{Var: envWALPartitions, Given: "4", Used: "ignored"}}},
		{map[string]string{envBufferBytes: "8388608", envIngestThreads: "8", envWALPartitions: "4"}, nil},
	} {
		getenv := envOf(c.env)
		cfg, err := parseConfig(getenv)
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.adjustments(getenv)
		for i := range got {
			if got[i].Why == "" {
				t.Errorf("%v: %s adjusted without a reason", c.env, got[i].Var)
			}
			got[i].Why = ""
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: adjusted %+v, want %+v", c.env, got, c.want)
		}
	}
	// The daemon says them at start-up.
	ctx, cancel := context.WithCancel(context.Background())
	logs2 := &logbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, envOf(map[string]string{envDataDir: t.TempDir(), envAdminAddr: "off", envBufferBytes: "1"}), io.Discard, newLogger(logText, logs2))
	}()
	waitLog(t, logs2, "msg=ready", "")
	cancel()
	<-done
	if line := findLine(strings.Split(logs2.String(), "\n"), `msg="setting not used as given"`); !strings.Contains(line, "var=BUFFER_THRESHOLD_BYTES given=1 used=4194304") {
		t.Fatalf("the daemon did not say it changed BUFFER_THRESHOLD_BYTES:\n%s", logs2.String())
	}
}

// A writer superseded by a second daemon on the same WAL (a zombie) fails
// closed and says why: its alert names the fence and the epochs, and it
// exits 1 with the reason, while the new writer goes on.
func TestLoudFencedWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons on one S3 WAL")
	}
	if runtime.GOOS == "windows" {
		t.Skip("reads exit codes of a child process")
	}
	t.Parallel()
	p := s3proxy.Start(t, loudBucket)
	bin := buildDaemon(t)
	env := append(s3WALEnv(t, p.URL), envBufferBytes+"=65536", envMaxDelay+"=0.2")
	a := startDaemon(t, bin, t.TempDir(), env...)
	a.waitStdout(t, "rows acked", progressLines("acked", 2))
	b := startDaemon(t, bin, t.TempDir(), env...)
	b.waitStderr(t, "the second daemon ready", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	var err error
	select {
	case err = <-a.exited:
		a.exited <- err
	case <-time.After(e2eWait):
		t.Fatal("the superseded daemon still runs")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("the superseded daemon exited with %v, want 1", err)
	}
	alert := findLine(a.stderrLines(), "kind=fenced")
	if !strings.Contains(alert, "fenced by a newer writer") || !strings.Contains(alert, "epoch") || strings.Contains(alert, "<nil>") {
		t.Errorf("the fence alert does not say why: %q", alert)
	}
	b.waitStdout(t, "the new writer acking", progressLines("acked", 2))
	b.stop(t)
}
