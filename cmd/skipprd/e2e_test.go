package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// End to end: the real binary on the embedded store (the S3 WAL,
// WAL_STORAGE=embedded), run three times on
// one DATA_DIR. The first run ingests for a few seconds and stops on
// SIGINT with exit 0; the second resumes every generator partition
// exactly where the first's WAL committed (no lower than it was acked),
// and is SIGKILLed; the third recovers
// from the crash, resumes no lower than the second started, and stops on
// SIGINT. Compaction is in the engine, so committed segments reach the
// lake as Parquet — and no record reaches it twice across the restarts.

const e2eWait = 90 * time.Second // generous: two fence waits, a cold build, a slow CI box

func TestDaemonEndToEnd(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon three times (about 30 s)")
	t.Parallel() // mostly waits out fences; the other end-to-end tests run meanwhile
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	embedded := envWALStorage + "=embedded" // this test is about the S3 WAL's recovery
	first := startDaemon(t, bin, dataDir, append([]string{embedded, stopGraceLong}, quickLake...)...)
	first.waitStdout(t, "three progress lines with acks", progressLines("acked", 3))
	first.stop(t)
	stopped := first.offsetsLogged(t, "generator stopped at")
	if stopped["generator/events/0"] == 0 {
		t.Fatalf("first run stopped at %v: nothing acked", stopped)
	}
	final, _ := parseProgress(last(first.stdoutLines()))
	if final["ingested"] != final["acked"] {
		t.Fatalf("graceful stop left units unacked: %s", last(first.stdoutLines()))
	}
	// A graceful stop with a healthy sink drains: all applied, WAL empty.
	if final["applied"] != final["acked"] || final["live_segments"] != 0 {
		t.Fatalf("graceful stop did not drain: %s", last(first.stdoutLines()))
	}

	second := startDaemon(t, bin, dataDir, append([]string{embedded}, quickLake...)...)
	second.waitStderr(t, "the generator resuming", func(lines []string) bool {
		return findLine(lines, "generator: resuming from offsets") != ""
	})
	resumed := second.offsetsLogged(t, "generator: resuming from offsets")
	if committed := first.offsetsLogged(t, "the WAL committed up to"); fmt.Sprint(resumed) != fmt.Sprint(committed) {
		t.Fatalf("second run resumed at\n%v\nthe first committed up to\n%v", resumed, committed)
	}
	for k, v := range stopped {
		if resumed[k] < v {
			t.Fatalf("partition %s: the first run was acked up to %d, the second resumed at %d", k, v, resumed[k])
		}
	}
	second.waitStdout(t, "a progress line with new acks", progressLines("acked", 1))
	// A crash this time: SIGKILL, no graceful anything.
	second.kill(t)

	third := startDaemon(t, bin, dataDir, append([]string{embedded, stopGraceLong}, quickLake...)...)
	third.waitStderr(t, "the generator resuming", func(lines []string) bool {
		return findLine(lines, "generator: resuming from offsets") != ""
	})
	for key, v := range third.offsetsLogged(t, "generator: resuming from offsets") {
		if v < resumed[key] {
			t.Fatalf("after the crash %s resumed at %d, below the %d an earlier run had committed", key, v, resumed[key])
		}
	}
	third.waitStdout(t, "a progress line with applied rows", progressLines("applied", 1))
	third.stop(t)
	if p, _ := parseProgress(last(third.stdoutLines())); p["live_segments"] != 0 {
		t.Fatalf("graceful stop after a crash left segments: %s", last(third.stdoutLines()))
	}

	files := checkLake(t, filepath.Join(dataDir, "lake"))
	t.Logf("first run: %d progress lines, startup %s; lake: %v",
		len(first.stdoutLines()), first.startup(), files)
}

// daemonBuild is this package's binary, built once for the whole test
// process (linking it takes about 4 s of CPU; a build per test was a
// third of the package's CPU): tests only run it, never write it.
// TestMain removes it.
var daemonBuild struct {
	once sync.Once
	dir  string
	bin  string
	out  []byte
	err  error
}

// buildDaemon returns this package's binary, built on first use.
func buildDaemon(t testing.TB) string {
	t.Helper()
	// go test puts its own GOROOT/bin first on PATH.
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build the daemon with")
	}
	b := &daemonBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "skipprd-test-daemon-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "skipprd")
		b.out, b.err = exec.Command(gotool, "build", "-buildvcs=auto", "-o", b.bin, ".").CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build: %v\n%s", b.err, b.out)
	}
	return b.bin
}

// TestMain runs the tests, then removes the daemon they built.
func TestMain(m *testing.M) {
	code := m.Run()
	if daemonBuild.dir != "" {
		os.RemoveAll(daemonBuild.dir)
	}
	os.Exit(code)
}

// proc is one daemon process with its output collected line by line.
type proc struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	stdout  []string
	stderr  []string
	readers sync.WaitGroup
	exited  chan error
}

// startDaemon starts bin on dataDir with the extra environment env
// ("NAME=value" each).
// quickLake: lake jobs of 8 MiB or 2 s, not 128 MiB or 5 minutes, for
// a test about something else that waits for rows applied: it sees them
// within seconds however slow a loaded CI box makes the generator.
var quickLake = []string{envLakeFileBytes + "=8MiB", envLakeFlushInterval + "=2s"}

// stopGraceLong: a graceful stop that these tests require to drain waits
// up to a minute for its reclaims (the default, 10 s from the stop's
// start, is shorter than applying a loaded CI box's backlog takes: seen
// 12 s, with one segment left to the next start — the design, which
// engine's TestStopGraceBoundsTheClosesReclaims and sharedDaemon.stop
// cover).
const stopGraceLong = envStopGrace + "=60"

func startDaemon(t testing.TB, bin, dataDir string, env ...string) *proc {
	t.Helper()
	return startCommand(t, bin, nil, dataDir, env...)
}

// startCommand is startDaemon with a command line (args after the
// program name: run --once, check).
func startCommand(t testing.TB, bin string, args []string, dataDir string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(cleanEnv(), envDataDir+"="+dataDir), env...)
	p := &proc{cmd: cmd, exited: make(chan error, 1)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.collect(stdout, &p.stdout)
	p.collect(stderr, &p.stderr)
	go func() {
		p.readers.Wait() // Wait closes the pipes; read them to the end first
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("daemon stderr:\n%s", strings.Join(p.stderrLines(), "\n"))
			t.Logf("daemon stdout (last 10):\n%s", strings.Join(tail(p.stdoutLines(), 10), "\n"))
		}
	})
	return p
}

// cleanEnv is the test's environment without the daemon's variables and
// the AWS configuration, so a developer's shell cannot steer the test,
// and with the admin listener on a free port, so daemons of tests that
// run at once (or a developer's) do not fight over the default one.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case envDataDir, envWALStorage, envBufferBytes, envMaxDelay, envIngestThreads,
			envPipeline, envWALPrefix, envWALBucket, envBucket, envS3PathStyle, envS3Timeout,
			envWALSyncMode, envWALBatchSyncInterval, envWALCommitInterval, envWALSegmentBytes, envWALPartitions,
			envAdminAddr, envLogFormat, envRecoveryGiveUp, envStopGrace, envDrainPipeline, envLakeFileBytes, envLakeFlushInterval, envOnce:
			continue
		}
		if strings.HasPrefix(name, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, envAdminAddr+"=127.0.0.1:0")
}

func (p *proc) collect(r io.Reader, into *[]string) {
	p.readers.Add(1)
	go func() {
		defer p.readers.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			*into = append(*into, sc.Text())
			p.mu.Unlock()
		}
	}()
}

func (p *proc) stdoutLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.stdout...)
}

func (p *proc) stderrLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.stderr...)
}

// progressLines holds once n progress lines show field above zero.
func progressLines(field string, n int) func([]string) bool {
	return func(lines []string) bool {
		seen := 0
		for _, l := range lines {
			if p, ok := parseProgress(l); ok && p[field] > 0 {
				seen++
			}
		}
		return seen >= n
	}
}

func (p *proc) waitStdout(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	p.waitFor(t, what, func() bool { return ok(p.stdoutLines()) })
}

func (p *proc) waitStderr(t testing.TB, what string, ok func([]string) bool) {
	t.Helper()
	p.waitFor(t, what, func() bool { return ok(p.stderrLines()) })
}

// waitFor polls ok until it holds; it fails the test if the daemon exits
// or e2eWait passes first.
//
// ok is asked again after 50 ms, then at most every 250 ms: many tests ask
// whether the lake holds every row, which reads every file in it; asked
// 20 times a second, that read competes for the CPU with the daemon under
// test on a loaded 2-core machine (a NATS test ran out of its window
// under CI's load).
func (p *proc) waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	p.waitForWithin(t, what, e2eWait, ok)
}

// waitForWithin is waitFor with a window of its own.
func (p *proc) waitForWithin(t testing.TB, what string, window time.Duration, ok func() bool) {
	t.Helper()
	p.waitPolling(t, what, window, 250*time.Millisecond, ok)
}

// waitPolling is waitForWithin polling at most every pollMax: a test
// that must act inside a short window (a kill mid-snapshot) polls fast.
func (p *proc) waitPolling(t testing.TB, what string, window, pollMax time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(window)
	for poll := min(50*time.Millisecond, pollMax); !ok(); poll = min(2*poll, pollMax) {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("daemon exited (%v) while waiting for %s", err, what)
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, window)
		}
	}
}

// stop sends SIGINT and requires a graceful exit 0.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("daemon exit after SIGINT: %v, want 0", err)
		}
	case <-ctx.Done():
		t.Fatalf("daemon still running %v after SIGINT", e2eWait)
	}
}

// kill is a crash: SIGKILL, nothing flushed or closed.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-p.exited
	p.exited <- err
}

var offsetAttr = regexp.MustCompile(`(generator/[a-z]+/\d+)=(\d+)`)

// offsetsLogged parses the offsets of the log line with msg.
func (p *proc) offsetsLogged(t *testing.T, msg string) map[string]uint64 {
	t.Helper()
	line := findLine(p.stderrLines(), msg)
	if line == "" {
		t.Fatalf("no log line %q", msg)
	}
	out := map[string]uint64{}
	for _, m := range offsetAttr.FindAllStringSubmatch(line, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		out[m[1]] = v
	}
	if len(out) != 7 {
		t.Fatalf("%q: %d offsets in %q, want the default workload's 7", msg, len(out), line)
	}
	return out
}

func (p *proc) startup() string {
	line := findLine(p.stderrLines(), "msg=ready")
	_, s, _ := strings.Cut(line, "startup=")
	return s
}

func findLine(lines []string, substr string) string {
	for _, l := range lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

var progressField = regexp.MustCompile(`(\w+)=(\d+)\b`)

// parseProgress reads a progress line's counters.
func parseProgress(line string) (map[string]uint64, bool) {
	if !strings.HasPrefix(line, "progress ") {
		return nil, false
	}
	out := map[string]uint64{}
	for _, m := range progressField.FindAllStringSubmatch(line, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		out[m[1]] = v
	}
	return out, true
}

func last(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

func tail(lines []string, n int) []string { return lines[max(0, len(lines)-n):] }

// checkLake requires Parquet files under lake/{namespace}/p_year=…/ and
// reads them all back: the orders snapshot's ids and the events' ids must
// each appear at most once (the restart applied nothing twice). It
// returns the file count per namespace.
func checkLake(t *testing.T, lake string) map[string]int {
	t.Helper()
	if tables := icebergLake(t, lake); tables != nil {
		return checkIcebergLake(t, tables)
	}
	files := map[string]int{}
	ids := map[string]map[string]bool{"orders": {}, "events": {}}
	paths, err := filepath.Glob(filepath.Join(lake, "*", "p_year=*", "p_month=*", "p_day=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		rel, _ := filepath.Rel(lake, path)
		ns := strings.Split(filepath.ToSlash(rel), "/")[0]
		files[ns]++
		if seen, ok := ids[ns]; ok {
			for _, id := range readIDs(t, path) {
				if seen[id] {
					t.Fatalf("%s id %s is in the lake twice (second copy in %s)", ns, id, rel)
				}
				seen[id] = true
			}
		}
	}
	if files["events"] == 0 || files["orders"] == 0 {
		t.Fatalf("lake files per namespace: %v; want Parquet for events and orders", files)
	}
	return files
}

// readIDs returns a Parquet file's first column (order_id or event_id)
// as strings.
func readIDs(t *testing.T, path string) []string {
	t.Helper()
	tbl := readParquet(t, path)
	defer tbl.Release()
	var out []string
	for _, chunk := range tbl.Column(0).Data().Chunks() {
		out = appendIDs(t, out, chunk, path)
	}
	return out
}

// readParquet reads a whole Parquet file; the caller releases it.
func readParquet(t *testing.T, path string) arrow.Table {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return tbl
}

// appendIDs appends an id column's values (string or int64) as strings;
// where names the column's origin in a failure.
func appendIDs(t *testing.T, out []string, col arrow.Array, where string) []string {
	t.Helper()
	switch a := col.(type) {
	case *array.String:
		for i := range a.Len() {
			out = append(out, a.Value(i))
		}
	case *array.Int64:
		for i := range a.Len() {
			out = append(out, strconv.FormatInt(a.Value(i), 10))
		}
	default:
		t.Fatalf("%s: first column is %s", where, col.DataType())
	}
	return out
}

// s3Env is the environment that points the daemon's S3 client at a
// bucket store this test serves, through the standard AWS variables and
// nothing of the developer's.
func s3Env(t testing.TB, endpoint string) []string {
	missing := filepath.Join(t.TempDir(), "none")
	return []string{envS3PathStyle + "=true", "AWS_ENDPOINT_URL_S3=" + endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		// gofakes3 would store the SDK's default aws-chunked framing
		// verbatim (storage.S3ClientOptions.ChecksumWhenRequired).
		"AWS_REQUEST_CHECKSUM_CALCULATION=when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION=when_required",
		"AWS_CONFIG_FILE=" + missing, "AWS_SHARED_CREDENTIALS_FILE=" + missing, "AWS_EC2_METADATA_DISABLED=true"}
}
